package reconcile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// recordedTraefik serves the metrics router/testdata recorded from a real
// Traefik routing route "app" over backends a and b, renamed to the
// backends the served configuration gives shop's web service; canaryIs
// says which recorded backend plays the canary. An empty sample answers
// 500.
type recordedTraefik struct {
	t        *testing.T
	canaryIs string
	mu       sync.Mutex
	sample   string
}

func (f *recordedTraefik) serve(sample string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sample = sample
}

func (f *recordedTraefik) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	sample := f.sample
	f.mu.Unlock()
	if sample == "" {
		http.Error(w, "broken", http.StatusInternalServerError)
		return
	}
	b, err := os.ReadFile("../router/testdata/traefik-v3.7.13-" + sample + ".txt")
	if err != nil {
		f.t.Error(err)
		return
	}
	stable := map[string]string{"a": "b", "b": "a"}[f.canaryIs]
	_, _ = w.Write([]byte(strings.NewReplacer(`"app.`+f.canaryIs+`@http"`, `"shop-web.canary@http"`,
		`"app.`+stable+`@http"`, `"shop-web.stable@http"`).Replace(string(b))))
}

// analysedCanaryCompose is canaryCompose behind Traefik, each step gated
// on the canary's error ratio read from metrics.
func analysedCanaryCompose(tag, metrics string) string {
	return gatedCanaryCompose(tag, `maxErrorRatio: 0.05
          traefik: {metrics: "`+metrics+`"}`)
}

// gatedCanaryCompose is routedCanaryCompose with each step gated by the
// analysis checks given (indented for the analysis mapping).
func gatedCanaryCompose(tag, checks string) string {
	return routedCanaryCompose(tag) + `        analysis:
          interval: 30s
          ` + checks + `
`
}

// routedCanaryCompose is web, 4 replicas, under a canary of two steps
// behind Traefik with no analysis: its steps pass on their pauses alone.
func routedCanaryCompose(tag string) string {
	return `version: "3.8"
services:
  web:
    image: example/web:` + tag + `
    deploy:
      replicas: 4
    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 25, pause: 45s}
          - {weight: 50, pause: 1m}
        router: {provider: traefik, rule: "Host(` + "`shop`" + `)", port: 80}
`
}

// analysedCanary runs a canary of web:2 to its first step's traffic and
// then one whole analysis interval in which Traefik goes from the sample
// first to the sample then; it returns the result of the pass that ended
// the interval.
func analysedCanary(t *testing.T, canaryIs, first, then string, atTheEnd ...func(*Controller)) (Result, *Controller, *testClock, func() (rollout.State, uint64)) {
	t.Helper()
	traefik := &recordedTraefik{t: t, canaryIs: canaryIs}
	srv := httptest.NewServer(traefik)
	t.Cleanup(srv.Close)
	metrics := srv.URL + "/metrics"

	b, f, c, clk := canaryOnMinimal(t, srv.URL+"/metrics")
	f.commit(t, map[string]string{"docker-compose.yml": analysedCanaryCompose("1", metrics)})
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": analysedCanaryCompose("2", metrics)})
	reconcileOK(t, c)
	state := func() (rollout.State, uint64) {
		st, _, _, n := rolloutState(t, b)
		return st, n
	}
	clk.add(5 * time.Second)
	traefik.serve(first)
	// The canary is ready: 25% of the traffic, and the step's first
	// interval starts with it.
	ready := reconcileOK(t, c)
	if st, _ := state(); st.Weight != 25 || st.StepStarted.IsZero() {
		t.Fatalf("once ready: %+v, want weight 25 flowing", st)
	}
	if r := ready.Status.Rollouts; len(r) != 1 || !r[0].NextCheck.Equal(clk.Now().Add(30*time.Second)) {
		t.Fatalf("once ready: rollouts %+v, want the next look at the interval's end", r)
	}
	traefik.serve(then)
	clk.add(30 * time.Second)
	for _, f := range atTheEnd {
		f(c)
	}
	return reconcileOK(t, c), c, clk, state
}

