package reconcile

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/sopsage"
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
	refs     []secretstore.Used
	chart    *charts.ChartRef // set when rendered from a chart, see chart.go
	declared *compose.Stack
	latest   *charts.Release
	action   charts.Action

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

// errGated ends a pass early without failing it: a manual application that
// was planned and reported but not asked to sync.
var errGated = errors.New("gated")

// fetch resolves the application's revision to a commit and its tree.
func (c *Controller) fetch(ctx context.Context, p *pass) error {
	if err := c.fetchSource(ctx, p); err != nil {
		return err
	}
	return c.fetchValues(ctx, p)
}

func (c *Controller) fetchSource(ctx context.Context, p *pass) error {
	if p.app.Source.FromRepository() {
		return c.fetchChart(ctx, p)
	}
	revision := p.app.Source.Revision
	if p.request != nil && p.request.Revision != "" {
		revision = p.request.Revision
	}
	began := c.now()
	rev, err := c.opts.Fetcher.Fetch(ctx, source.Request{
		RepoURL:     p.app.Source.RepoURL,
		Revision:    revision,
		Credentials: p.app.Source.Credentials,
		Path:        p.app.Source.Path,
	})
	c.opts.Metrics.ObserveGitFetch(p.app.Source.RepoURL, c.now().Sub(began), err)
	if err != nil {
		if c.rollbackWithoutSource(ctx, p, err) {
			return nil
		}
		return fetchFailed("fetch", err)
	}
	p.rev = rev
	p.status.SeenRevision = rev.Commit
	return nil
}

// render turns the checkout into a manifest and converts it without the
// swarm, so that everything a deploy could object to is found before any
// write.
func (c *Controller) render(ctx context.Context, p *pass) error {
	if p.request != nil && p.request.Rollback > 0 {
		return c.renderRollback(ctx, p, p.request.Rollback)
	}
	if p.app.Source.Chart != nil {
		ids, err := c.identities(p)
		if err != nil {
			return err
		}
		return c.renderChart(ctx, p, ids)
	}
	r, declared, err := c.renderAt(ctx, p, p.rev)
	if err != nil {
		return err
	}
	p.rendered, p.declared = r, declared
	return nil
}

// identities are the age identities that decrypt this application's SOPS
// files: its own key, else its project's, else the controller's. An own or
// project key replaces the controller's, so a repository cannot have
// another team's files decrypted by copying them in: they are encrypted to
// a key this application is not given. The file is read every pass, so a
// rotated key is picked up.
func (c *Controller) identities(p *pass) (*sopsage.Identities, error) {
	k, field := p.app.SOPSKey()
	if k == nil {
		return c.opts.SOPS, nil
	}
	ids, err := sopsage.ReadIdentityFile(k.AgeKeyFile)
	if err != nil {
		return nil, transient("render", fmt.Errorf("%s: %w", field, err))
	}
	return ids, nil
}

// renderAt renders the application at rev, or returns what an earlier
// render of the same input gave: same commit, same application settings,
// same key material (see renderCache). What it returns is shared with the
// cache and must not be changed.
func (c *Controller) renderAt(ctx context.Context, p *pass, rev *source.Revision) (*compose.Rendered, *compose.Stack, error) {
	ids, err := c.identities(p)
	if err != nil {
		return nil, nil, err
	}
	key := renderKey(p.app, rev.Commit, ids.Fingerprint(), c.opts.RenderLimits)
	res := c.stores.For(ctx, p.app)
	if p.pins != nil {
		// A recorded revision's versions: neither from the cache nor for it.
		return c.renderWith(ctx, p, rev, ids, res.Pinned(p.pins))
	}
	if e, ok := c.renders.get(p.app.Name, key); ok {
		same, err := sameRefs(res, e.refs)
		if err != nil {
			return nil, nil, secretFailed(err)
		}
		if same {
			p.refs = e.refs
			return e.rendered, e.declared, nil
		}
		res = c.stores.For(ctx, p.app)
	}
	r, declared, err := c.renderWith(ctx, p, rev, ids, res)
	if err != nil {
		return nil, nil, err
	}
	c.renders.put(p.app.Name, renderEntry{key: key, rendered: r, declared: declared, steady: &steadyMark{}, refs: p.refs}, c.knownApp)
	return r, declared, nil
}

