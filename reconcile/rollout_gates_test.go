package reconcile

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// A rollback is gated like a commit: revision 1 declared an analysis, so
// the rollback to it is judged by that analysis, and a failing interval
// aborts it with all traffic left on the stable service, which runs what
// it ran before the rollback.
func TestAFailingAnalysisAbortsARollback(t *testing.T) {
	traefik := &recordedTraefik{t: t, canaryIs: "b"}
	srv := httptest.NewServer(traefik)
	t.Cleanup(srv.Close)
	metrics := srv.URL + "/metrics"

	b, f, c, clk := canaryOnMinimal(t, metrics)
	f.commit(t, map[string]string{"docker-compose.yml": analysedCanaryCompose("1", metrics)})
	reconcileOK(t, c) // revision 1: web:1, judged by the error ratio
	f.commit(t, map[string]string{"docker-compose.yml": routedCanaryCompose("2")})
	reconcileOK(t, c)
	runCanaryToCompletion(t, b, c, clk)
	if _, web, _, _ := rolloutState(t, b); web != "example/web:2" {
		t.Fatalf("after the rollout web runs %s, want web:2", web)
	}
	// The completed colour drains before anything else starts on it.
	clk.add(rollout.DefaultScaleDownDelay)
	reconcileOK(t, c)
	if st, web, _, n := rolloutState(t, b); st.Phase != rollout.Completed || web != "example/web:2" || n != 0 {
		t.Fatalf("after the drain: state %+v web %s canary at %d, want web:2 completed with no canary task", st, web, n)
	}

	// Every pass from here on is checked: the stable service never runs
	// the version rolled back to.
	stableIsV2 := func(when string) {
		t.Helper()
		if _, web, _, _ := rolloutState(t, b); web != "example/web:2" {
			t.Fatalf("%s: web runs %s, want web:2 (the stable) untouched by the rollback", when, web)
		}
	}
	res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1, By: "test"})
	if err != nil || res.Err != nil {
		t.Fatalf("rollback: %v %v", err, res.Err)
	}
	if st, _, canary, _ := rolloutState(t, b); st.Phase != rollout.Progressing || st.Step != 0 || canary != "example/web:1" {
		t.Fatalf("after the rollback's pass: state %+v canary %s, want web:1 as the canary at step 0", st, canary)
	}
	stableIsV2("the rollback's pass")

	clk.add(5 * time.Second)
	traefik.serve("1-healthy")
	reconcileOK(t, c)
	if st, _, _, _ := rolloutState(t, b); st.Phase != rollout.Progressing || st.Weight != 25 || st.StepStarted.IsZero() {
		t.Fatalf("once the rollback's canary is ready: %+v, want 25%% flowing to it", st)
	}
	stableIsV2("the rollback's first step")

	traefik.serve("2-b-failing")
	clk.add(30 * time.Second)
	res = reconcileOK(t, c)
	st, _, canary, n := rolloutState(t, b)
	if st.Phase != rollout.Aborted || st.Weight != 0 || canary != "example/web:1" || n != 1 {
		t.Fatalf("after a failing interval: state %+v canary %s at %d, want the rollback Aborted with no traffic, its task kept for the scale-down delay", st, canary, n)
	}
	stableIsV2("the abort")
	r := res.Status.Rollouts
	if len(r) != 1 || r[0].Phase != "Aborted" || r[0].Weight != 0 || r[0].Metric != "error ratio" || r[0].Values != "1.00 > 0.05 (stable 0.00)" {
		t.Fatalf("status rollouts %+v, want the rollback Aborted on the error ratio 1.00 > 0.05", r)
	}
	if res.Status.Health != application.Degraded || !strings.Contains(res.Status.HealthMessage, "error ratio 1.00 > 0.05") {
		t.Fatalf("health %s %q, want Degraded with the metric and its values", res.Status.Health, res.Status.HealthMessage)
	}
	routes, _ := c.RolloutRoutes()
	if len(routes) != 1 || routes[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("routes %+v, want all traffic on the stable web:2", routes)
	}

	clk.add(rollout.DefaultScaleDownDelay)
	res = reconcileOK(t, c)
	if st, _, _, n := rolloutState(t, b); st.Phase != rollout.Aborted || n != 0 {
		t.Fatalf("after the scale-down delay: %+v at %d replicas, want the rollback's canary at zero", st, n)
	}
	stableIsV2("the scale-down")
	if res.Status.Health != application.Degraded {
		t.Fatalf("after the scale-down: health %s %q, want still Degraded", res.Status.Health, res.Status.HealthMessage)
	}
	if routes, _ := c.RolloutRoutes(); len(routes) != 1 || routes[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("after the scale-down: routes %+v, want all traffic on the stable web:2", routes)
	}
}

