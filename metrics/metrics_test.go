package metrics

import (
	"errors"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flotilla-gitops/flotilla/application"
)

// scrape fetches the handler's text output and parses it like Prometheus.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape status %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, rec.Body.String())
	}
	return fams
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no %s series with %v", name, labels)
	return 0
}

func TestMetrics_scrapeParsesAndMoves(t *testing.T) {
	m := New()
	m.SetStatus(application.Status{Name: "shop", Sync: application.OutOfSync, Health: application.Progressing})
	m.ObserveReconcile("shop", Succeeded, 1500*time.Millisecond)
	m.ObserveStep("render", 8*time.Millisecond)
	m.ObserveStep("render", 9*time.Millisecond)
	m.ObserveGitFetch("https://user:s3cret@git.example.com/team/shop.git?token=abc", time.Second, errors.New("boom"))
	m.DockerRequest(LocalSwarm, "service.list")
	m.DockerRequests("other")("service.list")
	m.DockerRequests("other")("service.list")
	m.SwarmWrites(LocalSwarm, WriteService, 2)
	m.SwarmWrites("eu", WriteService, 5)
	m.SetSwarmReachable("eu", false)
	m.SetSwarmReachable(LocalSwarm, true)
	m.SetDriftFields("shop", 3)
	m.WebhookDelivery("github", WebhookAccepted)

	f := scrape(t, m)
	if v := value(t, f, "flotilla_app_sync_status", map[string]string{"app": "shop", "status": "OutOfSync"}); v != 1 {
		t.Errorf("sync OutOfSync = %v, want 1", v)
	}
	if v := value(t, f, "flotilla_app_sync_status", map[string]string{"app": "shop", "status": "Synced"}); v != 0 {
		t.Errorf("sync Synced = %v, want 0", v)
	}
	if v := value(t, f, "flotilla_app_health_status", map[string]string{"app": "shop", "status": "Progressing"}); v != 1 {
		t.Errorf("health Progressing = %v, want 1", v)
	}
	if v := value(t, f, "flotilla_reconcile_duration_seconds", map[string]string{"app": "shop", "result": "succeeded"}); v != 1 {
		t.Errorf("reconcile count = %v, want 1", v)
	}
	if v := value(t, f, "flotilla_reconcile_step_duration_seconds", map[string]string{"step": "render"}); v != 2 {
		t.Errorf("render steps = %v, want 2", v)
	}
	repo := map[string]string{"repo": "git.example.com/team/shop"}
	if v := value(t, f, "flotilla_git_fetch_duration_seconds", repo); v != 1 {
		t.Errorf("fetch count = %v", v)
	}
	if v := value(t, f, "flotilla_git_fetch_errors_total", repo); v != 1 {
		t.Errorf("fetch errors = %v", v)
	}
	if v := value(t, f, "flotilla_docker_requests_total", map[string]string{"swarm": "local", "op": "service.list"}); v != 1 {
		t.Errorf("docker requests = %v", v)
	}
	if v := value(t, f, "flotilla_docker_requests_total", map[string]string{"swarm": "other", "op": "service.list"}); v != 2 {
		t.Errorf("docker requests of swarm other = %v, want 2 (each swarm its own series)", v)
	}
	if v := value(t, f, "flotilla_swarm_writes_total", map[string]string{"swarm": "local", "kind": "service"}); v != 2 {
		t.Errorf("swarm writes = %v", v)
	}
	if v := value(t, f, "flotilla_swarm_writes_total", map[string]string{"swarm": "eu", "kind": "service"}); v != 5 {
		t.Errorf("swarm writes of swarm eu = %v, want 5 (each swarm its own series)", v)
	}
	if v := value(t, f, "flotilla_swarm_reachable", map[string]string{"swarm": "eu"}); v != 0 {
		t.Errorf("swarm eu reachable = %v, want 0", v)
	}
	if v := value(t, f, "flotilla_swarm_reachable", map[string]string{"swarm": "local"}); v != 1 {
		t.Errorf("swarm local reachable = %v, want 1", v)
	}
	if v := value(t, f, "flotilla_drift_fields", map[string]string{"app": "shop"}); v != 3 {
		t.Errorf("drift fields = %v", v)
	}
	if v := value(t, f, "flotilla_webhook_deliveries_total", map[string]string{"provider": "github", "result": "accepted"}); v != 1 {
		t.Errorf("webhooks = %v", v)
	}

	m.SetStatus(application.Status{Name: "shop", Sync: application.Synced, Health: application.Healthy})
	f = scrape(t, m)
	if v := value(t, f, "flotilla_app_sync_status", map[string]string{"app": "shop", "status": "OutOfSync"}); v != 0 {
		t.Errorf("after sync OutOfSync = %v, want 0", v)
	}
	if v := value(t, f, "flotilla_app_sync_status", map[string]string{"app": "shop", "status": "Synced"}); v != 1 {
		t.Errorf("after sync Synced = %v, want 1", v)
	}
}