// renderWith renders the application at rev, resolving store references
// through res, and notes in p what the stores gave.
func (c *Controller) renderWith(ctx context.Context, p *pass, rev *source.Revision, ids *sopsage.Identities, res *secretstore.Resolution) (*compose.Rendered, *compose.Stack, error) {
	d := compose.Dir{
		SecretRef: secretRefFunc(res),
		Root:      rev.Dir,
		Path:      p.app.Source.Path,
		Files:     p.app.Source.Compose.Files,
		EnvFiles:  p.app.Source.Compose.EnvFiles,
		Decrypt:   ids.Decrypt,
		SealKey:   ids.SealKey(),
		Limits:    c.opts.RenderLimits,
	}
	r, err := c.opts.Render(p.app.Stack, d)
	if err != nil {
		if storeFailure(err) {
			return nil, nil, secretFailed(err)
		}
		return nil, nil, stalled("render", partialHint(err, rev))
	}
	p.refs = res.Used()
	declared, err := compose.Convert(ctx, r.Manifest, p.app.Stack, nil)
	if err != nil {
		return nil, nil, stalled("render", err)
	}
	return r, declared, nil
}

// partialHint says, on a failure to read a tree that holds only the
// application's path, why files outside it are missing.
func partialHint(err error, rev *source.Revision) error {
	if rev == nil || rev.Partial == "" {
		return err
	}
	return fmt.Errorf("%w (the repository's tree is over the git tree budget, so only %s was written: files outside it are absent)", err, rev.Partial)
}

// plan compares the manifest with the newest release record.
func (c *Controller) plan(ctx context.Context, p *pass) error {
	latest, err := c.latestReleaseIn(ctx, p, p.snapshot)
	if err != nil {
		return transient("plan", err)
	}
	if latest != nil && !c.mayTakeOver(latest.Owner, p.app.Name) {
		return stalled("plan", fmt.Errorf("stack %q is owned by %q, not by this controller (%q)", p.app.Stack, latest.Owner, c.opts.ControllerID))
	}
	p.latest = latest
	p.status.Pinned = ""
	if pinned(latest, p) {
		// A rollback holds while git still points where it pointed then.
		// Automated passes stay on the record; an explicit sync leaves it.
		p.status.Pinned = pinMessage(latest)
		if p.request == nil {
			if err := c.useRecord(ctx, p, latest); err != nil {
				return err
			}
		}
	}
	p.action = charts.Plan(p.rendered.Manifest, p.owner, latest)
	if latest != nil {
		p.status.LastAppliedRevision = latest.Revision
		p.status.SecretRefs = refStatus(latest.SecretRefs)
		p.status.Chart = chartLabel(latest.Chart)
		p.status.Revision = latest.Commit
	}
	return nil
}

// mayTakeOver reports whether a stack recorded as owned by owner may be
// deployed by this controller's application app. Another controller's stack
// never is; another application of this controller's is (a rename hands the
// stack over), since the applications file already refuses two applications
// on one stack.
func (c *Controller) mayTakeOver(owner, app string) bool {
	id, _, ok := splitOwner(owner)
	return ok && id == c.opts.ControllerID
}

// observe reads what runs and records sync and health before anything is
// written, so a pass that fails later still leaves an honest status.
func (c *Controller) observe(ctx context.Context, p *pass) error {
	snap := p.snapshot
	if snap == nil {
		s, err := capability.ReadStacks(ctx, p.base, []string{p.app.Stack})
		snap = &snapshot{stacks: s, err: err}
	}
	c.applyHealth(p, snap)
	switch p.action {
	case charts.Unchanged:
		p.status.Sync = application.Synced
		p.status.SyncReason = application.ReasonNone
	default:
		p.status.Sync = application.OutOfSync
		p.status.SyncReason = application.ReasonGit
	}
	c.publish(p)
	return nil
}

// gate stops a manual application that was not asked to sync: it has been
// planned and reported, and that is all it gets.
func (c *Controller) gate(ctx context.Context, p *pass) error {
	if p.request != nil && p.request.DryRun {
		p.plan = c.dryRunPlan(ctx, p)
		return errGated
	}
	if p.app.SyncPolicy.Automated == nil && p.request == nil {
		// Not applied, but what a sync would remove is still worth showing.
		if err := c.sweepStep(ctx, p); err != nil {
			p.log.Warn("could not work out pending removals", "error", err)
		}
		return errGated
	}
	return c.hold(p)
}