// Self-heal mid-step corrects what another writer changed, back to what
// the rollout decided, and leaves the rollout itself where it was: its
// step, weight, phase and the step's start, the router's weights, and the
// stable service unpromoted.
func TestSelfHealMidStepDoesNotFightTheRollout(t *testing.T) {
	b := newLiveDriftFake()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": routedCanaryCompose("1")})
	clk := &testClock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	app := testApp("shop", true)
	app.SyncPolicy.Automated.SelfHeal = true
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": routedCanaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c) // 25% on web:2
	before, web, canary, n := rolloutState(t, b)
	if before.Phase != rollout.Progressing || before.Step != 0 || before.Weight != 25 || before.StepStarted.IsZero() ||
		web != "example/web:1" || canary != "example/web:2" || n != 1 {
		t.Fatalf("at the serving step: state %+v web %s canary %s at %d, want step 0 at 25%% on one web:2 task", before, web, canary, n)
	}
	routesBefore, _ := c.RolloutRoutes()
	if len(routesBefore) != 1 || routesBefore[0].Weights.Stable != 75 || routesBefore[0].Weights.Canary != 25 {
		t.Fatalf("routes at the serving step %+v, want 75/25", routesBefore)
	}
	// A pass within the step writes nothing: the comparison is of what
	// the rollout decided, not of what git declares.
	if res := reconcileOK(t, c); len(res.Status.Drift) != 0 || res.Healed != nil {
		t.Fatalf("a pass within the step: drift %+v healed %+v, want none", res.Status.Drift, res.Healed)
	}
	stableVersion := b.ServiceVersion("shop", "shop_web")

	// Another writer scales the canary and changes the stable's image.
	b.edit("shop_web-canary", func(s *swarm.Service) {
		three := uint64(3)
		s.Spec.Mode = swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &three}}
	})
	b.edit("shop_web", func(s *swarm.Service) {
		cs := *s.Spec.TaskTemplate.ContainerSpec
		cs.Image = "example/web:tampered"
		s.Spec.TaskTemplate.ContainerSpec = &cs
	})
	clk.add(5 * time.Second) // within the step's pause
	res := reconcileOK(t, c)

	// A healed pass reports what it put back as Corrected.
	drifted := func(service, field, desired, live string) bool {
		return slices.Contains(res.Status.Corrected, application.Drift{Service: service, Field: field, Desired: desired, Live: live})
	}
	if !drifted("web-canary", "replicas", "1", "3") || !drifted("web", "image", "example/web:1", "example/web:tampered") {
		t.Fatalf("drift corrected %+v (still drifted %+v), want web-canary's replicas and web's image", res.Status.Corrected, res.Status.Drift)
	}
	if res.Healed == nil || !slices.Contains(res.Healed.Updated, "web") || !slices.Contains(res.Healed.Updated, "web-canary") {
		t.Fatalf("healed %+v, want web and web-canary written back", res.Healed)
	}
	live, err := b.LiveServices(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if r := live["shop_web-canary"].Spec.Mode.Replicated; r == nil || r.Replicas == nil || *r.Replicas != 1 {
		t.Fatalf("the canary after the heal: mode %+v, want the decision's one replica", live["shop_web-canary"].Spec.Mode)
	}
	if img := live["shop_web"].Spec.TaskTemplate.ContainerSpec.Image; img != "example/web:1" {
		t.Fatalf("web after the heal runs %s, want the stable's recorded web:1", img)
	}
	after, web, canary, n := rolloutState(t, b)
	if after.Phase != before.Phase || after.Step != before.Step || after.Weight != before.Weight || !after.StepStarted.Equal(before.StepStarted) {
		t.Fatalf("the rollout after the heal: %+v, want it as it was: %+v", after, before)
	}
	if web != "example/web:1" || canary != "example/web:2" || n != 1 {
		t.Fatalf("after the heal: web %s canary %s at %d, want web:1 stable and one web:2 canary task", web, canary, n)
	}
	if b.ServiceVersion("shop", "shop_web") != stableVersion+1 {
		t.Fatalf("web written %d times by the heal, want once", b.ServiceVersion("shop", "shop_web")-stableVersion)
	}
	routesAfter, _ := c.RolloutRoutes()
	if len(routesAfter) != 1 || routesAfter[0].Weights != routesBefore[0].Weights {
		t.Fatalf("routes after the heal %+v, want them as they were: %+v", routesAfter, routesBefore)
	}

	// The next pass finds nothing left to heal.
	if res := reconcileOK(t, c); len(res.Status.Drift) != 0 || res.Healed != nil {
		t.Fatalf("the pass after the heal: drift %+v healed %+v, want none", res.Status.Drift, res.Healed)
	}
}
