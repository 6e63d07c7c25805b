// Package metrics is Flotilla's Prometheus instrumentation: one registry of
// its own (never the global one, so tests and embedders get a clean slate) and
// a small typed method per thing worth counting.
//
// Labels are chosen to be bounded and safe: application names, closed
// vocabularies and sanitised repository locations. No label ever carries a
// credential, a query string or an error message.
package metrics

import (
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flotilla-gitops/flotilla/application"
)

// Outcome is how one reconcile pass or git fetch ended.
type Outcome string

// Outcomes of a reconcile pass.
const (
	// Succeeded: the pass ran to the end (whether or not it wrote).
	Succeeded Outcome = "succeeded"
	// Gated: a manual application was planned and reported, not applied.
	Gated Outcome = "gated"
	// Failed: a step returned an error.
	Failed Outcome = "failed"
)

// WriteKind is the kind of swarm object a write touched.
type WriteKind string

// Swarm object kinds.
const (
	WriteService WriteKind = "service"
	WriteNetwork WriteKind = "network"
	WriteConfig  WriteKind = "config"
	WriteSecret  WriteKind = "secret"
)

// WebhookResult is what became of one webhook delivery.
type WebhookResult string

// Webhook delivery results.
const (
	// WebhookAccepted: verified, and at least one application refreshed.
	WebhookAccepted WebhookResult = "accepted"
	// WebhookIgnored: verified, but no application watches what it touched.
	WebhookIgnored WebhookResult = "ignored"
	// WebhookRejected: signature or token wrong, replayed, or oversized.
	WebhookRejected WebhookResult = "rejected"
	// WebhookInvalid: verified but unparseable.
	WebhookInvalid WebhookResult = "invalid"
)

// Metrics holds every Flotilla collector and the registry serving them.
// A nil *Metrics is valid and records nothing, so callers need no checks.
type Metrics struct {
	reg *prometheus.Registry

	syncStatus       *prometheus.GaugeVec
	healthStatus     *prometheus.GaugeVec
	reconcileSeconds *prometheus.HistogramVec
	stepSeconds      *prometheus.HistogramVec
	gitFetchSeconds  *prometheus.HistogramVec
	gitFetchErrors   *prometheus.CounterVec
	dockerRequests   *prometheus.CounterVec
	swarmWrites      *prometheus.CounterVec
	driftFields      *prometheus.GaugeVec
	webhooks         *prometheus.CounterVec
	forgePosts       *prometheus.CounterVec
	chartFetches     *prometheus.CounterVec
	chartBytes       *prometheus.CounterVec
	swarmReachable   *prometheus.GaugeVec
	rolloutWeight    *prometheus.GaugeVec
	rolloutSteps     *prometheus.CounterVec
	buildInfo        *prometheus.GaugeVec
	imageFields      *prometheus.GaugeVec
	imageCommits     *prometheus.CounterVec
	imageRuns        *prometheus.CounterVec
}