// apply deploys a changed manifest and records the revision. An unchanged
// plan writes nothing at all.
func (c *Controller) apply(ctx context.Context, p *pass) error {
	if p.action == charts.Unchanged {
		return nil
	}
	if !p.waved {
		if err := c.beginSync(ctx, p); err != nil || p.action == charts.Unchanged {
			return err
		}
		manifest, err := p.serviceManifest()
		if err != nil {
			return stalled("apply", err)
		}
		// Hook jobs are not part of it: the hook steps run them.
		res, err := p.backend.DeployStack(ctx, charts.DeployRequest{
			Stack:    p.app.Stack,
			Manifest: manifest,
			Secrets:  p.rendered.Secrets,
			Sealed:   p.rendered.Sealed,
			Labels:   p.deployLabels(p.latestRevision() + 1),
			Adopt:    p.app.Adopt,
		})
		if err != nil {
			// The daemon's InvalidArgument is bad input too: the same
			// manifest would be refused again, so wait for a new commit.
			return deployError("apply", err)
		}
		p.deployed = &res
	}
	next := p.latestRevision() + 1
	rec := charts.Release{
		Name:     p.app.Stack,
		Revision: next,
		Owner:    p.owner,
		Manifest: p.rendered.Manifest,
		Desired:  p.uncoloured,
		Commit:   p.rev.Commit,
		Author:   p.rev.Author,
		Message:  p.rev.Message,
		Time:     c.now(),
		Trigger:  TriggerAutomated,
		Chart:    p.chart,
		Set:      setRef(p.app),
	}
	if p.request == nil && pinned(p.latest, p) {
		// A rollback's rollout goes on under its pin: each step's record
		// is still that rollback, of the same commit, pinned the same.
		l := p.latest
		rec.Commit, rec.Author, rec.Message, rec.Trigger = l.Commit, l.Author, l.Message, l.Trigger
		rec.PinnedCommit, rec.PinnedValuesCommit = l.PinnedCommit, l.PinnedValuesCommit
	}
	rotated := c.recordRefs(p, &rec)
	if p.request != nil {
		rec.Trigger = TriggerSync
		if p.request.Rollback > 0 {
			rec.Trigger = fmt.Sprintf("rollback to revision %d", p.request.Rollback)
			rec.Commit, rec.Author, rec.Message = p.rollbackOf.Commit, p.rollbackOf.Author, p.rollbackOf.Message
			rec.PinnedCommit = p.rev.Commit
			if p.values != nil {
				rec.PinnedValuesCommit = p.values.Commit
			}
		}
		if p.request.By != "" {
			rec.Trigger += " by " + p.request.By
		}
	}
	if rotated != "" {
		// The cause is the rotation when the commit stayed; with a new
		// commit as well, the rotation is added to the ordinary cause.
		if rec.Trigger == TriggerAutomated && p.latest != nil && p.latest.Commit == rec.Commit {
			rec.Trigger = rotated
		} else {
			rec.Trigger += "; " + rotated
		}
	}
	return c.record(ctx, p, rec)
}

// checkLatest makes sure, right before the first write, that the record the
// pass planned against is still the swarm's newest, and plans again when it
// is not: the next revision number is taken from the swarm, not from memory.
func (c *Controller) checkLatest(ctx context.Context, p *pass) error {
	fresh, err := capability.LatestRelease(ctx, p.base, p.app.Stack, p.latest)
	if err != nil {
		return transient("apply", fmt.Errorf("check the newest release record: %w", err))
	}
	if fresh == p.latest {
		return nil
	}
	c.forgetRelease(destination(p.app), p.app.Stack)
	if fresh != nil && !c.mayTakeOver(fresh.Owner, p.app.Name) {
		return stalled("apply", fmt.Errorf("stack %q is owned by %q, not by this controller (%q)", p.app.Stack, fresh.Owner, c.opts.ControllerID))
	}
	p.latest = fresh
	p.action = charts.Plan(p.rendered.Manifest, p.owner, fresh)
	if p.action == charts.Unchanged {
		// Another writer deployed and recorded this very manifest since
		// the plan: nothing is left to do, and the status says so.
		p.log.Info("the manifest was recorded meanwhile by another writer; nothing to deploy", "revision", fresh.Revision)
		p.status.Sync, p.status.SyncReason = application.Synced, application.ReasonNone
		p.status.LastAppliedRevision, p.status.Revision = fresh.Revision, fresh.Commit
	}
	return nil
}

// record stores the revision apply deployed. The swarm keeps the record, so
// nothing is cached here: confirm reads it back. A revision number another
// writer took first (two controllers during a start-first update, or one
// that read the same history) is never overwritten: the history is read
// again, and the deploy either turns out to be what that writer recorded or
// is planned and applied once more under the next number.
func (c *Controller) record(ctx context.Context, p *pass, rec charts.Release) error {
	err := p.backend.RecordRelease(ctx, rec, p.app.History)
	c.forgetRelease(destination(p.app), p.app.Stack)
	if errors.Is(err, charts.ErrRecordExists) {
		return c.recordTaken(ctx, p, rec, err)
	}
	if err != nil {
		return transient("record", err)
	}
	p.recorded = &rec
	p.log.Info("deployed revision", "revision", rec.Revision, "commit", shortCommit(p.rev.Commit),
		"created", len(p.deployed.Created), "updated", len(p.deployed.Updated), "unchanged", len(p.deployed.Unchanged), "writes", p.deployed.Writes)
	return nil
}

