// Package apitest provides in-memory controllers for testing the API, the
// client and the CLI without a swarm.
package apitest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/router"
)

// The full fake claims every optional interface; MinimalController none.
var (
	_ api.Controller       = (*Controller)(nil)
	_ api.HistoryReader    = (*Controller)(nil)
	_ api.Differ           = (*Controller)(nil)
	_ api.RevisionDiffer   = (*Controller)(nil)
	_ api.Rollbacker       = (*Controller)(nil)
	_ api.RolloutCommander = (*Controller)(nil)
	_ api.RouterRoutes     = (*Controller)(nil)
	_ api.SwarmLister      = (*Controller)(nil)
	_ api.LogReader        = (*Controller)(nil)
	_ api.StoreRotations   = (*Controller)(nil)
	_ api.Controller       = (*MinimalController)(nil)
)

// Controller is an in-memory api.Controller with every optional feature. A
// sync runs on its own goroutine: it publishes sync.started, one progress
// event per service and sync.succeeded (or sync.failed) to Events when set,
// then delivers Result's answer.
type Controller struct {
	// Events, when set, receives what a sync does.
	Events *events.Broker
	// Result decides a sync's or rollback's outcome; nil succeeds with the
	// application Synced and Healthy.
	Result func(app string, opts api.SyncOptions) api.SyncResult
	// Hold, when set, keeps every sync from finishing until it is closed.
	Hold chan struct{}
	// Routes and RoutesComplete are what RouterRoutes answers.
	Routes         []router.Route
	RoutesComplete bool
	// SwarmList is what Swarms answers.
	SwarmList []api.SwarmStatus
	// LogLines are what Logs emits, up to the query's tail; with Follow it
	// then waits for its context and sends on LogsEnded, when set, as it
	// returns.
	LogLines  []api.LogLine
	LogsEnded chan struct{}
	// LogFeed, when set, is read by a followed Logs for lines arriving
	// later.
	LogFeed chan api.LogLine

	mu sync.Mutex
	// storeGrants maps a secret store's name to the applications granted
	// it, storeUse to those whose renders used it (see SetStore); expired
	// lists what ExpireStore was asked for, as "store" or "store:path".
	storeGrants, storeUse map[string][]string
	expired               []string
	apps                  map[string]application.Status
	releases              map[string][]charts.Release
	diffs                 map[string]api.Diff
	revDiffs              map[revDiffKey]api.Diff
	syncs                 []api.SyncOptions
	refreshed             []string
	commands              []string
	rollbacks             []int
}

// NewController returns a fake holding statuses.
func NewController(statuses ...application.Status) *Controller {
	c := &Controller{apps: map[string]application.Status{}, releases: map[string][]charts.Release{}, diffs: map[string]api.Diff{},
		revDiffs: map[revDiffKey]api.Diff{}}
	for _, s := range statuses {
		c.apps[s.Name] = s
	}
	return c
}

// SetHistory sets an application's releases, newest first.
func (c *Controller) SetHistory(app string, rs []charts.Release) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releases[app] = rs
}

// SetDiff sets what Diff answers for app.
func (c *Controller) SetDiff(app string, d api.Diff) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.diffs[app] = d
}

type revDiffKey struct {
	app      string
	revision int
	against  string
}

// SetRevisionDiff sets what DiffRevision answers for app, revision and
// against; any other revision is not found.
func (c *Controller) SetRevisionDiff(app string, revision int, against string, d api.Diff) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revDiffs[revDiffKey{app, revision, against}] = d
}

// Syncs returns the sync requests received so far.
func (c *Controller) Syncs() []api.SyncOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.syncs)
}

// Refreshed returns the applications refreshed so far.
func (c *Controller) Refreshed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.refreshed)
}

// SetStore declares a secret store granted to the applications granted,
// of which those in users used its values.
func (c *Controller) SetStore(store string, granted, users []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storeGrants == nil {
		c.storeGrants, c.storeUse = map[string][]string{}, map[string][]string{}
	}
	c.storeGrants[store], c.storeUse[store] = granted, users
}

// StoreUsers answers what SetStore declared.
func (c *Controller) StoreUsers(store, _ string) (users, granted []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.storeUse[store]), slices.Clone(c.storeGrants[store])
}

// ExpireStore notes the request.
func (c *Controller) ExpireStore(store, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if path != "" {
		store += ":" + path
	}
	c.expired = append(c.expired, store)
}

// Expired lists what ExpireStore was asked for.
func (c *Controller) Expired() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.expired)
}

// SetRollouts sets the rollouts an application's status lists.
func (c *Controller) SetRollouts(app string, rs []application.RolloutStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.apps[app]
	st.Rollouts = rs
	c.apps[app] = st
}