// New returns Metrics registered on a fresh registry, together with the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		syncStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_app_sync_status",
			Help: "Sync status of each application: 1 for the current status, 0 for the others.",
		}, []string{"app", "status"}),
		healthStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_app_health_status",
			Help: "Health of each application: 1 for the current health, 0 for the others.",
		}, []string{"app", "status"}),
		reconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_reconcile_duration_seconds",
			Help:    "Duration of reconcile passes by application and outcome.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"app", "result"}),
		stepSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_reconcile_step_duration_seconds",
			Help:    "Duration of the steps of reconcile passes (fetch, render, plan, apply, sweep, confirm...), every application together.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60},
		}, []string{"step"}),
		gitFetchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_git_fetch_duration_seconds",
			Help:    "Duration of git fetches (remote checks included) by repository.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"repo"}),
		gitFetchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_git_fetch_errors_total",
			Help: "Failed git fetches by repository.",
		}, []string{"repo"}),
		dockerRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_docker_requests_total",
			Help: "Docker API requests by swarm and operation, version pings included.",
		}, []string{"swarm", "op"}),
		swarmWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_swarm_writes_total",
			Help: "Objects created or updated, by swarm and kind. Zero growth in steady state.",
		}, []string{"swarm", "kind"}),
		swarmReachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_swarm_reachable",
			Help: "Whether a manager of each swarm answered the last check: 1 or 0.",
		}, []string{"swarm"}),
		driftFields: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_drift_fields",
			Help: "Fields whose live value differs from the repository, per application, at the last pass.",
		}, []string{"app"}),
		forgePosts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_forge_posts_total",
			Help: "Commit statuses and pull request comments posted to forges, by kind (status, comment) and result (ok, failed, dropped).",
		}, []string{"kind", "result"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_webhook_deliveries_total",
			Help: "Webhook deliveries by provider and result.",
		}, []string{"provider", "result"}),
		chartFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_chart_fetches_total",
			Help: "Requests to chart repositories by repository, kind (index, archive) and result (fetched, notModified, failed).",
		}, []string{"repo", "kind", "result"}),
		chartBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_chart_fetch_bytes_total",
			Help: "Bytes downloaded from chart repositories by repository and kind; an unchanged index (304) adds none.",
		}, []string{"repo", "kind"}),
		rolloutWeight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_rollout_weight_percent",
			Help: "Share of traffic, in percent, on the extra colour (canary or preview) of each service under a rollout, at the last pass.",
		}, []string{"app", "service"}),
		rolloutSteps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_rollout_steps_total",
			Help: "Rollout decisions that changed something, by application, service and action (start, advance, promote, finalize, abort, restart).",
		}, []string{"app", "service", "action"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_build_info",
			Help: "Always 1; its labels name the running build: version (as released) and goversion (the Go toolchain).",
		}, []string{"version", "goversion"}),
	}
	m.imageFields = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_image_fields",
		Help: "Fields marked by image policies, per application and outcome of the last run (update, current, backwards, vanished, no-candidate, error).",
	}, []string{"app", "outcome"})
	m.imageCommits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_image_commits_total",
		Help: "Commits of new image references pushed, per application.",
	}, []string{"app"})
	m.imageRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_image_runs_total",
		Help: "Runs of an application's image policies, by result (ok, failed).",
	}, []string{"app", "result"})
	m.reg.MustRegister(m.rolloutWeight, m.rolloutSteps, m.imageFields, m.imageCommits, m.imageRuns)
	m.reg.MustRegister(
		m.syncStatus, m.healthStatus, m.reconcileSeconds, m.stepSeconds, m.gitFetchSeconds, m.gitFetchErrors,
		m.dockerRequests, m.swarmWrites, m.driftFields, m.webhooks, m.forgePosts, m.chartFetches, m.chartBytes, m.swarmReachable, m.buildInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry returns the registry, for callers that add collectors of their own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SetBuildInfo publishes the running build's version, so a dashboard or an
// upgrade check can tell which release answers, and when a rolling update
// has reached every replica. Calling it again replaces the series.
func (m *Metrics) SetBuildInfo(version string) {
	if m == nil {
		return
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

var (
	outcomes     = []Outcome{Succeeded, Gated, Failed}
	syncValues   = []application.Sync{application.Synced, application.OutOfSync, application.SyncUnknown}
	healthValues = []application.Health{application.Healthy, application.Suspended, application.Progressing,
		application.Missing, application.Degraded, application.HealthUnknown}
)

// SetStatus records an application's sync and health, one series per value
// of each vocabulary so that a query can alert on "== 1" without knowing the
// previous value.
func (m *Metrics) SetStatus(s application.Status) {
	if m == nil {
		return
	}
	for _, v := range syncValues {
		m.syncStatus.WithLabelValues(s.Name, string(v)).Set(boolf(v == s.Sync))
	}
	for _, v := range healthValues {
		m.healthStatus.WithLabelValues(s.Name, string(v)).Set(boolf(v == s.Health))
	}
	for _, r := range s.Rollouts {
		m.rolloutWeight.WithLabelValues(s.Name, r.Service).Set(float64(r.Weight))
	}
}

// ObserveRolloutStep counts one rollout decision that changed something.
func (m *Metrics) ObserveRolloutStep(app, service, action string) {
	if m == nil {
		return
	}
	m.rolloutSteps.WithLabelValues(app, service, action).Inc()
}

// ForgetApp drops every series of an application removed from the
// applications file, so it stops being reported.
//
// Every per-application series has labels from closed vocabularies besides
// the name, so each is deleted by its exact label values: a hash lookup.
// A partial match would scan every series of the vector, and forgetting
// thousands of applications at once would then cost the square of their
// number.
func (m *Metrics) ForgetApp(app string) {
	if m == nil {
		return
	}
	for _, v := range syncValues {
		m.syncStatus.DeleteLabelValues(app, string(v))
	}
	for _, v := range healthValues {
		m.healthStatus.DeleteLabelValues(app, string(v))
	}
	for _, o := range outcomes {
		m.reconcileSeconds.DeleteLabelValues(app, string(o))
	}
	m.driftFields.DeleteLabelValues(app)
	// Service names are no closed vocabulary; only services under a
	// rollout have these series, so the scan is short.
	m.rolloutWeight.DeletePartialMatch(prometheus.Labels{"app": app})
	m.rolloutSteps.DeletePartialMatch(prometheus.Labels{"app": app})
	for _, o := range ImageOutcomes {
		m.imageFields.DeleteLabelValues(app, o)
	}
	m.imageCommits.DeleteLabelValues(app)
	m.imageRuns.DeleteLabelValues(app, "ok")
	m.imageRuns.DeleteLabelValues(app, "failed")
}

// ImageOutcomes are the outcome labels of flotilla_image_fields: the
// imagepolicy outcomes and "error".
var ImageOutcomes = []string{"update", "current", "backwards", "vanished", "no-candidate", "error"}

// ObserveImageRun records one run of app's image policies: how many marked
// fields ended in each outcome (every label of ImageOutcomes is set, 0 for
// those absent), whether it committed, and whether it failed as a whole.
func (m *Metrics) ObserveImageRun(app string, fields map[string]int, committed, failed bool) {
	if m == nil {
		return
	}
	if failed {
		m.imageRuns.WithLabelValues(app, "failed").Inc()
		return
	}
	m.imageRuns.WithLabelValues(app, "ok").Inc()
	for _, o := range ImageOutcomes {
		m.imageFields.WithLabelValues(app, o).Set(float64(fields[o]))
	}
	if committed {
		m.imageCommits.WithLabelValues(app).Inc()
	}
}

// ObserveReconcile records how long one pass of app took and how it ended.
func (m *Metrics) ObserveReconcile(app string, result Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.reconcileSeconds.WithLabelValues(app, string(result)).Observe(d.Seconds())
}

// ObserveStep records how long one step of a pass took. The step is not
// broken down by application: the steps are a closed vocabulary and their
// sum over all applications is what says where a controller's time goes.
func (m *Metrics) ObserveStep(step string, d time.Duration) {
	if m == nil {
		return
	}
	m.stepSeconds.WithLabelValues(step).Observe(d.Seconds())
}

// ObserveGitFetch records one fetch of repoURL; err non-nil counts a failure.
// The URL is reduced to host/path first (see RepoLabel).
func (m *Metrics) ObserveGitFetch(repoURL string, d time.Duration, err error) {
	if m == nil {
		return
	}
	repo := RepoLabel(repoURL)
	m.gitFetchSeconds.WithLabelValues(repo).Observe(d.Seconds())
	if err != nil {
		m.gitFetchErrors.WithLabelValues(repo).Inc()
	}
}

// ObserveChartFetch records one request to a chart repository: kind is
// "index" or "archive", result how it ended, n the bytes of its body. It
// makes *Metrics a chartrepo.Observer. The URL is reduced as RepoLabel does.
func (m *Metrics) ObserveChartFetch(repoURL, kind, result string, n int64) {
	if m == nil {
		return
	}
	repo := RepoLabel(repoURL)
	m.chartFetches.WithLabelValues(repo, kind, result).Inc()
	if n > 0 {
		m.chartBytes.WithLabelValues(repo, kind).Add(float64(n))
	}
}

// LocalSwarm is the swarm label of the one swarm a controller talks to
// through its own Docker client.
const LocalSwarm = "local"

// DockerRequest counts one Docker API request sent to swarm. op is a fixed
// name chosen by the caller ("service.list", "service.update", ...), never a
// path with ids in it.
func (m *Metrics) DockerRequest(swarm, op string) {
	if m == nil {
		return
	}
	m.dockerRequests.WithLabelValues(swarm, op).Inc()
}

// DockerRequests returns a counter of the requests sent to one swarm, in
// the shape backend.Options.OnRequest takes, so the backend's own count of
// every request is the figure /metrics shows.
func (m *Metrics) DockerRequests(swarm string) func(op string) {
	if m == nil {
		return func(string) {}
	}
	return func(op string) { m.DockerRequest(swarm, op) }
}

// SwarmWrites counts n writes of one kind of object to swarm.
func (m *Metrics) SwarmWrites(swarm string, kind WriteKind, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.swarmWrites.WithLabelValues(swarm, string(kind)).Add(float64(n))
}

// SetSwarmReachable records whether swarm's last check found a manager.
func (m *Metrics) SetSwarmReachable(swarm string, ok bool) {
	if m == nil {
		return
	}
	m.swarmReachable.WithLabelValues(swarm).Set(boolf(ok))
}

// SetDriftFields records how many fields of app's services drifted at the
// last observation.
func (m *Metrics) SetDriftFields(app string, n int) {
	if m == nil {
		return
	}
	m.driftFields.WithLabelValues(app).Set(float64(n))
}

// WebhookDelivery counts one webhook delivery. provider is one of the fixed
// route names (github, gitlab, gitea, bitbucket, generic).
func (m *Metrics) WebhookDelivery(provider string, result WebhookResult) {
	if m == nil {
		return
	}
	m.webhooks.WithLabelValues(provider, string(result)).Inc()
}

// ForgePost counts one forge feedback post: kind is status or comment,
// result ok, failed or dropped.
func (m *Metrics) ForgePost(kind, result string) {
	if m == nil {
		return
	}
	m.forgePosts.WithLabelValues(kind, result).Inc()
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// RepoLabel reduces a repository URL to "host/path" for a label: no scheme,
// no user info (where credentials hide), no port, query or fragment, no
// trailing ".git". It accepts URLs and scp-like "user@host:path"; anything
// else becomes "local" (a file path says nothing useful and may be long).
func RepoLabel(repoURL string) string {
	s := strings.TrimSpace(repoURL)
	var host, path string
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" && u.Scheme != "file" {
		host, path = u.Hostname(), u.Path
	} else if at := strings.LastIndex(s, "@"); !strings.Contains(s, "://") && strings.Contains(s, ":") {
		// scp-like: [user@]host:path
		rest := s[at+1:]
		h, p, _ := strings.Cut(rest, ":")
		host, path = h, p
	} else {
		return "local"
	}
	if host == "" {
		return "local"
	}
	path = strings.Trim(path, "/")
	path = strings.TrimSuffix(path, ".git")
	if path == "" {
		return strings.ToLower(host)
	}
	return strings.ToLower(host) + "/" + path
}
