package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// keyedCanaryCompose is a stack whose web service is released by a
// one-step canary through Traefik, or, with rolled false, the same stack
// with the rollout key dropped.
func keyedCanaryCompose(tag string, rolled bool) string {
	s := `version: "3.8"
services:
  web:
    image: example/web:` + tag + `
    deploy:
      replicas: 4
`
	if rolled {
		s += `    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 25, pause: 1m}
        router: {provider: traefik, rule: "Host(` + "`shop.example`" + `)", port: 8080}
`
	}
	return s + `  worker:
    image: example/worker:1
`
}

// removingFake is a liveDriftFake (so the sweep can read what each
// record declared) whose services a sweep can remove.
type removingFake struct {
	*liveDriftFake
}

func (f removingFake) RemoveService(_ context.Context, id string) error {
	f.mu.Lock()
	delete(f.live, id)
	f.mu.Unlock()
	if !f.ForgetService(id) {
		return errors.New("no such service " + id)
	}
	return nil
}
func (removingFake) RemoveNetwork(context.Context, string) error { return errors.New("not kept") }
func (removingFake) RemoveConfig(context.Context, string) error  { return errors.New("not kept") }
func (removingFake) RemoveSecret(context.Context, string) error  { return errors.New("not kept") }

// routedCanary installs web:1 under a routed canary, commits web:2 and
// passes until step 0's weight flows.
func routedCanary(t *testing.T, prune bool) (removingFake, *fakeFetcher, *Controller, *testClock, *eventLog) {
	t.Helper()
	b := removingFake{newLiveDriftFake()}
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": keyedCanaryCompose("1", true)})
	clk := &testClock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	app := testApp("shop", true)
	app.SyncPolicy.Automated.Prune = prune
	app.SyncPolicy.Rollback = &application.Rollback{OnDegraded: application.Duration{Duration: time.Second}}
	log := &eventLog{}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now, Events: log}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": keyedCanaryCompose("2", true)})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if st, _, _, _ := rolloutState(t, b); st.Weight != 25 {
		t.Fatalf("setting up: state %+v, want step 0 at weight 25", st)
	}
	if routes, _ := c.RolloutRoutes(); len(routes) != 1 || routes[0].Weights != (rollout.Weights{Stable: 75, Canary: 25}) {
		t.Fatalf("setting up: routes %+v", routes)
	}
	return b, f, c, clk, log
}