// SetImages sets what an application's status says of its image updates
// (nil: the application has none).
func (c *Controller) SetImages(app string, im *application.ImageStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.apps[app]
	st.Images = im
	c.apps[app] = st
}

// RolloutCommand records "app/service command" and, as the controller
// does, shows it as the rollout's Pending command until RunPass.
func (c *Controller) RolloutCommand(app, service, command string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.apps[app]
	if !ok {
		return fmt.Errorf("application %q: %w", app, api.ErrNotFound)
	}
	c.commands = append(c.commands, app+"/"+service+" "+command)
	st.Rollouts = slices.Clone(st.Rollouts)
	for i := range st.Rollouts {
		if service == "" || st.Rollouts[i].Service == service {
			st.Rollouts[i].Pending = command
		}
	}
	c.apps[app] = st
	return nil
}

// RunPass stands for the pass that deploys app's pending commands: each
// rollout takes its command's plain effect (abort: Aborted at weight 0,
// promote: Promoting, pause and resume: Paused, retry: Progressing from
// step 0) whatever its phase, none is pending after it, and LastPass is
// now. Unlike rollout.Decide it ignores no command.
func (c *Controller) RunPass(app string) {
	c.pass(app, true)
}

// Restart stands for a controller that restarts before a pass took app's
// pending commands, and then runs one: the commands are forgotten, the
// rollouts unchanged, none is pending, and LastPass is now.
func (c *Controller) Restart(app string) {
	c.pass(app, false)
}

func (c *Controller) pass(app string, apply bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.apps[app]
	st.Rollouts = slices.Clone(st.Rollouts)
	for i := range st.Rollouts {
		r := &st.Rollouts[i]
		if apply {
			switch r.Pending {
			case "abort":
				r.Phase, r.Weight = "Aborted", 0
			case "promote":
				r.Phase = "Promoting"
			case "pause":
				r.Paused = true
			case "resume":
				r.Paused = false
			case "retry":
				r.Phase, r.Step, r.Weight = "Progressing", 0, 0
			}
		}
		r.Pending = ""
	}
	st.LastPass = time.Now()
	c.apps[app] = st
}

// RouterRoutes answers Routes and RoutesComplete.
func (c *Controller) RouterRoutes() ([]router.Route, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.Routes), c.RoutesComplete
}

// Commands returns the rollout commands taken so far.
func (c *Controller) Commands() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.commands)
}

// Rollbacks returns the revisions rolled back to so far.
func (c *Controller) Rollbacks() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rollbacks)
}

func (c *Controller) Statuses() []application.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]application.Status, 0, len(c.apps))
	for _, s := range c.apps {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b application.Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (c *Controller) Status(name string) (application.Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.apps[name]
	return s, ok
}

func (c *Controller) RequestSync(name string, opts api.SyncOptions) (<-chan api.SyncResult, error) {
	c.mu.Lock()
	st, ok := c.apps[name]
	if ok {
		c.syncs = append(c.syncs, opts)
	}
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("application %q: %w", name, api.ErrNotFound)
	}
	return c.run(st, opts), nil
}

func (c *Controller) run(st application.Status, opts api.SyncOptions) <-chan api.SyncResult {
	done := make(chan api.SyncResult, 1)
	go func() {
		c.publish(events.Event{Type: events.SyncStarted, App: st.Name, Stack: st.Stack})
		for _, svc := range st.Services {
			c.publish(events.Progress(st.Name, st.Stack, svc.Name, svc.Desired, svc.Desired, "completed", ""))
		}
		if c.Hold != nil {
			<-c.Hold
		}
		var res api.SyncResult
		if c.Result != nil {
			res = c.Result(st.Name, opts)
		} else {
			st.Sync, st.SyncReason, st.Health, st.HealthMessage = application.Synced, application.ReasonNone, application.Healthy, ""
			res = api.SyncResult{Action: string(charts.Upgrade), Revision: st.LastAppliedRevision + 1, Status: st}
		}
		if res.Status.Name == "" {
			res.Status = st
		}
		c.mu.Lock()
		if !opts.DryRun {
			c.apps[st.Name] = res.Status
		}
		c.mu.Unlock()
		if res.Err != nil {
			c.publish(events.Event{Type: events.SyncFailed, App: st.Name, Stack: st.Stack, Message: res.Err.Error()})
		} else {
			c.publish(events.Event{Type: events.SyncSucceeded, App: st.Name, Stack: st.Stack, Revision: res.Status.Revision})
		}
		done <- res
	}()
	return done
}

func (c *Controller) publish(e events.Event) {
	if c.Events != nil {
		c.Events.Publish(e)
	}
}

func (c *Controller) Refresh(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.apps[name]; !ok {
		return fmt.Errorf("application %q: %w", name, api.ErrNotFound)
	}
	c.refreshed = append(c.refreshed, name)
	return nil
}

