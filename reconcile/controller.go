// Package reconcile runs the loop that converges each application's stack to
// its repository. A pass is the step table in steps.go, in order: fetch,
// render, plan, rollout, observe, drift, gate, the sync steps (presync,
// waves, postsync, apply), correct, wait, sweep, hooks, confirm, rollback
// (docs/design.md walks through it). It holds
// only a charts.Backend; every richer feature is asked for through package
// capability, and a missing one is reported in the application's status.
//
// One Controller drives every application. Passes are started in batches by
// one scheduler so that the swarm is read once per batch, however many
// applications are due; each pass then runs on its own goroutine, so a slow
// repository never holds up another application.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flotilla-gitops/flotilla/analysis"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/sopsage"
)

// Options configure a Controller.
type Options struct {
	// SecretStores reads the values compose secrets name by reference
	// (see secrets.go). Default: a new secretstore.Stores.
	SecretStores *secretstore.Stores
	// ControllerID names this controller in owner stamps
	// ("<controller-id>/<application>"). Default "flotilla".
	ControllerID string
	// Backend is the local swarm, the destination
	// application.LocalDestination. Required unless Backends holds it.
	Backend charts.Backend
	// Backends are the swarms by destination name, each with its own batch
	// read and its own failures; Backend, when set, is the local one.
	// An application whose destination is in neither fails its passes,
	// naming the destination. Default: only Backend.
	Backends map[string]charts.Backend
	// Fetcher provides revisions. Required.
	Fetcher Fetcher
	// Charts fetches charts from chart repositories (source.chart.repoURL).
	// Nil: such applications fail their fetch step, naming the cause.
	Charts ChartFetcher
	// Render makes a manifest. Default compose.Render.
	Render Renderer
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Clock is the time source. Default time.Now.
	Clock func() time.Time
	// Tick is how often the scheduler looks for due applications.
	// Default 1s.
	Tick time.Duration
	// Events receives what happens (sync started/succeeded/failed, drift,
	// health, prune). Nil publishes nothing.
	Events Publisher
	// Metrics records pass outcomes and status gauges. Nil records nothing.
	Metrics *metrics.Metrics
	// SOPS decrypts SOPS-encrypted files of applications that name no age
	// key file of their own. Nil still recognises encrypted files and
	// refuses them, never deploying ciphertext.
	SOPS *sopsage.Identities
	// ForbiddenSecrets names secrets and configs no stack may mount or
	// declare: the controller's own.
	ForbiddenSecrets map[string]struct{}
	// PruneOrphans removes the stacks of applications that left the
	// applications file (controller --prune). Default false: they are
	// reported and kept.
	PruneOrphans bool
	// RenderLimits bound each render: the size of every file it reads and
	// of the manifest it writes. Zero fields take compose's defaults
	// (compose.DefaultMaxFileBytes, compose.DefaultMaxManifestBytes).
	RenderLimits compose.Limits
	// RenderBox, when set, renders charts in a child process with its own
	// memory, CPU and time limits, so a template that runs away costs its
	// own pass and never the controller. Nil renders in this process,
	// bounded only by the chart engine's own budget.
	RenderBox *renderbox.Box
	// Backoff bounds the retry delay after a transient failure.
	// Default 5s doubling to the application's interval.
	Backoff time.Duration
	// SwarmReadTimeout bounds the one read of the swarm a batch of passes
	// shares, so a daemon that stops answering costs that batch an
	// Unknown health within this long instead of holding it. Default 30s.
	SwarmReadTimeout time.Duration
	// OrphanSweepTimeout bounds one look for (and sweep of) the stacks of
	// removed applications. Default 2m.
	OrphanSweepTimeout time.Duration
	// QueueLimit is how many explicit requests (sync, rollback) may wait
	// per application; one more is refused at once. Default 16.
	QueueLimit int
	// MaxConcurrentPasses bounds the passes of applications that have run
	// before. Applications on their first pass have a lane of their own, a
	// quarter as wide (at least one): loading thousands of new applications
	// then neither starves the ones already running nor holds thousands of
	// renders in memory at once. Default 32.
	MaxConcurrentPasses int
}

