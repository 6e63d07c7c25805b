package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/drift"
)

// Controller is what the API needs from the reconciler: read statuses, ask
// for a sync, ask for a fetch now. Richer features are optional interfaces
// on the same value (HistoryReader, Differ, Rollbacker); a controller
// without one answers 501 on that route.
type Controller interface {
	// Statuses returns every application's status, sorted by name.
	Statuses() []application.Status
	// Status returns one application's status; false when there is none.
	Status(name string) (application.Status, bool)
	// RequestSync queues an explicit sync. The channel receives the result
	// of the pass that serves it, once. Options the controller cannot
	// honour are refused with an error wrapping errors.ErrUnsupported.
	RequestSync(name string, opts SyncOptions) (<-chan SyncResult, error)
	// Refresh makes the application due now without forcing a manual one
	// to apply.
	Refresh(name string) error
}

// HistoryReader lists an application's recorded revisions, newest first,
// from the swarm's release records.
type HistoryReader interface {
	History(ctx context.Context, app string) ([]charts.Release, error)
}

// Differ compares what the repository declares now with what runs.
type Differ interface {
	Diff(ctx context.Context, app string) (Diff, error)
}

// Rollbacker redeploys a recorded revision. An automated application then
// stays on it until a new commit arrives or the rollback is cleared.
type Rollbacker interface {
	Rollback(ctx context.Context, app string, revision int, by string) (<-chan SyncResult, error)
}

// Sentinel errors a Controller may wrap so the API answers with the right
// status. errors.ErrUnsupported maps to 501 as well.
var (
	// ErrNotFound: no such application (404).
	ErrNotFound = errors.New("no such application")
	// ErrConflict: the request clashes with what the controller is doing,
	// such as a pass already running (409).
	ErrConflict = errors.New("conflict")
)

// The one place the optional interfaces are asserted. Each helper uses the
// capability if the controller implements it, and otherwise returns an error
// wrapping errors.ErrUnsupported that names what is missing.

func history(ctx context.Context, c Controller, app string) ([]charts.Release, error) {
	if h, ok := c.(HistoryReader); ok {
		return h.History(ctx, app)
	}
	return nil, unsupported("history", "HistoryReader")
}

func diff(ctx context.Context, c Controller, app string) (Diff, error) {
	if d, ok := c.(Differ); ok {
		return d.Diff(ctx, app)
	}
	return Diff{}, unsupported("diff", "Differ")
}

func rollback(ctx context.Context, c Controller, app string, revision int, by string) (<-chan SyncResult, error) {
	if r, ok := c.(Rollbacker); ok {
		return r.Rollback(ctx, app, revision, by)
	}
	return nil, unsupported("rollback", "Rollbacker")
}

func unsupported(feature, iface string) error {
	return fmt.Errorf("%s is not available: the controller does not implement api.%s: %w", feature, iface, errors.ErrUnsupported)
}

// SyncOptions are the knobs of an explicit sync.
type SyncOptions struct {
	// By names who asked (the token's name), for the release record and
	// the logs.
	By string
	// Prune also removes what the repository stopped declaring.
	Prune bool
	// DryRun plans and reports without writing.
	DryRun bool
	// Revision pins the sync to one commit instead of the tracked branch.
	Revision string
}

// SyncResult is what the pass serving a sync or rollback did.
type SyncResult struct {
	// Action is what planning decided: install, upgrade or unchanged.
	Action string
	// Revision is the release revision recorded, 0 if none.
	Revision int
	Status   application.Status
	// Err is the pass's error, nil when it succeeded. Its text is shown to
	// the client after sanitising.
	Err error
}

// Wire types: what the API sends and accepts. The client and the CLI use
// them as they are, so `-o json` prints exactly these.

// ApplicationSummary is one row of the application list: the status without
// its per-service detail, plus service counts.
type ApplicationSummary struct {
	application.Status
	// Services counts the application's services; ServicesHealthy those
	// whose health is Healthy or Suspended.
	ServiceCount    int `json:"serviceCount"`
	ServicesHealthy int `json:"servicesHealthy"`
}

