// Package reconcile runs the loop that converges each application's stack to
// its repository: fetch, render, plan, observe, gate, apply, confirm. It holds
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
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/regauth"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/source"
)

// Options configure a Controller.
type Options struct {
	// ControllerID names this controller in owner stamps
	// ("<controller-id>/<application>"). Default "flotilla".
	ControllerID string
	// Backend is the swarm. Required.
	Backend charts.Backend
	// Fetcher provides revisions. Required.
	Fetcher Fetcher
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
	// Backoff bounds the retry delay after a transient failure.
	// Default 5s doubling to the application's interval.
	Backoff time.Duration
}

func (o *Options) defaults() {
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
}

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
	// done receives the pass result once.
	done chan Result
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
	Err      error
}

// appState is the controller's bookkeeping for one application.
type appState struct {
	app      application.Application
	status   application.Status
	next     time.Time
	running  bool
	failures int
	pending  []*SyncRequest
	sweep    sweepState
	last     Result // of the newest pass the loop ran

	// rolledBack holds the services seen rolled back while the manifest
	// was rolledBackManifest; they are not healed until it changes.
	rolledBack         map[string]bool
	rolledBackManifest string
	// drift is what the drift comparison remembers between passes.
	drift driftMemory
}

// orphanInterval is how often Run looks for stacks of removed applications.
const orphanInterval = 10 * time.Minute

// Controller reconciles a set of applications.
type Controller struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	apps map[string]*appState
	wake chan struct{}

	orphans        []Orphan
	orphanFailures map[string]map[string]int
	// appsChanged makes Run look for orphaned stacks at once after
	// SetApplications removed or moved an application.
	appsChanged atomic.Bool

	relMu    sync.Mutex
	releases map[string]*charts.Release // newest record per stack, a cache of the swarm's
}

// New returns a Controller for apps, which must already be defaulted and
// validated (application.Defaults, application.Validate).
func New(opts Options, apps []application.Application) (*Controller, error) {
	opts.defaults()
	if opts.Backend == nil || opts.Fetcher == nil {
		return nil, errors.New("reconcile: Backend and Fetcher are required")
	}
	c := &Controller{
		opts:     opts,
		log:      opts.Logger.With("component", "reconcile"),
		apps:     make(map[string]*appState, len(apps)),
		wake:     make(chan struct{}, 1),
		releases: map[string]*charts.Release{},

		orphanFailures: map[string]map[string]int{},
	}
	for _, a := range apps {
		c.apps[a.Name] = &appState{app: a, status: c.initialStatus(a)}
	}
	return c, nil
}

func (c *Controller) initialStatus(a application.Application) application.Status {
	return application.Status{
		Name:        a.Name,
		Stack:       a.Stack,
		Sync:        application.SyncUnknown,
		Health:      application.HealthUnknown,
		Unavailable: c.unavailable(),
	}
}

// unavailable lists the features this backend cannot offer, in the words the
// status shows.
func (c *Controller) unavailable() []string {
	var out []string
	check := func(ok bool, feature, capName string) {
		if !ok {
			out = append(out, (&capability.ErrUnavailable{Feature: feature, Capability: capName}).Error())
		}
	}
	b := c.opts.Backend
	_, ok := capability.As[capability.LiveDrift](b)
	check(ok, "live drift", "LiveDrift")
	if ok {
		_, named := capability.As[capability.NetworkNamer](b)
		check(named, "network attachment drift", "NetworkNamer")
	}
	_, ok = capability.As[capability.OutOfBand](b)
	check(ok, "out-of-band change reports", "OutOfBand")
	_, ok = capability.As[capability.StackServicesReader](b)
	check(ok, "trusted health reads", "StackServicesReader")
	_, ok = capability.As[capability.StacksReader](b)
	check(ok, "batched swarm reads", "StacksReader")
	return out
}

// Run drives every application until ctx ends, then waits for passes in
// flight to finish.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	orphansDue := c.now()
	t := time.NewTicker(c.opts.Tick)
	defer t.Stop()
	for {
		if c.appsChanged.Swap(false) {
			orphansDue = c.now()
		}
		if !c.now().Before(orphansDue) {
			// On start, then now and then: a removal that failed (still
			// in use) is retried, and a record written meanwhile by a
			// controller that has since lost the application is found.
			if _, err := c.SweepOrphans(ctx); err != nil {
				c.log.Warn("stacks of removed applications not checked", "error", err)
			}
			orphansDue = c.now().Add(orphanInterval)
		}
		c.startDue(ctx, &wg, false)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.wake:
		}
	}
}

