package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/source"
)

// Trigger values recorded with a release.
const (
	TriggerAutomated = "automated"
	TriggerSync      = "sync"
)

// pass is one reconcile of one application. Steps fill it in order.
type pass struct {
	app     application.Application
	owner   string
	request *SyncRequest // non-nil for an explicit sync
	plan    *Diff        // a dry run's preview
	// snapshot is the swarm read shared by every application of a batch,
	// set from read by awaitSnapshot before the first step that needs it.
	snapshot *snapshot
	read     *batchRead

	rev      *source.Revision
	values   *source.Revision // the values repository's, see fetchValues
	rendered *compose.Rendered
	// refs are the values the render took from secret stores (secrets.go).
	refs  []secretstore.Used
	chart *charts.ChartRef // set when rendered from a chart, see chart.go
	// declared is what the pass's manifest declares; conversion is that
	// manifest's conversion, handed to the deploy of the same manifest so
	// the backend converts nothing again (see converted).
	declared   *compose.Stack
	conversion *compose.Conversion
	latest     *charts.Release
	action     charts.Action

	// base is the backend of the application's destination; backend is
	// base decorated for this application (out-of-band notifier,
	// allowlist, credentials) where it can be.
	base    charts.Backend
	backend charts.Backend

	drifted []string // scoped services whose live spec drifted
	missing []string // scoped services declared but absent

	// ord is the order of the manifest (waves, hooks), see waves.go.
	ord *ordered
	// syncBegun is set by the first step that writes for a sync;
	// syncFailRan once the SyncFail hooks ran; waved when applyWaves
	// deployed every service, leaving apply only the record to write.
	syncBegun, syncFailRan, waved bool

	// rolloutNext is the soonest a rollout of this pass wants deciding
	// again (see rollouts.go); zero when none does.
	rolloutNext time.Time
	// rolloutSteps are the rollout decisions that changed something,
	// reported once the pass recorded them.
	rolloutSteps []rolloutStep
	// routes are the traffic splits the pass decided, liveRoutes those
	// recorded on the swarm when it began; routesKnown is set once the
	// rollout step worked them out (see RolloutRoutes).
	routes, liveRoutes []RolloutRoute
	routesKnown        bool
	// liveRollouts are the rollouts as the swarm records them when the
	// pass began, shown instead of the decided ones (status.Rollouts) by
	// a pass that deployed nothing; rolloutsRan is set once the rollout
	// step began deciding them.
	liveRollouts []application.RolloutStatus
	rolloutsRan  bool
	// takenCmds are the operators' commands this pass took, by service.
	takenCmds map[string]rollout.Command
	// degradedByRollout is set when the status is Degraded only because
	// a rollout was aborted or could not be decided.
	degradedByRollout bool

	// rollbackOf is the record a rollback pass redeploys.
	rollbackOf *charts.Release
	// uncoloured is the manifest as declared, before the rollout step
	// wrote its colours into p.rendered; empty when it wrote none.
	uncoloured string
	// asRecorded is set when the pass deploys a record that cannot be
	// rolled out again: one made before records kept their Desired
	// manifest, whose Manifest already holds a rollout's colours.
	asRecorded bool

	deployed *charts.DeployResult
	healed   *charts.DeployResult
	// readBacks are the checks of what the daemon kept of this pass's
	// writes, on their way (checkWritesKept).
	readBacks []*readBack
	// healthRead is confirm's fresh read of the stack when the sweep
	// started it beside its own reads (see sweepStep).
	healthRead chan stackRead
	recorded   *charts.Release
	// lostRecordRace counts the times this pass found its revision number
	// taken by another writer.
	lostRecordRace int

	// status is written only from the pass's goroutine: the backend calls
	// the out-of-band notifier synchronously, inside the write it reports.
	status application.Status
	log    *slog.Logger
	// observed is set once the pass has judged health from a read of the
	// swarm (see applyHealth), whether or not that read succeeded; readErr
	// is that read's error.
	observed bool
	readErr  error
	// judged is the read of the stack the status's health was last judged
	// from; nil when none could be trusted.
	judged []charts.ServiceState
	// hooks are the hooks' states as the pass last read them, by name,
	// and hookLogs the redacted log tails of failed ones, by job id.
	hooks    map[string]application.HookStatus
	hookLogs map[string][]string
	// pins are the store versions a recorded revision names while it is
	// rendered again for a rollback (see useRecord); nil otherwise.
	pins map[string]secretstore.Pin
}

// snapshot is one read of the swarm for many stacks; err is set when the read
// failed, in which case no stack in it can be trusted.
type snapshot struct {
	// dest and backend are the swarm read; nil backend outside a batch.
	dest    string
	backend charts.Backend
	stacks  map[string][]charts.ServiceState
	err     error

	// Network names are not stack-scoped, so one listing serves every
	// application of the batch; it is made on first use.
	netOnce  sync.Once
	netNames map[string]string
	netErr   error

	// Live services and the release-head check of every stack in the batch,
	// each read on first use, when the backend can answer for all of them
	// at once; a batch then reads each a constant number of times however
	// many applications it has.
	liveOnce sync.Once
	live     map[string]map[string]swarm.Service // nil: read each stack on its own

	headOnce sync.Once
	heads    map[string]*charts.Release // the kept record each answer is about
	current  map[string]bool            // nil: check each record on its own
}