func (o *Options) defaults() {
	if o.SecretStores == nil {
		o.SecretStores = secretstore.New()
	}
	if o.ControllerID == "" {
		o.ControllerID = "flotilla"
	}
	if o.Render == nil {
		o.Render = compose.Render
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 5 * time.Second
	}
	if o.SwarmReadTimeout <= 0 {
		o.SwarmReadTimeout = DefaultSwarmReadTimeout
	}
	if o.OrphanSweepTimeout <= 0 {
		o.OrphanSweepTimeout = DefaultOrphanSweepTimeout
	}
	if o.QueueLimit <= 0 {
		o.QueueLimit = DefaultQueueLimit
	}
	if o.MaxConcurrentPasses <= 0 {
		o.MaxConcurrentPasses = DefaultMaxConcurrentPasses
	}
}

// Defaults of the scheduler's bounds, exported for the controller's flags.
const (
	DefaultSwarmReadTimeout    = 30 * time.Second
	DefaultOrphanSweepTimeout  = 2 * time.Minute
	DefaultQueueLimit          = 16
	DefaultMaxConcurrentPasses = 32
)

// SyncRequest asks a manual (or automated) application to apply now.
type SyncRequest struct {
	// By names who asked, for the release record and the logs.
	By string
	// Prune lets this sync's sweep delete, even when the application's
	// policy does not prune.
	Prune bool
	// DryRun plans and reports without writing anything.
	DryRun bool
	// Revision, when set, deploys this commit (or ref) instead of the one
	// the application tracks.
	Revision string
	// Rollback, when above zero, redeploys the manifest of that recorded
	// revision instead of rendering git.
	Rollback int
}

// Result is what one pass did.
type Result struct {
	App    string
	Action charts.Action
	// Deployed is set when the pass deployed.
	Deployed *charts.DeployResult
	// Healed is set when the pass corrected live drift.
	Healed *charts.DeployResult
	// Revision is the release revision recorded, 0 if none.
	Revision int
	Status   application.Status
	// Plan is what a dry-run sync would write and remove; nil otherwise.
	Plan *Diff
	// NextCheck is when a rollout of the pass wants deciding again; the
	// loop runs the application then if nothing runs it sooner.
	NextCheck time.Time
	Err       error
}

// appState is the controller's bookkeeping for one application.
type appState struct {
	app      application.Application
	status   application.Status
	next     time.Time
	running  bool
	failures int
	pending  []*queued
	sweep    sweepState
	last     Result // of the newest pass the loop ran
	// rolloutCmds are operators' commands waiting for the next pass, by
	// service (see RolloutCommand).
	rolloutCmds map[string]rollout.Command
	// takenCmds are the commands the running pass took, shown as pending
	// until it publishes its status.
	takenCmds map[string]rollout.Command
	// routes are the traffic splits as of the newest pass that worked
	// them out, and routesKnown whether one did (see RolloutRoutes).
	routes      []RolloutRoute
	routesKnown bool

	// rolledBack holds the services seen rolled back while the manifest
	// was rolledBackManifest; they are not healed until it changes.
	rolledBack         map[string]bool
	rolledBackManifest string
	// drift is what the drift comparison remembers between passes.
	drift driftMemory
	// degraded watches the newest sync for an automatic rollback.
	degraded degradedWatch

	// refreshed is set by Refresh while a pass runs: another pass is due
	// as soon as this one ends.
	refreshed bool
}

// queued is one waiting request and everyone waiting for its result:
// identical requests merge into one, so each gets the same answer.
type queued struct {
	req     SyncRequest
	waiters []chan Result // each buffered for one result
}

// answer sends res to every waiter. It never blocks.
func (q *queued) answer(res Result) {
	for _, w := range q.waiters {
		w <- res
	}
}

// orphanInterval is how often Run looks for stacks of removed applications.
const orphanInterval = 10 * time.Minute

