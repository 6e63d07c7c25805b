package analysis_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/analysis"
	"github.com/flotilla-gitops/flotilla/internal/traefiktest"
	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/router"
)

// Against a real Traefik (FLOTILLA_TRAEFIK, built by scripts/traefik.sh;
// skipped without it): the routes named as the served configuration names
// them are what the runner finds in Traefik's metrics, and it judges them.
func TestRunner_judgesWhatARealTraefikCounted(t *testing.T) {
	var canaryFails atomic.Bool
	serve := func(name string, fails *atomic.Bool) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if fails != nil && fails.Load() {
				http.Error(w, name+" failing", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, name)
		}))
		t.Cleanup(s.Close)
		return s
	}
	stable, canary := serve("stable", nil), serve("canary", &canaryFails)
	var config router.ConfigServer
	provider := httptest.NewServer(&config)
	t.Cleanup(provider.Close)
	tr := traefiktest.Start(t, provider.URL)
	if err := config.Set([]router.Route{{
		Name: analysis.RouteName("shop", "web"), Rule: "Host(`shop.test`)", EntryPoints: []string{"web"},
		Backends: []router.Backend{
			{Name: analysis.StableBackend, Weight: 50, URLs: []string{stable.URL}},
			{Name: analysis.ColourBackend(rollout.Canary), Weight: 50, URLs: []string{canary.URL}},
		},
	}}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func() (int, error) {
		req, err := http.NewRequest(http.MethodGet, tr.Web+"/", nil)
		if err != nil {
			return 0, err
		}
		req.Host = "shop.test"
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, err := get(); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Traefik did not route shop.test within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	send := func(n int) {
		t.Helper()
		for range n {
			if _, err := get(); err != nil {
				t.Fatal(err)
			}
		}
	}

	ratio := 0.05
	a := rollout.Analysis{Interval: 30 * time.Second, MinRequests: 20, MaxErrorRatio: &ratio,
		Traefik: &rollout.TraefikMetrics{Metrics: tr.Admin + "/metrics"}}
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	tg := analysis.Target{App: "shop", Service: "web",
		Spec: rollout.Spec{Strategy: rollout.Canary, Steps: []rollout.Step{{Weight: 50}}, Analysis: &a,
			Router: rollout.Router{Provider: rollout.Traefik, Rule: "Host(`shop.test`)", Port: 80}},
		State: rollout.State{Revision: "r2", Phase: rollout.Progressing, Weight: 50, StepStarted: t0}}
	r := &analysis.Runner{}
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 30 * time.Second) }
	if v, _ := r.Verdict(ctx, tg, at(0)); v != (rollout.Verdict{}) {
		t.Fatalf("verdict at the start = %+v", v)
	}

	canaryFails.Store(true)
	send(100) // Traefik's weighted round robin is exact: 50 on each
	v, _ := r.Verdict(ctx, tg, at(1))
	if v.Result != rollout.Fail || v.Metric != "error ratio" || v.Values != "1.00 > 0.05 (stable 0.00)" {
		t.Fatalf("failing canary: verdict %+v, want Fail on the error ratio 1.00 > 0.05 (stable 0.00)", v)
	}

	canaryFails.Store(false)
	send(100)
	if v, _ := r.Verdict(ctx, tg, at(2)); v.Result != rollout.Pass || v.From != at(1) || v.To != at(2) {
		t.Fatalf("healthy canary: verdict %+v, want Pass over the second interval", v)
	}

	send(10)
	if v, _ := r.Verdict(ctx, tg, at(3)); v.Result != rollout.Inconclusive || v.Metric != "requests" {
		t.Fatalf("quiet canary: verdict %+v, want Inconclusive with too few requests", v)
	}
}