// startDue starts a pass for every application that is due (every one, with
// all) or has a sync request, after one read of the swarm for all of them.
func (c *Controller) startDue(ctx context.Context, wg *sync.WaitGroup, all bool) {
	if ctx.Err() != nil {
		return // stopping: no new pass
	}
	now := c.now()
	c.mu.Lock()
	var due []*appState
	for _, a := range c.apps {
		if a.running {
			continue
		}
		if all || len(a.pending) > 0 || !now.Before(a.next) {
			a.running = true
			due = append(due, a)
		}
	}
	c.mu.Unlock()
	if len(due) == 0 {
		return
	}
	stacks := make([]string, 0, len(due))
	for _, a := range due {
		stacks = append(stacks, a.app.Stack)
	}
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	read, err := capability.ReadStacks(ctx, c.opts.Backend, stacks)
	snap := &snapshot{stacks: read, err: err}
	for _, a := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runPass(ctx, a, snap)
		}()
	}
}

// runPass runs one pass for a and schedules the next.
func (c *Controller) runPass(ctx context.Context, a *appState, snap *snapshot) {
	// One request per pass: a sync and a rollback queued together are
	// different deploys. The rest stay queued and make the app due again.
	c.mu.Lock()
	var req *SyncRequest
	if len(a.pending) > 0 {
		req = a.pending[0]
		a.pending = a.pending[1:]
	}
	app := a.app
	c.mu.Unlock()

	res := c.pass(ctx, app, req, snap)

	c.mu.Lock()
	a.running = false
	a.status = res.Status
	a.last = res
	interval := app.SyncPolicy.Interval.Duration
	if interval <= 0 {
		interval = application.DefaultInterval
	}
	if res.Err != nil && KindOf(res.Err) == Transient {
		a.failures++
		a.next = c.now().Add(min(c.opts.Backoff<<min(a.failures-1, 10), interval))
	} else {
		a.failures = 0
		a.next = c.now().Add(interval)
	}
	again := len(a.pending) > 0
	c.mu.Unlock()
	if req != nil && req.done != nil {
		req.done <- res
	}
	if again {
		c.poke()
	}
}

// RunOnce runs one pass of every application as one batch, the way the
// loop does: one read of the swarm for all of them, then the passes side by
// side. It returns the results sorted by application; `controller --once`
// and the benchmarks use it.
func (c *Controller) RunOnce(ctx context.Context) []Result {
	var wg sync.WaitGroup
	c.startDue(ctx, &wg, true)
	wg.Wait()
	c.mu.Lock()
	out := make([]Result, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a.last)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.App, b.App) })
	return out
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
// apply.
func (c *Controller) Refresh(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	a.next = time.Time{}
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
)

// SetApplications replaces the set of applications, as after the
// applications file changed: new ones are due at once, changed ones are due
// at once with their new definition, removed ones stop (a pass in flight
// finishes). Their stacks are then looked at as orphans: kept and reported,
// or removed with PruneOrphans. Statuses and sweep memory of unchanged
// applications are kept.
func (c *Controller) SetApplications(apps []application.Application) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]*appState, len(apps))
	for _, a := range apps {
		if old, ok := c.apps[a.Name]; ok {
			if !reflect.DeepEqual(old.app, a) {
				old.app = a
				old.next = time.Time{}
				old.status.Stack = a.Stack
			}
			next[a.Name] = old
			continue
		}
		next[a.Name] = &appState{app: a, status: c.initialStatus(a)}
	}
	for name, old := range c.apps {
		if _, kept := next[name]; !kept {
			c.log.Info("application removed from the applications file", "app", name, "stack", old.app.Stack)
			c.opts.Metrics.ForgetApp(name)
		}
	}
	c.apps = next
	c.appsChanged.Store(true)
	c.poke()
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
	return a.status, true
}