// ApplicationList is the answer of GET /api/v1/applications.
type ApplicationList struct {
	Items []ApplicationSummary `json:"items"`
}

// HistoryList is the answer of GET /api/v1/applications/{name}/history,
// newest first.
type HistoryList struct {
	Items []charts.Release `json:"items"`
}

// Diff is the answer of GET /api/v1/applications/{name}/diff.
type Diff struct {
	App string `json:"app"`
	// Revision is the commit the repository declares now; Deployed the one
	// last applied.
	Revision string `json:"revision,omitempty"`
	Deployed string `json:"deployed,omitempty"`
	// Chart and DeployedChart name the chart, its version and the values
	// digest of each side, for an application rendered from a chart.
	Chart         *charts.ChartRef `json:"chart,omitempty"`
	DeployedChart *charts.ChartRef `json:"deployedChart,omitempty"`
	// Services lists the services that differ, by unscoped name.
	Services []ServiceDiff `json:"services,omitempty"`
	// Manifest is a unified diff from the deployed manifest to the
	// declared one; empty when they are the same.
	Manifest string `json:"manifest,omitempty"`
	// PendingRemovals names objects a prune would delete.
	PendingRemovals []string `json:"pendingRemovals,omitempty"`
	// Unavailable names parts of the comparison the backend could not make.
	Unavailable []string `json:"unavailable,omitempty"`
	// Notes are the status's warnings about the same services (one that
	// does not settle, a field the daemon does not keep).
	Notes []string `json:"notes,omitempty"`
}

// ServiceChange says how one service differs.
type ServiceChange string

// Service changes.
const (
	ServiceCreate ServiceChange = "create" // declared, not running
	ServiceUpdate ServiceChange = "update" // the repository changed it
	ServiceDrift  ServiceChange = "drift"  // the swarm changed behind Flotilla's back
	ServiceRemove ServiceChange = "remove" // running, no longer declared
	// The states the status reports too, so the two read alike.
	ServiceRolledBack ServiceChange = "rolledBack" // Swarm reverted a failed update; not healed
	ServiceUpdating   ServiceChange = "updating"   // in motion; compared once settled
	ServiceNotKept    ServiceChange = "notKept"    // fields the daemon did not keep after a write
)

// ServiceDiff is one service's difference, field by field.
type ServiceDiff struct {
	Name   string         `json:"name"`
	Change ServiceChange  `json:"change"`
	Fields []drift.Change `json:"fields,omitempty"`
}

// SyncBody is the body of POST …/sync. Every field is optional.
type SyncBody struct {
	Prune    bool   `json:"prune,omitempty"`
	DryRun   bool   `json:"dryRun,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// RollbackBody is the body of POST …/rollback.
type RollbackBody struct {
	// Revision is the release revision number to redeploy.
	Revision int `json:"revision"`
}

// Phase is where a requested operation stands when the API answers.
type Phase string

// Phases.
const (
	// Queued: accepted; the answer did not wait for the pass.
	Queued Phase = "Queued"
	// Running: the answer waited, and the pass did not finish in time. It
	// still runs; watch the events or the status.
	Running   Phase = "Running"
	Succeeded Phase = "Succeeded"
	Failed    Phase = "Failed"
)

// OperationResponse answers sync, rollback and refresh.
type OperationResponse struct {
	App   string `json:"app"`
	Phase Phase  `json:"phase"`
	// Action, Revision and Status are set once the pass finished.
	Action   string              `json:"action,omitempty"`
	Revision int                 `json:"revision,omitempty"`
	Status   *application.Status `json:"status,omitempty"`
	// Error is the sanitised error of a failed pass.
	Error string `json:"error,omitempty"`
	// Message says in one line what happened or what to do next.
	Message string `json:"message,omitempty"`
	// Time is when the answer was made.
	Time time.Time `json:"time"`
}