func TestMetrics_noSecretInAnyLabel(t *testing.T) {
	m := New()
	m.ObserveGitFetch("https://x-access-token:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r.git", time.Second, nil)
	m.ObserveGitFetch("git@github.com:o/private.git", time.Second, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, bad := range []string{"ghp_", "x-access-token", "git@"} {
		if strings.Contains(rec.Body.String(), bad) {
			t.Errorf("scrape contains %q", bad)
		}
	}
}

func TestMetrics_forgetApp(t *testing.T) {
	m := New()
	m.SetStatus(application.Status{Name: "gone", Sync: application.Synced, Health: application.Healthy})
	m.ForgetApp("gone")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), `app="gone"`) {
		t.Fatal("series of a forgotten app still scraped")
	}
}

func TestMetrics_forgetAppDropsEverySeriesOfThatAppAndNoOther(t *testing.T) {
	m := New()
	for _, app := range []string{"gone", "kept"} {
		m.SetStatus(application.Status{Name: app, Sync: application.OutOfSync, Health: application.Degraded})
		for _, o := range []Outcome{Succeeded, Gated, Failed} {
			m.ObserveReconcile(app, o, time.Second)
		}
		m.SetDriftFields(app, 2)
	}
	m.ForgetApp("gone")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if strings.Contains(body, `app="gone"`) {
		t.Fatalf("series of a forgotten app still scraped:\n%s", grepLines(body, `app="gone"`))
	}
	for _, name := range []string{"flotilla_app_sync_status", "flotilla_app_health_status", "flotilla_reconcile_duration_seconds_count", "flotilla_drift_fields"} {
		if !strings.Contains(grepLines(body, `app="kept"`), name) {
			t.Errorf("%s of the kept app is gone", name)
		}
	}
}

func grepLines(body, sub string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestMetrics_nilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.SetStatus(application.Status{Name: "x"})
	m.ObserveReconcile("x", Failed, time.Second)
	m.ObserveStep("fetch", time.Second)
	m.ObserveGitFetch("https://h/p", time.Second, nil)
	m.DockerRequest(LocalSwarm, "op")
	m.DockerRequests(LocalSwarm)("op")
	m.SwarmWrites(LocalSwarm, WriteConfig, 1)
	m.SetSwarmReachable(LocalSwarm, true)
	m.SetDriftFields("x", 1)
	m.WebhookDelivery("generic", WebhookRejected)
	m.ForgetApp("x")
}

func TestRepoLabel(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/org/repo.git":                "github.com/org/repo",
		"https://user:pass@GitLab.example.com:8443/a/b/": "gitlab.example.com/a/b",
		"ssh://git@host.example/org/repo":                "host.example/org/repo",
		"git@github.com:org/repo.git":                    "github.com/org/repo",
		"https://host/repo?private_token=abc#frag":       "host/repo",
		"/srv/git/repo":                                  "local",
		"file:///srv/git/repo":                           "local",
		"":                                               "local",
	} {
		if got := RepoLabel(in); got != want {
			t.Errorf("RepoLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMetrics_chartFetchesCountRequestsAndIndexBytes(t *testing.T) {
	m := New()
	m.ObserveChartFetch("https://charts.example.com/stable?token=x", "index", "fetched", 1200)
	m.ObserveChartFetch("https://charts.example.com/stable", "index", "notModified", 0)
	m.ObserveChartFetch("https://charts.example.com/stable", "index", "notModified", 0)
	m.ObserveChartFetch("https://charts.example.com/stable", "archive", "fetched", 300)
	fams := scrape(t, m)
	repo := "charts.example.com/stable"
	if v := value(t, fams, "flotilla_chart_fetches_total", map[string]string{"repo": repo, "kind": "index", "result": "notModified"}); v != 2 {
		t.Errorf("not modified %v", v)
	}
	if v := value(t, fams, "flotilla_chart_fetch_bytes_total", map[string]string{"repo": repo, "kind": "index"}); v != 1200 {
		t.Errorf("index bytes %v", v)
	}
	if v := value(t, fams, "flotilla_chart_fetch_bytes_total", map[string]string{"repo": repo, "kind": "archive"}); v != 300 {
		t.Errorf("archive bytes %v", v)
	}
	var nilm *Metrics
	nilm.ObserveChartFetch("https://h/p", "index", "fetched", 1)
}

func TestBuildInfoNamesTheVersionAndGoToolchainAndIsReplacedNotAdded(t *testing.T) {
	m := New()
	m.SetBuildInfo("1.0.0")
	m.SetBuildInfo("1.1.0")
	fams := scrape(t, m)
	f, ok := fams["flotilla_build_info"]
	if !ok {
		t.Fatal("no flotilla_build_info family")
	}
	if len(f.Metric) != 1 {
		t.Fatalf("flotilla_build_info has %d series, want 1 (the last version set)", len(f.Metric))
	}
	if v := value(t, fams, "flotilla_build_info", map[string]string{"version": "1.1.0", "goversion": runtime.Version()}); v != 1 {
		t.Fatalf("flotilla_build_info = %v, want 1", v)
	}
	var none *Metrics
	none.SetBuildInfo("x") // a nil *Metrics records nothing and does not panic
}