// Statuses returns every application's status, sorted by name.
func (c *Controller) Statuses() []application.Status {
	c.mu.Lock()
	out := make([]application.Status, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a.status)
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

// appBackend decorates the controller's backend for one pass of one
// application. If the backend implements OutOfBand, a lost compare-and-swap
// is reported against this application; otherwise such races are retried
// without a report (and the status lists the feature as unavailable).
//
// The same holds for the application's allowlist (AllowedReferences), the
// controller's own secrets (ForbidSecrets) and the application's registry
// credential (RegistryAuth): a backend that lacks one enforces its own rules
// or authenticates its own way, and the reconciler never loosens anything.
func (c *Controller) appBackend(p *pass) (charts.Backend, error) {
	b := c.opts.Backend
	if ob, ok := capability.As[capability.OutOfBand](b); ok {
		b = ob.WithOutOfBandNotifier(c.outOfBand(p))
	}
	if ar, ok := capability.As[capability.AllowedReferences](b); ok {
		b = ar.WithAllowedReferences(p.app.Allow)
	}
	if fs, ok := capability.As[capability.ForbidSecrets](b); ok && len(c.opts.ForbiddenSecrets) > 0 {
		b = fs.WithForbiddenSecrets(c.opts.ForbiddenSecrets)
	}
	if ra := p.app.RegistryAuth; ra != nil {
		r, ok := capability.As[capability.RegistryAuth](b)
		if !ok {
			return nil, stalled("credentials", &capability.ErrUnavailable{Feature: "registry credentials", Capability: "RegistryAuth"})
		}
		creds, err := regauth.FromFile(ra.Path())
		if err != nil {
			return nil, stalled("credentials", fmt.Errorf("registryAuth: %w", err))
		}
		b = r.WithRegistryAuth(creds)
	}
	return b, nil
}

// pass runs the steps for one application and always publishes a status.
func (c *Controller) pass(ctx context.Context, app application.Application, req *SyncRequest, snap *snapshot) (res Result) {
	c.mu.Lock()
	var prev application.Status
	if a, ok := c.apps[app.Name]; ok {
		prev = a.status
	}
	c.mu.Unlock()
	started := c.now()
	p := &pass{
		app:      app,
		owner:    c.opts.ControllerID + "/" + app.Name,
		request:  req,
		snapshot: snap,
		status:   prev,
		log:      c.log.With("app", app.Name, "stack", app.Stack),
	}
	// The fetch step leases the checkout; no other fetch prunes it until
	// the pass is over.
	defer func() { p.rev.Release() }()
	p.status.Name, p.status.Stack = app.Name, app.Stack
	p.status.Unavailable = c.unavailable()
	p.status.OutOfBand = nil
	p.status.Corrected = nil
	var err error
	p.backend, err = c.appBackend(p)
	if err == nil {
		for _, s := range steps {
			// A stopping controller ends the pass between steps.
			if ctx.Err() != nil {
				err = transient(s.name, fmt.Errorf("controller stopping before %s: %w", s.name, context.Cause(ctx)))
				break
			}
			sctx := ctx
			if writingSteps[s.name] {
				sctx = context.WithoutCancel(ctx)
			}
			if err = s.run(c, sctx, p); err != nil {
				break
			}
		}
	}
	gated := errors.Is(err, errGated)
	if gated {
		err = nil
		p.log.Info("manual application planned, waiting for a sync", "action", p.action)
	}
	c.finish(p, err)
	c.reportChanges(p, prev)
	c.observeOutcome(p, err, gated, c.now().Sub(started))
	res = Result{App: app.Name, Action: p.action, Deployed: p.deployed, Healed: p.healed, Status: p.status, Err: err}
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
	msg := source.SanitizeString(fault.WithApp(p.app.Name, err).Error())
	p.status.LastError = msg
	c.emit(p, events.SyncFailed, "", msg, map[string]any{"kind": string(KindOf(err))})
	if p.status.Sync == "" || p.rendered == nil {
		p.status.Sync = application.SyncUnknown
	}
	c.publish(p)
	p.log.Error("pass failed, nothing more was applied", "kind", KindOf(err), "error", msg)
}

// publish stores p's status as the application's current one.
func (c *Controller) publish(p *pass) {
	c.mu.Lock()
	if a, ok := c.apps[p.app.Name]; ok {
		a.status = p.status
	}
	c.mu.Unlock()
}

// latestRelease returns the newest record of stack. The copy this controller
// keeps is checked against the swarm on every call (capability.LatestRelease:
// one small read with ReleaseHead, the whole history without), so a record
// deleted by hand or written by another controller is planned against on the
// next pass, never hidden by memory. When that check cannot be made the copy
// is returned as it is; apply never writes on it unchecked.
func (c *Controller) latestRelease(ctx context.Context, stack string) (*charts.Release, error) {
	c.relMu.Lock()
	known := c.releases[stack]
	c.relMu.Unlock()
	r, err := capability.LatestRelease(ctx, c.opts.Backend, stack, known)
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
	c.releases[stack] = r
	c.relMu.Unlock()
	return r, nil
}

// readLatestRelease reads the newest record of stack from the swarm, never
// from memory, and keeps it for the next latestRelease.
func (c *Controller) readLatestRelease(ctx context.Context, stack string) (*charts.Release, error) {
	c.forgetRelease(stack)
	return c.latestRelease(ctx, stack)
}

func (c *Controller) forgetRelease(stack string) {
	c.relMu.Lock()
	delete(c.releases, stack)
	c.relMu.Unlock()
}
