// Package apiwire presents the reconciler to the HTTP API. It only
// translates types and errors; every decision stays in reconcile.
package apiwire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flotilla-gitops/flotilla/analysis"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/router"
	"github.com/flotilla-gitops/flotilla/swarms"
)

// Controller adapts a *reconcile.Controller to api.Controller and its
// optional interfaces.
type Controller struct {
	ctl    *reconcile.Controller
	swarms *swarms.Registry // nil: no swarm listing
	images ImageStatuses    // nil: no image automation status
}

// ImageStatuses is what image automation (imagewrite.Loop) last did per
// application.
type ImageStatuses interface {
	ImageStatus(app string) *application.ImageStatus
}

// WithImages adds each application's image automation status to the
// statuses the API serves.
func (a Controller) WithImages(s ImageStatuses) Controller {
	a.images = s
	return a
}

func (a Controller) withImages(st application.Status) application.Status {
	if a.images != nil {
		st.Images = a.images.ImageStatus(st.Name)
	}
	return st
}

// New wraps ctl for api.Options.Controller.
func New(ctl *reconcile.Controller) Controller { return Controller{ctl: ctl} }

var (
	_ api.Controller       = Controller{}
	_ api.HistoryReader    = Controller{}
	_ api.Differ           = Controller{}
	_ api.RevisionDiffer   = Controller{}
	_ api.Rollbacker       = Controller{}
	_ api.RolloutCommander = Controller{}
	_ api.RouterRoutes     = Controller{}
	_ api.WebhookTargets   = Controller{}
	_ api.SwarmLister      = Controller{}
	_ api.LogReader        = Controller{}
	_ api.LogMasker        = Controller{}
	_ api.StoreRotations   = Controller{}
)

// StoreUsers lists who uses and who is granted a secret store
// (reconcile.Controller.StoreUsers).
func (a Controller) StoreUsers(store, path string) (users, granted []string) {
	return a.ctl.StoreUsers(store, path)
}

// ExpireStore makes a store's values due for a read at once.
func (a Controller) ExpireStore(store, path string) { a.ctl.ExpireStore(store, path) }

// LogMask blanks the secret values of the application's deployed revision
// in its log lines (reconcile.Controller.LogMask).
func (a Controller) LogMask(ctx context.Context, name string) (func(string) string, string, error) {
	m, err := a.ctl.LogMask(ctx, name)
	if err != nil {
		return nil, "", apiErr(err)
	}
	return m.Blank, m.From, nil
}

// Logs streams the application's task logs; a service or task it does not
// have is the API's not found.
func (a Controller) Logs(ctx context.Context, name string, o api.LogOptions, emit func(api.LogLine) error) error {
	q := capability.LogQuery{Service: o.Service, Task: o.Task, Tail: o.Tail, Follow: o.Follow, Timestamps: o.Timestamps}
	err := a.ctl.Logs(ctx, name, q, func(l capability.LogLine) error {
		out := api.LogLine{Service: l.Service, Task: l.Task, Node: l.Node, Text: l.Text}
		if !l.Time.IsZero() {
			out.Time = l.Time.UTC().Format(time.RFC3339Nano)
		}
		return emit(out)
	})
	if errors.Is(err, capability.ErrNoLogSource) {
		// Not ErrNotFound, whose message says the application is missing.
		return &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: err.Error(), Err: err}
	}
	return apiErr(err)
}

// WebhookTargets lists where each application's source lives, so a push
// refreshes only the applications it touches.
func (a Controller) WebhookTargets() []api.WebhookTarget {
	apps := a.ctl.Applications()
	out := make([]api.WebhookTarget, 0, len(apps))
	for _, app := range apps {
		out = append(out, api.NewWebhookTarget(app))
		if t, ok := api.ValuesWebhookTarget(app); ok {
			out = append(out, t)
		}
	}
	return out
}

// Statuses are the reconciler's, with image automation's added.
func (a Controller) Statuses() []application.Status {
	out := a.ctl.Statuses()
	for i := range out {
		out[i] = a.withImages(out[i])
	}
	return out
}

// Status is the reconciler's, with image automation's added.
func (a Controller) Status(name string) (application.Status, bool) {
	st, ok := a.ctl.Status(name)
	if ok {
		st = a.withImages(st)
	}
	return st, ok
}

func (a Controller) Refresh(name string) error { return apiErr(a.ctl.Refresh(name)) }

func (a Controller) RequestSync(name string, o api.SyncOptions) (<-chan api.SyncResult, error) {
	return forward(a.ctl.RequestSyncWith(name, reconcile.SyncRequest{By: o.By, Prune: o.Prune, DryRun: o.DryRun, Revision: o.Revision}))
}

// RolloutCommand hands an operator's command to a service's rollout
// (reconcile.Controller.RolloutCommand).
func (a Controller) RolloutCommand(name, service, command string) error {
	return apiErr(a.ctl.RolloutCommand(name, service, rollout.Command(command)))
}