// dropRollout commits the stack without the rollout key at tag and runs
// one pass, which must write once.
func dropRollout(t *testing.T, b removingFake, f *fakeFetcher, c *Controller, tag string) Result {
	t.Helper()
	before, _ := b.Releases(context.Background(), "shop")
	f.commit(t, map[string]string{"docker-compose.yml": keyedCanaryCompose(tag, false)})
	res := reconcileOK(t, c)
	if res.Action != charts.Upgrade || res.Revision != before[0].Revision+1 {
		t.Fatalf("dropping the key: action %s revision %d, want one upgrade to %d", res.Action, res.Revision, before[0].Revision+1)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if strings.Contains(rs[0].Manifest, "web-canary") || strings.Contains(rs[0].Manifest, "rollout") {
		t.Fatalf("the record still declares the colour or the rollout:\n%s", rs[0].Manifest)
	}
	if len(res.Status.Rollouts) != 0 {
		t.Fatalf("status rollouts %+v, want none", res.Status.Rollouts)
	}
	if routes, complete := c.RolloutRoutes(); !complete || len(routes) != 0 {
		t.Fatalf("routes %+v (complete %v), want none: the router configuration drops the service", routes, complete)
	}
	return res
}

// Dropping the key once a rollout completed: the idle colour is pruned,
// the route leaves the router's configuration and the stable service
// takes the new definition in the same write.
func TestDroppingTheRolloutKeyAfterARolloutPrunesTheColourAndTheRoute(t *testing.T) {
	b, f, c, clk, _ := routedCanary(t, true)
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	reconcileOK(t, c)
	// The colour drains for scaleDownDelay, then stops.
	clk.add(time.Minute)
	reconcileOK(t, c)
	if st, web, _, n := rolloutState(t, b); st.Phase != rollout.Completed || n != 0 || web != "example/web:2" {
		t.Fatalf("setting up: state %+v canary at %d web %s, want Completed at 0 on web:2", st, n, web)
	}

	res := dropRollout(t, b, f, c, "3")
	requireDeployedWithoutTheColour(t, b, res, "example/web:3")
}

// requireDeployedWithoutTheColour fails t unless web runs image, the
// colour is gone from the swarm and named among the sweep's removals, and
// the application is Healthy.
func requireDeployedWithoutTheColour(t *testing.T, b removingFake, res Result, image string) {
	t.Helper()
	if web, _ := liveService(t, b, "web"); web.Image != image {
		t.Fatalf("web runs %s, want %s from the one write", web.Image, image)
	}
	if _, ok := liveService(t, b, "web-canary"); ok {
		t.Fatalf("the colour was not pruned: sweep %+v", res.Status.Sweep)
	}
	if s := res.Status.Sweep; s == nil || !slices.Contains(s.Removed, "service shop_web-canary") {
		t.Fatalf("sweep %+v, want the colour removed", s)
	}
	if res.Status.Health != application.Healthy {
		t.Fatalf("health %s %q, want Healthy", res.Status.Health, res.Status.HealthMessage)
	}
}

// Dropping the key mid-rollout, prune on: the commit is deployed as
// without a rollout, so the stable service takes the new definition in the
// one write, the colour that held a share of the traffic is pruned, and
// the route leaves the router's configuration in the same pass.
func TestDroppingTheRolloutKeyMidRolloutDeploysAsWithoutItAndPrunesTheColour(t *testing.T) {
	b, f, c, _, _ := routedCanary(t, true)
	res := dropRollout(t, b, f, c, "2")
	requireDeployedWithoutTheColour(t, b, res, "example/web:2")
}

// Dropping the key with prune off: the colour is kept and listed as
// pending removal. While it still runs tasks (mid-rollout) the application
// is Degraded naming it, and an automatic rollback does not act on that;
// a colour already at zero (after a rollout) is only pending.
func TestDroppingTheRolloutKeyWithPruneOffReportsARunningColour(t *testing.T) {
	b, f, c, clk, log := routedCanary(t, false)
	res := dropRollout(t, b, f, c, "2")
	col, ok := liveService(t, b, "web-canary")
	if !ok || col.Desired != 1 {
		t.Fatalf("the colour: present %v at %d, want kept at 1 with prune off", ok, col.Desired)
	}
	if s := res.Status.Sweep; s == nil || !s.DryRun || !slices.Contains(s.Pending, "service shop_web-canary") {
		t.Fatalf("sweep %+v, want the colour pending removal", s)
	}
	if res.Status.Health != application.Degraded || !strings.Contains(res.Status.HealthMessage, "web-canary") ||
		!strings.Contains(res.Status.HealthMessage, "still runs 1 task(s)") || !strings.Contains(res.Status.HealthMessage, "weight 25%") {
		t.Fatalf("health %s %q, want Degraded naming the running colour and its weight", res.Status.Health, res.Status.HealthMessage)
	}
	// Later passes keep saying so, and none rolls back (the application
	// rolls back after a second Degraded otherwise).
	for range 3 {
		clk.add(time.Minute)
		res = reconcileOK(t, c)
		if res.Action != charts.Unchanged || res.Status.Health != application.Degraded {
			t.Fatalf("a later pass: %s revision %d, health %s", res.Action, res.Revision, res.Status.Health)
		}
	}
	log.mu.Lock()
	for _, e := range log.evs {
		if e.Type == events.RolledBack {
			t.Errorf("an automatic rollback was started: %s", e.Message)
		}
	}
	log.mu.Unlock()

	// After a completed rollout the colour runs nothing: pending, not Degraded.
	b, f, c, clk, _ = routedCanary(t, false)
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	reconcileOK(t, c)
	clk.add(time.Minute)
	reconcileOK(t, c)
	res = dropRollout(t, b, f, c, "3")
	if s := res.Status.Sweep; s == nil || !slices.Contains(s.Pending, "service shop_web-canary") {
		t.Fatalf("sweep %+v, want the idle colour pending removal", s)
	}
	if res.Status.Health != application.Healthy {
		t.Fatalf("health %s %q, want Healthy with the colour at zero", res.Status.Health, res.Status.HealthMessage)
	}
}

// A manual application's commit that drops the key is not deployed until
// a sync: the colour the swarm runs is still the newest record's, and the
// application is OutOfSync, not Degraded for it.
func TestDroppingTheRolloutKeyOfAManualApplicationIsNotDegradedBeforeTheSync(t *testing.T) {
	b, f, c, _, _ := routedCanary(t, false)
	manual := testApp("shop", false)
	c.SetApplications([]application.Application{manual})
	before, _ := b.Releases(context.Background(), "shop")
	f.commit(t, map[string]string{"docker-compose.yml": keyedCanaryCompose("2", false)})
	res := reconcileOK(t, c)
	if rs, _ := b.Releases(context.Background(), "shop"); rs[0].Revision != before[0].Revision {
		t.Fatalf("a manual application wrote revision %d without a sync", rs[0].Revision)
	}
	if web, _ := liveService(t, b, "web"); web.Image != "example/web:1" {
		t.Fatalf("web runs %s, want web:1 until the sync", web.Image)
	}
	if col, ok := liveService(t, b, "web-canary"); !ok || col.Desired != 1 {
		t.Fatalf("the colour: present %v at %d, want still running", ok, col.Desired)
	}
	if res.Status.Sync != application.OutOfSync || res.Status.Health == application.Degraded {
		t.Fatalf("sync %s health %s %q, want OutOfSync and not Degraded", res.Status.Sync, res.Status.Health, res.Status.HealthMessage)
	}
}
