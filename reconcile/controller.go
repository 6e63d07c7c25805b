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
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/metrics"
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
	earlier   earlierSecrets      // see logmask.go
	seen      seenSecrets         // see seensecrets.go
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
		c.earlier.forget(name)
		c.seen.forget(name)
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