// RouterRoutes translates the controller's rollout routes through Traefik
// into the router's: one route per service, named application-service,
// with a stable backend and, once it exists, the extra colour's, each
// reached by its swarm service name on the router's port.
func (a Controller) RouterRoutes() ([]router.Route, bool) {
	routes, complete := a.ctl.RolloutRoutes()
	var out []router.Route
	for _, r := range routes {
		if r.Router.Provider != rollout.Traefik {
			continue
		}
		url := func(service string) []string { return []string{fmt.Sprintf("http://%s:%d", service, r.Router.Port)} }
		// The analysis reads Traefik's metrics by these names.
		rt := router.Route{Name: analysis.RouteName(r.App, r.Service), Rule: r.Router.Rule, EntryPoints: r.Router.EntryPoints,
			Backends: []router.Backend{{Name: analysis.StableBackend, Weight: r.Weights.Stable, URLs: url(r.Stable)}}}
		if r.Colour != "" {
			rt.Backends = append(rt.Backends, router.Backend{Name: analysis.ColourBackend(r.Strategy), Weight: r.Weights.Canary, URLs: url(r.Colour)})
		}
		out = append(out, rt)
	}
	return out, complete
}

func (a Controller) Rollback(_ context.Context, name string, revision int, by string) (<-chan api.SyncResult, error) {
	return forward(a.ctl.Rollback(name, revision, by))
}

func (a Controller) History(ctx context.Context, name string) ([]charts.Release, error) {
	rs, err := a.ctl.History(ctx, name)
	return rs, apiErr(err)
}

func (a Controller) Diff(ctx context.Context, name string) (api.Diff, error) {
	d, err := a.ctl.Diff(ctx, name)
	if err != nil {
		return api.Diff{}, apiErr(err)
	}
	return wireDiff(d), nil
}

func (a Controller) DiffRevision(ctx context.Context, name string, revision int, against string) (api.Diff, error) {
	d, err := a.ctl.DiffRevision(ctx, name, revision, against)
	if err != nil {
		return api.Diff{}, apiErr(err)
	}
	return wireDiff(d), nil
}

func wireDiff(d reconcile.Diff) api.Diff {
	out := api.Diff{App: d.App, Revision: d.Revision, Deployed: d.Deployed, Chart: d.Chart, DeployedChart: d.DeployedChart, Manifest: d.Manifest,
		PendingRemovals: d.PendingRemovals, Unavailable: d.Unavailable, Notes: d.Notes}
	for _, s := range d.Services {
		out.Services = append(out.Services, api.ServiceDiff{Name: s.Name, Change: api.ServiceChange(s.Change), Fields: s.Fields})
	}
	return out
}

// forward turns the reconciler's result channel into the API's.
func forward(ch <-chan reconcile.Result, err error) (<-chan api.SyncResult, error) {
	if err != nil {
		return nil, apiErr(err)
	}
	out := make(chan api.SyncResult, 1)
	go func() {
		r := <-ch
		res := api.SyncResult{Action: string(r.Action), Revision: r.Revision, Status: r.Status, Err: r.Err}
		if r.Plan != nil {
			p := wireDiff(*r.Plan)
			res.Plan = &p
		}
		out <- res
	}()
	return out, nil
}

// apiErr maps the reconciler's sentinels to the API's, so each answers with
// its own status code.
func apiErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reconcile.ErrNotFound), errors.Is(err, reconcile.ErrNoRevision):
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	case errors.Is(err, reconcile.ErrBusy):
		return fmt.Errorf("%w: %w", api.ErrConflict, err)
	}
	return err
}

// WithSwarms makes the controller answer GET /api/v1/swarms from reg.
func (a Controller) WithSwarms(reg *swarms.Registry) Controller {
	a.swarms = reg
	return a
}

// Swarms checks every swarm and counts the applications on each.
func (a Controller) Swarms(ctx context.Context) ([]api.SwarmStatus, error) {
	if a.swarms == nil {
		return nil, fmt.Errorf("swarms are not available: %w", errors.ErrUnsupported)
	}
	count := map[string]int{}
	for _, app := range a.ctl.Applications() {
		d := app.Destination
		if d == "" {
			d = application.LocalDestination
		}
		count[d]++
	}
	checked := a.swarms.Check(ctx)
	out := make([]api.SwarmStatus, 0, len(checked))
	for _, s := range checked {
		out = append(out, api.SwarmStatus{
			Name: s.Name, Reachable: s.Reachable, Error: s.Error, Host: s.Host, Hosts: s.Hosts,
			Nodes: s.Nodes, Managers: s.Managers, EngineVersion: s.EngineVersion,
			Applications: count[s.Name], Checked: s.Checked,
		})
	}
	return out, nil
}