// newSnapshot takes a batch's one look at the swarm for stacks
// (capability.ReadStacksLive). When that look carried the services' specs
// too, the batch's live drift is answered from it and the services are not
// listed again.
func newSnapshot(ctx context.Context, dest string, b charts.Backend, stacks []string) *snapshot {
	states, live, err := capability.ReadStacksLive(ctx, b, stacks)
	s := &snapshot{dest: dest, backend: b, stacks: states, err: err}
	if err == nil && live != nil {
		s.liveOnce.Do(func() { s.live = live })
	}
	return s
}

// liveServices answers stack's live services from one listing of every
// stack of the batch, made on first use, when the backend can batch it
// (capability.ReadLiveServices). ok is false when it cannot, when the batch
// read failed or when stack is not in the batch: the caller then reads the
// stack on its own, so a failed batch read costs no pass its own answer.
func (s *snapshot) liveServices(ctx context.Context, b charts.Backend, stack string) (map[string]swarm.Service, bool) {
	if s == nil || s.err != nil {
		return nil, false
	}
	if _, in := s.stacks[stack]; !in {
		return nil, false
	}
	s.liveOnce.Do(func() {
		live, batched, err := capability.ReadLiveServices(ctx, b, slices.Sorted(maps.Keys(s.stacks)))
		if batched && err == nil {
			s.live = live
		}
	})
	m, ok := s.live[stack]
	return m, ok
}

// isHead reports whether known, the record c keeps for stack, was found to
// be the newest of its release by one check of every record kept for the
// batch's stacks, made on first use (capability.CheckLatestReleases). false
// means not known to be: the caller checks on its own. A record c replaced
// since is never vouched for, since the answer was about another one.
func (s *snapshot) isHead(ctx context.Context, c *Controller, stack string, known *charts.Release) bool {
	if s == nil || known == nil || s.backend == nil {
		return false
	}
	if _, in := s.stacks[stack]; !in {
		return false
	}
	s.headOnce.Do(func() {
		heads := map[string]*charts.Release{}
		var kept []charts.Release
		c.relMu.Lock()
		for st := range s.stacks {
			if r := c.releases[relKey{s.dest, st}]; r != nil && r.Name == st {
				heads[st] = r
				kept = append(kept, *r)
			}
		}
		c.relMu.Unlock()
		if len(kept) == 0 {
			return
		}
		current, batched, err := capability.CheckLatestReleases(ctx, s.backend, kept)
		if batched && err == nil {
			s.heads, s.current = heads, current
		}
	})
	return s.heads[stack] == known && s.current[stack]
}

// networkNames lists the swarm's networks once per snapshot. If the backend
// implements NetworkNamer the map is filled, otherwise it is nil and network
// attachments go uncompared.
func (s *snapshot) networkNames(ctx context.Context, b charts.Backend) (map[string]string, error) {
	s.netOnce.Do(func() {
		if nn, ok := capability.As[capability.NetworkNamer](b); ok {
			s.netNames, s.netErr = nn.LiveNetworkNames(ctx)
		}
	})
	return s.netNames, s.netErr
}

// awaitSnapshot waits for the batch's read of the swarm, once.
func (p *pass) awaitSnapshot() {
	if p.read != nil {
		p.snapshot = p.read.wait()
		p.read = nil
	}
}

// stackRead is one read of a stack's services and tasks.
type stackRead struct {
	states  []charts.ServiceState
	trusted bool
	err     error
}

// readStackAsync reads p's stack on a goroutine of its own; the channel
// gives the answer once.
func readStackAsync(ctx context.Context, p *pass) chan stackRead {
	ch := make(chan stackRead, 1)
	go func() {
		var r stackRead
		r.states, r.trusted, r.err = capability.ReadStack(ctx, p.backend, p.app.Stack)
		ch <- r
	}()
	return ch
}

// latestRevision is the newest recorded revision number, 0 before the first.
func (p *pass) latestRevision() int {
	if p.latest == nil {
		return 0
	}
	return p.latest.Revision
}

// deployLabels are the service labels a write of this pass stamps.
func (p *pass) deployLabels(revision int) map[string]string {
	return map[string]string{
		labels.Owner:    p.owner,
		labels.Release:  p.app.Stack,
		labels.Revision: strconv.Itoa(revision),
		labels.Commit:   p.rev.Commit,
	}
}

func splitOwner(owner string) (controller, app string, ok bool) {
	for i := len(owner) - 1; i >= 0; i-- {
		if owner[i] == '/' {
			return owner[:i], owner[i+1:], i > 0 && i < len(owner)-1
		}
	}
	return "", "", false
}

func shortCommit(c string) string {
	if len(c) > 12 && !isChartRevision(c) {
		return c[:12]
	}
	return c
}