func (c *Controller) History(_ context.Context, app string) ([]charts.Release, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.releases[app]), nil
}

func (c *Controller) Diff(_ context.Context, app string) (api.Diff, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.diffs[app], nil
}

func (c *Controller) DiffRevision(_ context.Context, app string, revision int, against string) (api.Diff, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.revDiffs[revDiffKey{app, revision, against}]
	if !ok {
		return api.Diff{}, fmt.Errorf("application %q has no revision %d: %w", app, revision, api.ErrNotFound)
	}
	return d, nil
}

func (c *Controller) Rollback(_ context.Context, app string, revision int, by string) (<-chan api.SyncResult, error) {
	c.mu.Lock()
	st, ok := c.apps[app]
	var found bool
	for _, r := range c.releases[app] {
		found = found || r.Revision == revision
	}
	if ok && found {
		c.rollbacks = append(c.rollbacks, revision)
	}
	c.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("application %q: %w", app, api.ErrNotFound)
	case !found:
		return nil, fmt.Errorf("application %q has no revision %d: %w", app, revision, api.ErrNotFound)
	}
	return c.run(st, api.SyncOptions{By: by}), nil
}

// Swarms answers SwarmList.
func (c *Controller) Swarms(context.Context) ([]api.SwarmStatus, error) {
	return slices.Clone(c.SwarmList), nil
}

// Logs emits LogLines (the last Tail of them, of the one service asked
// for), then with Follow blocks until ctx ends.
func (c *Controller) Logs(ctx context.Context, app string, o api.LogOptions, emit func(api.LogLine) error) error {
	c.mu.Lock()
	_, ok := c.apps[app]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("application %q: %w", app, api.ErrNotFound)
	}
	if c.LogsEnded != nil {
		defer func() { c.LogsEnded <- struct{}{} }()
	}
	var lines []api.LogLine
	for _, l := range c.LogLines {
		if o.Service == "" || l.Service == o.Service {
			lines = append(lines, l)
		}
	}
	if o.Service != "" && len(lines) == 0 {
		return fmt.Errorf("application %q has no service %q: %w", app, o.Service, api.ErrNotFound)
	}
	if len(lines) > o.Tail {
		lines = lines[len(lines)-o.Tail:]
	}
	for _, l := range lines {
		if err := emit(l); err != nil {
			return err
		}
	}
	for o.Follow {
		select {
		case <-ctx.Done():
			return nil
		case l := <-c.LogFeed: // a nil feed never sends
			if err := emit(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// MinimalController implements only api.Controller, for tests of the 501
// answers. It wraps a Controller without passing its extras through.
type MinimalController struct{ c *Controller }

// NewMinimalController returns a MinimalController holding statuses.
func NewMinimalController(statuses ...application.Status) *MinimalController {
	return &MinimalController{c: NewController(statuses...)}
}

func (m *MinimalController) Statuses() []application.Status { return m.c.Statuses() }
func (m *MinimalController) Status(name string) (application.Status, bool) {
	return m.c.Status(name)
}
func (m *MinimalController) Refresh(name string) error { return m.c.Refresh(name) }

// RequestSync refuses prune, dry run and revision pins, as a controller
// without them must.
func (m *MinimalController) RequestSync(name string, opts api.SyncOptions) (<-chan api.SyncResult, error) {
	if opts.Prune || opts.DryRun || opts.Revision != "" {
		return nil, fmt.Errorf("sync %q with prune, dry run or a revision: %w", name, errors.ErrUnsupported)
	}
	return m.c.RequestSync(name, opts)
}

// Sample returns statuses for two applications, one healthy and one
// progressing, for tests that need something to list.
func Sample() []application.Status {
	return []application.Status{
		{
			Name: "billing", Stack: "billing", Destination: "eu", Sync: application.Synced, Health: application.Healthy,
			Revision: "0123456789abcdef0123456789abcdef01234567", SeenRevision: "0123456789abcdef0123456789abcdef01234567",
			LastAppliedRevision: 3,
			Services: []application.ServiceStatus{
				{Name: "api", Health: application.Healthy, Running: 2, Desired: 2},
			},
		},
		{
			Name: "shop", Stack: "shop", Sync: application.OutOfSync, SyncReason: application.ReasonGit,
			Health: application.Progressing, HealthMessage: "web: 1 of 3 tasks running",
			Revision: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", SeenRevision: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
			LastAppliedRevision: 7,
			Services: []application.ServiceStatus{
				{Name: "web", Health: application.Progressing, Running: 1, Desired: 3},
				{Name: "worker", Health: application.Healthy, Running: 1, Desired: 1},
			},
		},
	}
}
