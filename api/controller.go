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

// RevisionDiffer compares a recorded revision's manifest with the one the
// repository declares now (against "declared") or with the newest record's
// (against "deployed": what a rollback to it would change). Manifest is
// then the only part of the Diff that is set beside the commits.
type RevisionDiffer interface {
	DiffRevision(ctx context.Context, app string, revision int, against string) (Diff, error)
}

// Sides a revision diff is taken against (GET …/diff?revision=N&against=).
const (
	AgainstDeclared = "declared"
	AgainstDeployed = "deployed"
)

// Rollbacker redeploys a recorded revision. An automated application then
// stays on it until a new commit arrives or the rollback is cleared.
type Rollbacker interface {
	Rollback(ctx context.Context, app string, revision int, by string) (<-chan SyncResult, error)
}

// SwarmLister reports on the swarms the controller deploys to.
type SwarmLister interface {
	Swarms(ctx context.Context) ([]SwarmStatus, error)
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

func diffRevision(ctx context.Context, c Controller, app string, revision int, against string) (Diff, error) {
	if d, ok := c.(RevisionDiffer); ok {
		return d.DiffRevision(ctx, app, revision, against)
	}
	return Diff{}, unsupported("the diff against a revision", "RevisionDiffer")
}

func rollback(ctx context.Context, c Controller, app string, revision int, by string) (<-chan SyncResult, error) {
	if r, ok := c.(Rollbacker); ok {
		return r.Rollback(ctx, app, revision, by)
	}
	return nil, unsupported("rollback", "Rollbacker")
}

func swarmList(ctx context.Context, c Controller) ([]SwarmStatus, error) {
	if l, ok := c.(SwarmLister); ok {
		return l.Swarms(ctx)
	}
	return nil, unsupported("the swarm list", "SwarmLister")
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
	// Plan is what a dry run would write and remove; nil for other passes.
	Plan *Diff
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
	// Project names the project the application belongs to, empty for
	// none; the console filters the list by it.
	Project string `json:"project,omitempty"`
}

// ApplicationList is the answer of GET /api/v1/applications.
type ApplicationList struct {
	Items []ApplicationSummary `json:"items"`
	// ConfigProblem says why the newest applications file was not loaded
	// (the applications listed are those of the one before); shown to
	// global roles only, empty when the newest was loaded.
	ConfigProblem string `json:"configProblem,omitempty"`
}

// SwarmStatus is one swarm the controller deploys to, as its last check
// found it.
type SwarmStatus struct {
	Name string `json:"name"`
	// Reachable: a manager answered and can manage the swarm; Error says
	// why not.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Host is the endpoint in use, one of Hosts.
	Host  string   `json:"host"`
	Hosts []string `json:"hosts"`
	// Nodes and Managers count the swarm's nodes; EngineVersion is the
	// Docker engine of the manager in use.
	Nodes         int    `json:"nodes"`
	Managers      int    `json:"managers"`
	EngineVersion string `json:"engineVersion,omitempty"`
	// Applications counts the applications deploying to it.
	Applications int       `json:"applications"`
	Checked      time.Time `json:"checked"`
}

// SwarmList is the answer of GET /api/v1/swarms.
type SwarmList struct {
	Items []SwarmStatus `json:"items"`
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
	// Plan is set on a dry run's answer: the services it would create and
	// update, field by field, and the objects a prune would remove (removed
	// only when the sync asks for prune), with nothing written.
	Plan *Diff `json:"plan,omitempty"`
	// Error is the sanitised error of a failed pass.
	Error string `json:"error,omitempty"`
	// Message says in one line what happened or what to do next.
	Message string `json:"message,omitempty"`
	// Time is when the answer was made.
	Time time.Time `json:"time"`
}

// LogReader streams the logs of an application's tasks.
type LogReader interface {
	// Logs hands each line to emit until the logs end or, when following,
	// until ctx ends. An error wrapping ErrNotFound names a service or task
	// the application does not have.
	Logs(ctx context.Context, app string, o LogOptions, emit func(LogLine) error) error
}

func logs(ctx context.Context, c Controller, app string, o LogOptions, emit func(LogLine) error) error {
	if l, ok := c.(LogReader); ok {
		return l.Logs(ctx, app, o, emit)
	}
	return unsupported("service logs", "LogReader")
}

// LogMasker blanks an application's secret values in its service logs.
// LogMask returns a function that replaces, in one line, every secret value
// the controller can reproduce for the application's deployed revision, and
// a phrase naming that revision. An error means the values could not be
// reproduced; the route then refuses rather than stream logs that may hold
// them. A controller without it streams unmasked and says so in a header.
type LogMasker interface {
	LogMask(ctx context.Context, app string) (blank func(string) string, from string, err error)
}

func logMask(ctx context.Context, c Controller, app string) (blank func(string) string, from string, ok bool, err error) {
	if m, is := c.(LogMasker); is {
		blank, from, err = m.LogMask(ctx, app)
		return blank, from, true, err
	}
	return nil, "", false, nil
}

// LogOptions are the query of GET …/logs.
type LogOptions struct {
	// Service is an unscoped service name and Task a task id; empty reads
	// every task of every service.
	Service string
	Task    string
	// Tail is the number of last lines per service to start with.
	Tail int
	// Follow keeps the answer open for new lines.
	Follow     bool
	Timestamps bool
}

// LogLine is one line of GET …/logs, which answers with one JSON object a
// line (application/x-ndjson). A stream that fails after it started ends
// with a line holding only Error.
type LogLine struct {
	Service string `json:"service,omitempty"`
	Task    string `json:"task,omitempty"`
	Node    string `json:"node,omitempty"`
	// Time is RFC 3339 with nanoseconds, set when ?timestamps=1.
	Time  string `json:"time,omitempty"`
	Text  string `json:"text"`
	Error string `json:"error,omitempty"`
}