// Controller reconciles a set of applications.
type Controller struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	setMu sync.Mutex // serialises SetApplications
	apps  map[string]*appState
	wake  chan struct{}

	orphans        []Orphan
	orphanFailures map[string]map[string]int
	// stopped is the reason Run ended; requests are then refused.
	stopped error

	// A pass holds a slot of one lane while it runs: firstLane for an
	// application's first pass, steadyLane for every later one.
	firstLane, steadyLane chan struct{}
	// appsChanged makes Run look for orphaned stacks at once after
	// SetApplications removed or moved an application.
	appsChanged atomic.Bool

	// backends are the swarms by destination (Options.Backends and Backend).
	backends map[string]charts.Backend

	relMu    sync.Mutex
	releases map[relKey]*charts.Release // newest record per stack, a cache of the swarm's

	// analysis keeps each rollout's current analysis interval (in
	// memory only: a restart starts the interval afresh).
	analysis analysis.Runner

	renders   renderCache         // see rendercache.go
	stores    *secretstore.Stores // see secrets.go
	gates     gates               // see gates.go
	generated generatedStacks     // see sets.go
}

// New returns a Controller for apps, which must already be defaulted and
// validated (application.Defaults, application.Validate).
func New(opts Options, apps []application.Application) (*Controller, error) {
	opts.defaults()
	backends := maps.Clone(opts.Backends)
	if backends == nil {
		backends = map[string]charts.Backend{}
	}
	if opts.Backend != nil {
		backends[application.LocalDestination] = opts.Backend
	}
	opts.Backend = backends[application.LocalDestination]
	if len(backends) == 0 || opts.Fetcher == nil {
		return nil, errors.New("reconcile: Backend and Fetcher are required")
	}
	c := &Controller{
		stores:   opts.SecretStores,
		opts:     opts,
		backends: backends,
		log:      opts.Logger.With("component", "reconcile"),
		apps:     make(map[string]*appState, len(apps)),
		wake:     make(chan struct{}, 1),
		releases: map[relKey]*charts.Release{},

		orphanFailures: map[string]map[string]int{},
		firstLane:      make(chan struct{}, max(1, opts.MaxConcurrentPasses/4)),
		steadyLane:     make(chan struct{}, opts.MaxConcurrentPasses),
	}
	for _, a := range apps {
		c.apps[a.Name] = &appState{app: a, status: c.initialStatus(a, c.unavailable(backends[destination(a)]))}
	}
	c.analysis.Logger = c.log
	return c, nil
}

// initialStatus is a's status before its first pass; unavailable is what
// its destination's backend lacks (see unavailable).
func (c *Controller) initialStatus(a application.Application, unavailable []string) application.Status {
	return application.Status{
		Name:        a.Name,
		Stack:       a.Stack,
		Destination: destination(a),
		Set:         setName(a),
		Sync:        application.SyncUnknown,
		Health:      application.HealthUnknown,
		Unavailable: unavailable,
	}
}

// Reconcile runs one pass of the named application now, on the caller's
// goroutine, reading the swarm for it alone. Tests and one-shot tools use it;
// the controller's own loop uses Run.
func (c *Controller) Reconcile(ctx context.Context, name string) (Result, error) {
	return c.reconcileNow(ctx, name, nil)
}

// SyncNow runs one pass that applies even a manual application, like an
// explicit sync, and waits for it.
func (c *Controller) SyncNow(ctx context.Context, name, by string) (Result, error) {
	return c.reconcileNow(ctx, name, &SyncRequest{By: by})
}