// recordTaken handles a revision number found taken when recording rec.
func (c *Controller) recordTaken(ctx context.Context, p *pass, rec charts.Release, taken error) error {
	latest, err := c.readLatestRelease(ctx, p)
	if err != nil {
		return transient("record", fmt.Errorf("%w; re-reading the history failed: %w", taken, err))
	}
	if latest != nil && charts.Plan(rec.Manifest, rec.Owner, latest) == charts.Unchanged {
		// The other writer recorded this very manifest for this owner:
		// the deploy and the record agree, so there is nothing to add.
		p.log.Warn("revision was recorded meanwhile by another writer with the same manifest; keeping that record", "revision", latest.Revision)
		p.recorded = latest
		return nil
	}
	p.lostRecordRace++
	if latest == nil || p.lostRecordRace > 1 {
		return transient("record", fmt.Errorf("revision %d of %s: %w", rec.Revision, p.app.Stack, taken))
	}
	if !c.mayTakeOver(latest.Owner, p.app.Name) {
		return stalled("record", fmt.Errorf("stack %q was recorded meanwhile as owned by %q, not by this controller (%q)", p.app.Stack, latest.Owner, c.opts.ControllerID))
	}
	p.log.Warn("revision number was taken by another writer; deploying again under the next one",
		"revision", rec.Revision, "newest", latest.Revision, "owner", latest.Owner)
	p.latest = latest
	p.action = charts.Plan(p.rendered.Manifest, p.owner, latest)
	// Another manifest was deployed meanwhile: deploy this one whole again.
	p.waved = false
	return c.apply(ctx, p)
}

// confirm plans again after a deploy. A release that still differs right
// after its own deploy is reported rather than redeployed in a loop.
func (c *Controller) confirm(ctx context.Context, p *pass) error {
	if p.recorded == nil && p.healed == nil {
		c.joinReadBacks(ctx, p)
		return nil
	}
	// Health after a write is read fresh: the batch snapshot predates it.
	// The read does not depend on the record's, so both are made at once,
	// if the sweep did not start it already.
	health := p.healthRead
	if health == nil {
		health = readStackAsync(ctx, p)
	}
	// The checks of what the daemon kept run while these reads are made;
	// their report joins the status before the pass publishes it.
	defer c.joinReadBacks(ctx, p)
	if p.recorded != nil {
		// Read back from the swarm, not from memory: a record write that
		// was acknowledged and lost, or one another writer replaced,
		// must fail the pass rather than report it Synced.
		latest, err := c.readLatestRelease(ctx, p)
		if err != nil {
			return transient("confirm", fmt.Errorf("read back revision %d: %w", p.recorded.Revision, err))
		}
		switch {
		case latest == nil:
			return transient("confirm", fmt.Errorf("release %s has no record on the swarm right after revision %d was recorded", p.app.Stack, p.recorded.Revision))
		case latest.Revision != p.recorded.Revision:
			return transient("confirm", fmt.Errorf("the newest record of release %s is revision %d of %s, not revision %d recorded by this pass", p.app.Stack, latest.Revision, latest.Owner, p.recorded.Revision))
		}
		if a := charts.Plan(p.rendered.Manifest, p.owner, latest); a != charts.Unchanged {
			return transient("confirm", fmt.Errorf("release %s still plans as %s right after revision %d was recorded", p.app.Stack, a, p.recorded.Revision))
		}
		p.status.Sync = application.Synced
		p.status.SyncReason = application.ReasonNone
		p.status.Revision = p.recorded.Commit
		p.status.LastAppliedRevision = p.recorded.Revision
		p.status.SecretRefs = refStatus(p.recorded.SecretRefs)
		p.status.Chart = chartLabel(p.recorded.Chart)
		p.status.LastSyncTime = c.now()
		p.status.Pinned = ""
		if p.recorded.PinnedCommit != "" {
			p.status.Pinned = pinMessage(p.recorded)
		}
		c.emit(p, events.SyncSucceeded, "", fmt.Sprintf("revision %d deployed (%s)", p.recorded.Revision, p.recorded.Trigger), nil)
		c.reportRolloutSteps(p)
	}
	r := <-health
	snap := &snapshot{stacks: map[string][]charts.ServiceState{}, err: r.err}
	if r.trusted {
		snap.stacks[p.app.Stack] = r.states
	}
	c.applyHealth(p, snap)
	return nil
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