// now is the controller's clock.
func (c *Controller) now() time.Time { return c.opts.Clock() }

// pass runs the steps for one application and always publishes a status.
func (c *Controller) pass(ctx context.Context, app application.Application, req *SyncRequest, snap *snapshot) (res Result) {
	return c.passIn(ctx, app, req, &batchRead{done: closedDone, snap: snap})
}

// closedDone is the done channel of a read that is already there.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// passIn is pass within a batch whose read of the swarm may still be on its
// way: the steps that read nothing of the swarm run before it arrives.
func (c *Controller) passIn(ctx context.Context, app application.Application, req *SyncRequest, read *batchRead) (res Result) {
	c.mu.Lock()
	var prev application.Status
	if a, ok := c.apps[app.Name]; ok {
		prev = a.status
	}
	c.mu.Unlock()
	started := c.now()
	p := &pass{
		app:     app,
		owner:   c.opts.ControllerID + "/" + app.Name,
		request: req,
		read:    read,
		status:  prev,
		log:     c.log.With("app", app.Name, "stack", app.Stack),
	}
	// The fetch step leases the checkout; no other fetch prunes it until
	// the pass is over.
	defer func() { p.rev.Release(); p.values.Release() }()
	p.status.Name, p.status.Stack, p.status.Destination, p.status.Set = app.Name, app.Stack, destination(app), setName(app)
	p.status.OutOfBand = nil
	p.status.Corrected = nil
	p.status.Waiting = ""
	var err error
	p.base, err = c.backendOf(app)
	p.status.Unavailable = c.unavailable(p.base)
	if err == nil {
		p.backend, err = c.appBackend(p)
	}
	if err == nil {
		err = c.runSteps(ctx, p)
	}
	p.awaitSnapshot() // a pass that failed early still reports health from it
	c.joinReadBacks(ctx, p)
	gated := errors.Is(err, errGated)
	if gated {
		err = nil
		if p.status.Waiting != "" {
			p.log.Info("sync held, nothing written", "action", p.action, "waiting", p.status.Waiting)
		} else {
			p.log.Info("manual application planned, waiting for a sync", "action", p.action)
		}
	}
	if err != nil {
		// Never the previous pass's judgement: this pass's own, or Unknown.
		if !p.observed {
			c.healthAfterEarlyFailure(ctx, p, prev, err)
		} else {
			c.healthAfterFailedComparison(p, err)
		}
		syncAfterFailure(p, err)
	}
	c.noteWrote(p)
	c.keepRoutes(p)
	if (err != nil || gated) && p.deployed == nil {
		c.returnRolloutCommands(p)
		if p.rolloutsRan {
			// What was decided did not reach the swarm: the status says
			// what runs, so a command that is later forgotten (a leader
			// change) cannot look done.
			p.status.Rollouts = p.liveRollouts
		}
	}
	c.finish(p, err)
	c.wakeDependents(p)
	c.reportChanges(p, prev)
	c.observeOutcome(p, err, gated, c.now().Sub(started))
	res = Result{App: app.Name, Action: p.action, Deployed: p.deployed, Healed: p.healed, Status: p.status, Plan: p.plan, NextCheck: p.rolloutNext, Err: err}
	if p.recorded != nil {
		res.Revision = p.recorded.Revision
	}
	return res
}

// finish records the pass's outcome in its status and logs it once.
func (c *Controller) finish(p *pass, err error) {
	p.status.LastPass = c.now()
	if err == nil {
		p.status.LastError = ""
		c.publish(p)
		return
	}
	msg := redact.Text(fault.WithApp(p.app.Name, err).Error())
	p.status.LastError = msg
	c.emit(p, events.SyncFailed, "", msg, map[string]any{"kind": string(KindOf(err))})
	c.publish(p)
	p.log.Error("pass failed, nothing more was applied", "kind", KindOf(err), "error", msg)
}

// publish stores p's status as the application's current one.
func (c *Controller) publish(p *pass) {
	c.mu.Lock()
	if a, ok := c.apps[p.app.Name]; ok {
		a.status = p.status
		a.takenCmds = nil
	}
	c.mu.Unlock()
}

// converted is a manifest converted for the pass's stack: what it declares,
// which the pass reads, and the conversion, which the deploy of the same
// manifest is handed so the backend does not convert the text again (nil
// when the render came from the render cache, which keeps no conversion).
type converted struct {
	conv     *compose.Conversion
	declared *compose.Stack
}

// convert converts manifest for the pass's stack without the swarm.
func (p *pass) convert(ctx context.Context, manifest string) (converted, error) {
	conv, err := compose.Prepare(ctx, manifest, p.app.Stack)
	if err != nil {
		return converted{}, err
	}
	declared, err := conv.Stack(ctx, nil)
	if err != nil {
		return converted{}, err
	}
	return converted{conv: conv, declared: declared}, nil
}

// use makes cv the pass's manifest's conversion.
func (p *pass) use(cv converted) {
	p.declared, p.conversion = cv.declared, cv.conv
}