func (c *Controller) reconcileNow(ctx context.Context, name string, req *SyncRequest) (Result, error) {
	c.mu.Lock()
	a, ok := c.apps[name]
	if !ok {
		c.mu.Unlock()
		return Result{}, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	if a.running {
		c.mu.Unlock()
		return Result{}, fmt.Errorf("application %q: %w", name, ErrBusy)
	}
	a.running = true
	app := a.app
	c.mu.Unlock()
	res := c.pass(ctx, app, req, nil)
	c.mu.Lock()
	a.running = false
	a.status = res.Status
	c.mu.Unlock()
	return res, nil
}

// RequestSync queues an explicit sync for the controller's loop and returns a
// channel that receives the result of the pass that serves it.
func (c *Controller) RequestSync(name, by string) (<-chan Result, error) {
	return c.enqueue(name, SyncRequest{By: by})
}

// Refresh makes the application due now, without forcing a manual one to
// apply. It also clears the backoff of earlier transient failures: a refresh
// (a webhook, an operator) says the outage is over, so the next pass must
// not wait out the backoff. Asked for during a pass, it runs another one
// right after.
func (c *Controller) Refresh(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	a.next = time.Time{}
	a.failures = 0
	if a.running {
		a.refreshed = true
	}
	c.poke()
	return nil
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Errors the controller's methods return.
var (
	ErrNotFound = errors.New("no such application")
	ErrBusy     = errors.New("a pass is already running")
	// ErrNoSwarm: an application's destination names no swarm the
	// controller is connected to (swarms are connected when it starts).
	ErrNoSwarm = errors.New("no swarm of that name is connected to this controller")
	// ErrQueueFull refuses a request when QueueLimit requests already wait
	// for the application. It matches ErrBusy too: the answer is "later".
	ErrQueueFull error = queueFullError{}
	// ErrNoRevision: a revision number the application's kept history
	// does not hold.
	ErrNoRevision = errors.New("no such revision")
)

type queueFullError struct{}

func (queueFullError) Error() string        { return "too many requests waiting" }
func (queueFullError) Is(target error) bool { return target == ErrBusy }

// SetApplications replaces the set of applications, as after the
// applications file changed: new ones are due at once, changed ones are due
// at once with their new definition, removed ones stop (a pass in flight
// finishes). Their stacks are then looked at as orphans: kept and reported,
// or removed with PruneOrphans. Statuses and sweep memory of unchanged
// applications are kept.
func (c *Controller) SetApplications(apps []application.Application) {
	// Only SetApplications replaces c.apps or writes an application's
	// definition, and setMu makes one run at a time, so both may be read
	// here without c.mu: the comparison and the new states are made
	// unlocked, and c.mu is held only to write the changes.
	c.setMu.Lock()
	defer c.setMu.Unlock()
	unavailable := map[string][]string{} // by destination, worked out once
	cur := c.apps
	next := make(map[string]*appState, len(apps))
	type change struct {
		st  *appState
		app application.Application
	}
	var changed []change
	for _, a := range apps {
		if _, ok := c.backends[destination(a)]; !ok {
			c.log.Warn("application's destination is not connected; its passes fail until the controller restarts with that swarm",
				"app", a.Name, "stack", a.Stack, "swarm", destination(a))
		}
		if old, ok := cur[a.Name]; ok {
			if !reflect.DeepEqual(old.app, a) {
				changed = append(changed, change{old, a})
			}
			next[a.Name] = old
			continue
		}
		d := destination(a)
		if _, ok := unavailable[d]; !ok {
			unavailable[d] = c.unavailable(c.backends[d])
		}
		next[a.Name] = &appState{app: a, status: c.initialStatus(a, unavailable[d])}
	}
	var removed []*appState
	for name, old := range cur {
		if _, kept := next[name]; !kept {
			removed = append(removed, old)
		}
	}
	c.mu.Lock()
	for _, ch := range changed {
		ch.st.app = ch.app
		ch.st.next = time.Time{}
		ch.st.status.Stack = ch.app.Stack
		ch.st.status.Destination = destination(ch.app)
	}
	// Requests waiting for a removed application are taken while the lock
	// is held, so no pass can start on them; they are answered below.
	waiting := make([][]*queued, len(removed))
	for i, old := range removed {
		waiting[i], old.pending = old.pending, nil
	}
	c.apps = next
	c.mu.Unlock()
	c.noteGenerated(removed, apps)
	c.appsChanged.Store(true)
	c.poke()

	// Slow work (a log line, metric series, waiters per application) is
	// done after the lock is released, so the API and other applications'
	// passes never wait on a large reload.
	for i, old := range removed {
		name := old.app.Name
		c.log.Info("application removed from the applications file", "app", name, "stack", old.app.Stack)
		c.opts.Metrics.ForgetApp(name)
		c.analysis.Forget(name)
		// Memory stays proportional to what is loaded; an application
		// that takes the stack over reads its record from the swarm.
		c.forgetRelease(destination(old.app), old.app.Stack)
		for _, q := range waiting[i] {
			q.answer(Result{App: name, Err: fmt.Errorf("application %q: removed while waiting: %w", name, ErrNotFound)})
		}
	}
}

// Applications returns the applications the controller reconciles, sorted by
// name.
func (c *Controller) Applications() []application.Application {
	c.mu.Lock()
	out := make([]application.Application, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a.app)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b application.Application) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// InitialPassesDone reports whether every application has finished at least
// one pass since the controller started, successful or not.
func (c *Controller) InitialPassesDone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.apps {
		if a.status.LastPass.IsZero() {
			return false
		}
	}
	return true
}

// Status returns the application's last published status.
func (c *Controller) Status(name string) (application.Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return application.Status{}, false
	}
	return a.published(), true
}