func TestAFailingAnalysisIntervalAbortsTheCanary(t *testing.T) {
	// A dry run at the interval's end deploys nothing, so it must leave
	// the interval to the pass that does.
	dryRun := func(c *Controller) {
		res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{By: "test", DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Status.Rollouts; len(r) != 1 || r[0].Phase != "Progressing" || r[0].Verdict != "" {
			t.Fatalf("dry run: status rollouts %+v, want step 0 with no verdict", r)
		}
	}
	res, c, clk, state := analysedCanary(t, "b", "1-healthy", "2-b-failing", dryRun)
	st, n := state()
	if st.Phase != rollout.Aborted || st.Weight != 0 || n != 1 {
		t.Fatalf("after a failing interval: %+v at %d replicas, want Aborted with no traffic, its task kept for the scale-down delay", st, n)
	}
	r := res.Status.Rollouts
	if len(r) != 1 || r[0].Phase != "Aborted" || r[0].Weight != 0 || r[0].Metric != "error ratio" || r[0].Values != "1.00 > 0.05 (stable 0.00)" {
		t.Fatalf("status rollouts %+v, want Aborted on the error ratio 1.00 > 0.05", r)
	}
	if res.Status.Health != application.Degraded || !strings.Contains(res.Status.HealthMessage, "error ratio 1.00 > 0.05") {
		t.Fatalf("health %s %q, want Degraded with the metric and its values", res.Status.Health, res.Status.HealthMessage)
	}
	routes, _ := c.RolloutRoutes()
	if len(routes) != 1 || routes[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("routes %+v, want all traffic on stable", routes)
	}
	clk.add(rollout.DefaultScaleDownDelay)
	reconcileOK(t, c)
	if st, n := state(); st.Phase != rollout.Aborted || n != 0 {
		t.Fatalf("after the scale-down delay: %+v at %d replicas, want no replicas", st, n)
	}
}

func TestAPassingAnalysisIntervalLetsTheCanaryAdvance(t *testing.T) {
	res, c, clk, state := analysedCanary(t, "a", "1-healthy", "2-b-failing")
	if st, _ := state(); st.Phase != rollout.Progressing || st.Step != 0 || st.Verdict != rollout.Pass {
		t.Fatalf("after a passing interval within the pause: %+v (status %+v), want step 0 with a Pass", st, res.Status.Rollouts)
	}
	clk.add(15 * time.Second) // the step's pause is over, not the second interval
	reconcileOK(t, c)
	if st, n := state(); st.Phase != rollout.Progressing || st.Step != 1 || n != 2 {
		t.Fatalf("after the pause: %+v at %d replicas, want step 1 at 2", st, n)
	}
}

func TestAnUnreadableTraefikHoldsTheStepAndSaysWhy(t *testing.T) {
	res, c, clk, state := analysedCanary(t, "b", "1-healthy", "")
	if r := res.Status.Rollouts; len(r) != 1 || !strings.Contains(r[0].Reason, "the last analysis proved nothing (traefik metrics: ") ||
		!strings.Contains(r[0].Reason, "500") {
		t.Fatalf("status rollouts %+v, want the reason to say the metrics answered 500", r)
	}
	clk.add(15 * time.Second) // the step's pause is over, not the second interval
	res = reconcileOK(t, c)
	st, _ := state()
	if st.Phase != rollout.Progressing || st.Step != 0 || st.Weight != 25 || st.Verdict != rollout.Inconclusive {
		t.Fatalf("after an unreadable interval: %+v, want step 0 held at 25 with an Inconclusive verdict", st)
	}
	if res.Status.Health == application.Degraded {
		t.Fatalf("health %s %q: an unreadable metrics endpoint is no failure", res.Status.Health, res.Status.HealthMessage)
	}
	if r := res.Status.Rollouts; len(r) != 1 || !strings.Contains(r[0].Reason, "waiting for a passing analysis") {
		t.Fatalf("status rollouts %+v, want the step waiting for a passing analysis", r)
	}
}