// Statuses returns every application's status, sorted by name.
func (c *Controller) Statuses() []application.Status {
	c.mu.Lock()
	out := make([]application.Status, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a.published())
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b application.Status) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

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

// latestRelease returns the newest record of stack. The copy this controller
// keeps is checked against the swarm on every call (capability.LatestRelease:
// one small read with ReleaseHead, the whole history without), so a record
// deleted by hand or written by another controller is planned against on the
// next pass, never hidden by memory. When that check cannot be made the copy
// is returned as it is; apply never writes on it unchecked.
func (c *Controller) latestRelease(ctx context.Context, p *pass) (*charts.Release, error) {
	return c.latestReleaseIn(ctx, p, nil)
}

// latestReleaseIn is latestRelease within a batch: the check of the kept
// copy is the batch's one check of every application's (snapshot.isHead)
// when it vouches for it, which is at most as old as the batch; apply checks
// again on its own before it writes.
func (c *Controller) latestReleaseIn(ctx context.Context, p *pass, snap *snapshot) (*charts.Release, error) {
	stack, key := p.app.Stack, relKey{destination(p.app), p.app.Stack}
	c.relMu.Lock()
	known := c.releases[key]
	c.relMu.Unlock()
	if snap.isHead(ctx, c, stack, known) {
		return known, nil
	}
	r, err := capability.LatestRelease(ctx, p.base, stack, known)
	if err != nil && known != nil {
		// The pass may still plan from the record last read, so that it
		// observes and reports what it can; apply checks the swarm again
		// before it writes anything.
		c.log.Warn("could not check the newest release record against the swarm; planning from the one last read",
			"stack", stack, "revision", known.Revision, "error", err)
		return known, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release records: %w", err)
	}
	if known != nil && r != known && (r == nil || r.Revision != known.Revision || r.Version != known.Version) {
		newest := "none"
		if r != nil {
			newest = fmt.Sprintf("revision %d of %s", r.Revision, r.Owner)
		}
		c.log.Warn("release records changed on the swarm since this controller read them; planning against the swarm's",
			"stack", stack, "revision", known.Revision, "newest", newest)
	}
	c.relMu.Lock()
	c.releases[key] = r
	c.relMu.Unlock()
	return r, nil
}

// readLatestRelease reads the newest record of the pass's stack from the
// swarm, never from memory, and keeps it for the next latestRelease.
func (c *Controller) readLatestRelease(ctx context.Context, p *pass) (*charts.Release, error) {
	c.forgetRelease(destination(p.app), p.app.Stack)
	return c.latestRelease(ctx, p)
}

func (c *Controller) forgetRelease(dest, stack string) {
	c.relMu.Lock()
	delete(c.releases, relKey{dest, stack})
	c.relMu.Unlock()
}

// relKey names a stack on a swarm: the same stack name on two swarms is two
// releases.
type relKey struct{ dest, stack string }

// destination is the swarm a's stack runs on.
func destination(a application.Application) string {
	if a.Destination == "" {
		return application.LocalDestination
	}
	return a.Destination
}

// backendOf returns the backend of a's destination. A destination with none
// stalls the pass: nothing is read or written until the applications file
// or the controller's swarms change.
func (c *Controller) backendOf(a application.Application) (charts.Backend, error) {
	if b, ok := c.backends[destination(a)]; ok {
		return b, nil
	}
	return nil, stalled("fetch", fmt.Errorf("destination %q: %w", destination(a), ErrNoSwarm))
}
