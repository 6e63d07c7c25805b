package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// canaryCompose is a stack whose web service is released by a canary of
// two steps; worker has no rollout.
func canaryCompose(tag string) string {
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
          - {weight: 25, pause: 1m}
          - {weight: 50, pause: 1m}
  worker:
    image: example/worker:1
`
}

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// canaryOnMinimal is canaryWithEvents without the events. grants are the
// application's allow.analysisURLs.
func canaryOnMinimal(t *testing.T, grants ...string) (*chartstest.MinimalBackend, *fakeFetcher, *Controller, *testClock) {
	t.Helper()
	b, f, c, clk, _ := canaryWithEvents(t, grants...)
	return b, f, c, clk
}

func canaryWithEvents(t *testing.T, grants ...string) (*chartstest.MinimalBackend, *fakeFetcher, *Controller, *testClock, *eventLog) {
	t.Helper()
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("1")})
	clk := &testClock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	log := &eventLog{}
	app := testApp("shop", true)
	app.Allow.AnalysisURLs = grants
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now, Events: log}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	return b, f, c, clk, log
}

// rolloutEvents are the actions of the rollout.step events published.
func rolloutEvents(l *eventLog) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.evs {
		if e.Type == events.RolloutStep {
			out = append(out, e.Service+":"+e.Data["action"].(string))
		}
	}
	return out
}

// liveService returns the stack's service as the backend reports it.
func liveService(t *testing.T, b charts.Backend, name string) (charts.ServiceState, bool) {
	t.Helper()
	for _, s := range b.StackServices(context.Background(), "shop") {
		if s.Name == name {
			return s, true
		}
	}
	return charts.ServiceState{}, false
}

// rolloutState checks the pass and returns the canary's recorded state,
// the images of web and web-canary and the canary's replica count.
func rolloutState(t *testing.T, b charts.Backend) (rollout.State, string, string, uint64) {
	t.Helper()
	web, ok := liveService(t, b, "web")
	if !ok {
		t.Fatal("no web service")
	}
	canary, ok := liveService(t, b, "web-canary")
	if !ok {
		return rollout.State{}, web.Image, "", 0
	}
	st, err := rollout.StateFromLabels(canary.Labels)
	if err != nil {
		t.Fatal(err)
	}
	return st, web.Image, canary.Image, canary.Desired
}

func reconcileOK(t *testing.T, c *Controller) Result {
	t.Helper()
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatalf("pass failed: %v", res.Err)
	}
	return res
}

func TestACanaryIsDrivenStepByStepThroughTheManifest(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)

	// A first deploy has nothing to protect: no canary.
	reconcileOK(t, c)
	if _, ok := liveService(t, b, "web-canary"); ok {
		t.Fatal("a first deploy created a canary")
	}

	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	res := reconcileOK(t, c)
	st, web, canary, n := rolloutState(t, b)
	if st.Phase != rollout.Progressing || st.Step != 0 || st.Weight != 0 {
		t.Fatalf("after the commit: state %+v, want Progressing step 0 weight 0", st)
	}
	if web != "example/web:1" || canary != "example/web:2" || n != 1 {
		t.Fatalf("after the commit: web %s, canary %s at %d replicas; want web:1, web:2 at 1", web, canary, n)
	}
	if want := clk.Now().Add(rollout.ReadyPoll); !res.NextCheck.Equal(want) {
		t.Fatalf("NextCheck %v, want %v (the readiness poll)", res.NextCheck, want)
	}
	if len(res.Status.Rollouts) != 1 || res.Status.Rollouts[0].Phase != "Progressing" {
		t.Fatalf("status rollouts %+v", res.Status.Rollouts)
	}

	// The canary runs: step 0's weight flows and its pause starts.
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	st, _, _, _ = rolloutState(t, b)
	if st.Weight != 25 || st.StepStarted.IsZero() {
		t.Fatalf("once ready: state %+v, want weight 25 and the pause started", st)
	}
	routes, complete := c.RolloutRoutes()
	if !complete || len(routes) != 1 || routes[0].Stable != "shop_web" || routes[0].Colour != "shop_web-canary" ||
		routes[0].Weights != (rollout.Weights{Stable: 75, Canary: 25}) || routes[0].Router.Provider != rollout.NoRouter {
		t.Fatalf("routes %+v", routes)
	}

	// Within the pause nothing is written.
	clk.add(10 * time.Second)
	if res := reconcileOK(t, c); res.Action != charts.Unchanged || res.Revision != 0 {
		t.Fatalf("within the pause: action %s revision %d, want nothing written", res.Action, res.Revision)
	}

	// The pause is over: step 1 scales the canary, then its weight flows.
	clk.add(time.Minute)
	reconcileOK(t, c)
	st, _, _, n = rolloutState(t, b)
	if st.Step != 1 || st.Weight != 25 || n != 2 {
		t.Fatalf("after step 0: state %+v at %d replicas, want step 1 still at weight 25 with 2 replicas", st, n)
	}
	reconcileOK(t, c)
	st, web, _, _ = rolloutState(t, b)
	if st.Step != 1 || st.Weight != 50 || web != "example/web:1" {
		t.Fatalf("step 1: state %+v web %s, want weight 50 and web still on 1", st, web)
	}

	// The last pause is over: the stable service gets the new definition.
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	st, web, _, _ = rolloutState(t, b)
	if st.Phase != rollout.Promoting || web != "example/web:2" {
		t.Fatalf("after the last step: state %+v web %s, want Promoting with web:2", st, web)
	}
	reconcileOK(t, c)
	st, web, _, n = rolloutState(t, b)
	if st.Phase != rollout.Completed || n != 0 || web != "example/web:2" {
		t.Fatalf("after promote: state %+v, canary at %d, web %s; want Completed, 0, web:2", st, n, web)
	}
	res = reconcileOK(t, c)
	if res.Status.Health != application.Healthy {
		t.Fatalf("after the rollout: health %s %q, want Healthy with the canary idle", res.Status.Health, res.Status.HealthMessage)
	}
	if res.Action != charts.Unchanged || !res.NextCheck.IsZero() {
		t.Fatalf("after the rollout: action %s NextCheck %v, want unchanged and no timed look", res.Action, res.NextCheck)
	}
	if w, _ := liveService(t, b, "worker"); w.Image != "example/worker:1" {
		t.Fatalf("worker %s", w.Image)
	}
}

func TestAnOperatorAbortKeepsTheStableServiceAndScalesTheCanaryToZero(t *testing.T) {
	b, f, c, clk, log := canaryWithEvents(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)

	if err := c.RolloutCommand("shop", "web", rollout.CommandAbort); err != nil {
		t.Fatal(err)
	}
	// Until a pass deploys it, the command shows as pending: an operator
	// can see it is not done (and, after a restart, that it was lost).
	if st, _ := c.Status("shop"); len(st.Rollouts) != 1 || st.Rollouts[0].Pending != "abort" {
		t.Fatalf("status rollouts before the pass %+v, want abort pending", st.Rollouts)
	}
	if sts := c.Statuses(); len(sts) != 1 || len(sts[0].Rollouts) != 1 || sts[0].Rollouts[0].Pending != "abort" {
		t.Fatalf("statuses before the pass %+v, want abort pending", sts)
	}
	res := reconcileOK(t, c)
	if r := res.Status.Rollouts; len(r) != 1 || r[0].Pending != "" {
		t.Fatalf("the pass's own status %+v shows a command pending", r)
	}
	if st, _ := c.Status("shop"); len(st.Rollouts) != 1 || st.Rollouts[0].Pending != "" {
		t.Fatalf("status rollouts after the pass %+v, want nothing pending", st.Rollouts)
	}
	st, web, canary, n := rolloutState(t, b)
	if st.Phase != rollout.Aborted || st.Weight != 0 || n != 0 || web != "example/web:1" || canary != "example/web:2" {
		t.Fatalf("after abort: state %+v web %s canary %s at %d", st, web, canary, n)
	}
	if r := res.Status.Rollouts; len(r) != 1 || r[0].Phase != "Aborted" || !strings.Contains(r[0].Reason, "operator") {
		t.Fatalf("status rollouts %+v", r)
	}
	if res.Status.Health != application.Degraded || !strings.Contains(res.Status.HealthMessage, "aborted at step 0") {
		t.Fatalf("health after abort: %s %q, want Degraded naming the step", res.Status.Health, res.Status.HealthMessage)
	}
	if got, want := strings.Join(rolloutEvents(log), " "), "web:start web:advance web:abort"; got != want {
		t.Fatalf("rollout events %q, want %q", got, want)
	}
	// The abort holds: later passes leave it.
	clk.add(time.Hour)
	if res := reconcileOK(t, c); res.Action != charts.Unchanged {
		t.Fatalf("after abort, a later pass: %s", res.Action)
	}

	// A retry starts again from step 0.
	if err := c.RolloutCommand("shop", "web", rollout.CommandRetry); err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, c)
	if st, _, _, n := rolloutState(t, b); st.Phase != rollout.Progressing || st.Step != 0 || n != 1 {
		t.Fatalf("after retry: %+v at %d", st, n)
	}
	if err := c.RolloutCommand("shop", "web", "bogus"); err == nil {
		t.Fatal("an unknown command was taken")
	}
}

func TestARestartedControllerResumesTheCanaryAtItsRecordedStep(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	before, _, _, _ := rolloutState(t, b)

	c2, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	clk.add(10 * time.Second)
	res := mustReconcile(t, c2, "shop")
	if res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("a new controller within the pause: %s %v, want nothing written", res.Action, res.Err)
	}
	after, web, _, _ := rolloutState(t, b)
	if after != before || web != "example/web:1" {
		t.Fatalf("restart moved the rollout: %+v → %+v (web %s)", before, after, web)
	}
	if want := before.StepStarted.Add(time.Minute); !res.NextCheck.Equal(want) {
		t.Fatalf("NextCheck %v, want the end of the recorded pause %v", res.NextCheck, want)
	}
}

func TestANewRevisionMidRolloutStartsAgainWithTrafficBackOnStable(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)

	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("3")})
	reconcileOK(t, c)
	st, web, canary, n := rolloutState(t, b)
	if st.Weight != 0 || st.Step != 0 || web != "example/web:1" || canary != "example/web:3" || n != 1 {
		t.Fatalf("superseded: %+v web %s canary %s at %d", st, web, canary, n)
	}
}

func TestAnAbortedRolloutIsNotRolledBackAutomatically(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("1")})
	clk := &testClock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	app := testApp("shop", true)
	app.SyncPolicy.Rollback = &application.Rollback{OnDegraded: application.Duration{Duration: time.Second}}
	log := &eventLog{}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now, Events: log}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if err := c.RolloutCommand("shop", "web", rollout.CommandAbort); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.add(time.Minute)
		if res := reconcileOK(t, c); res.Status.Health != application.Degraded {
			t.Fatalf("after the abort: health %s, want Degraded", res.Status.Health)
		}
	}
	log.mu.Lock()
	for _, e := range log.evs {
		if e.Type == events.RolledBack {
			t.Fatalf("an aborted rollout was rolled back: %s", e.Message)
		}
	}
	log.mu.Unlock()
	if st, web, _, n := rolloutState(t, b); st.Phase != rollout.Aborted || n != 0 || web != "example/web:1" {
		t.Fatalf("after the abort: %+v canary at %d web %s", st, n, web)
	}
}

// previewState returns the blue/green preview's recorded state, the images
// of web and web-preview, and the preview's replica count.
func previewState(t *testing.T, b charts.Backend) (rollout.State, string, string, uint64) {
	t.Helper()
	web, _ := liveService(t, b, "web")
	p, ok := liveService(t, b, "web-preview")
	if !ok {
		t.Fatal("no preview")
	}
	st, err := rollout.StateFromLabels(p.Labels)
	if err != nil {
		t.Fatal(err)
	}
	return st, web.Image, p.Image, p.Desired
}

func blueGreenCompose(tag string) string {
	return `version: "3.8"
services:
  web:
    image: example/web:` + tag + `
    deploy:
      replicas: 3
    x-flotilla:
      rollout:
        strategy: blueGreen
        preview: {pause: 1m}
        router: {provider: traefik, rule: "Host(` + "`shop.example`" + `)", port: 8080}
`
}

func TestABlueGreenReleasePreviewsSwitchesAndPromotes(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	f.commit(t, map[string]string{"docker-compose.yml": blueGreenCompose("1")})
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": blueGreenCompose("2")})
	reconcileOK(t, c)

	st, web, img, n := previewState(t, b)
	if st.Phase != rollout.Previewing || st.Weight != 0 || web != "example/web:1" || img != "example/web:2" || n != 3 {
		t.Fatalf("after the commit: %+v web %s preview %s x%d; want a full-size preview with no traffic", st, web, img, n)
	}
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if st, _, _, _ = previewState(t, b); st.StepStarted.IsZero() || st.Weight != 0 {
		t.Fatalf("preview ready: %+v, want its pause started with no traffic", st)
	}
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	if st, web, _, _ = previewState(t, b); st.Phase != rollout.Switched || st.Weight != 100 || web != "example/web:1" {
		t.Fatalf("after the preview pause: %+v web %s, want all traffic switched, web untouched", st, web)
	}
	if r, _ := c.RolloutRoutes(); len(r) != 1 || r[0].Weights != (rollout.Weights{Canary: 100}) || r[0].Colour != "shop_web-preview" {
		t.Fatalf("routes after the switch: %+v", r)
	}
	reconcileOK(t, c)
	if st, web, _, _ = previewState(t, b); st.Phase != rollout.Promoting || web != "example/web:2" {
		t.Fatalf("after a window of 0: %+v web %s, want Promoting with web:2", st, web)
	}
	reconcileOK(t, c)
	// Traffic is back on web; the preview keeps its tasks until the
	// router has polled that (scaleDownDelay, 30s by default).
	if st, web, _, n = previewState(t, b); st.Phase != rollout.Completed || n != 3 || web != "example/web:2" || !st.ScaleDownAt.Equal(clk.Now().Add(rollout.DefaultScaleDownDelay)) {
		t.Fatalf("after promote: %+v web %s preview x%d, want the preview's 3 tasks kept for the delay", st, web, n)
	}
	if r, _ := c.RolloutRoutes(); len(r) != 1 || r[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("routes after the release: %+v", r)
	}
	clk.add(rollout.DefaultScaleDownDelay)
	reconcileOK(t, c)
	if st, _, _, n = previewState(t, b); st.Phase != rollout.Completed || n != 0 || !st.ScaleDownAt.IsZero() {
		t.Fatalf("after the scale-down delay: %+v preview x%d, want it at zero", st, n)
	}
}

// blueGreenSwitched deploys blueGreenCompose("1"), commits "2", and runs
// the passes that preview it and switch all traffic to the preview (a
// rollback window of 0: the next pass promotes).
func blueGreenSwitched(t *testing.T) (*chartstest.MinimalBackend, *fakeFetcher, *Controller, *testClock) {
	t.Helper()
	b, f, c, clk := canaryOnMinimal(t)
	f.commit(t, map[string]string{"docker-compose.yml": blueGreenCompose("1")})
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": blueGreenCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	return b, f, c, clk
}

// A commit that supersedes a switched blue/green release through a router
// takes all traffic back to stable at once, but the preview keeps running
// the replaced revision, at full size, until the router has polled that:
// re-specifying it in the same pass would hand the router's in-flight
// requests to stopping tasks or to the new, unverified revision. Only then
// does the new revision take the preview, from the start.
func TestASupersededColourDrainsOnItsOwnRevisionBeforeTheNewOneStarts(t *testing.T) {
	b, f, c, clk := blueGreenSwitched(t)
	if st, _, _, _ := previewState(t, b); st.Phase != rollout.Switched || st.Weight != 100 {
		t.Fatalf("before the new commit: %+v, want all traffic switched to the preview", st)
	}

	f.commit(t, map[string]string{"docker-compose.yml": blueGreenCompose("3")})
	reconcileOK(t, c)
	st, web, img, n := previewState(t, b)
	if st.Phase != rollout.Superseded || st.Weight != 0 || web != "example/web:1" || img != "example/web:2" || n != 3 ||
		!st.ScaleDownAt.Equal(clk.Now().Add(rollout.DefaultScaleDownDelay)) {
		t.Fatalf("superseded: %+v web %s preview %s x%d; want traffic on stable web:1 and the preview still web:2 x3 until the scale-down", st, web, img, n)
	}
	if r, _ := c.RolloutRoutes(); len(r) != 1 || r[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("routes after the supersede: %+v, want all on stable", r)
	}
	clk.add(10 * time.Second)
	reconcileOK(t, c)
	if st, _, img, n = previewState(t, b); st.Phase != rollout.Superseded || img != "example/web:2" || n != 3 {
		t.Fatalf("during the drain: %+v preview %s x%d, want web:2 x3 kept", st, img, n)
	}

	clk.add(rollout.DefaultScaleDownDelay)
	reconcileOK(t, c)
	st, web, img, n = previewState(t, b)
	if st.Phase != rollout.Previewing || st.Weight != 0 || !st.StepStarted.IsZero() || web != "example/web:1" || img != "example/web:3" || n != 3 {
		t.Fatalf("after the drain: %+v web %s preview %s x%d; want the new revision previewing with no traffic", st, web, img, n)
	}
	if r, _ := c.RolloutRoutes(); len(r) != 1 || r[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("routes when the new revision starts: %+v, want all on stable", r)
	}
}

// A commit that lands while a completed release's preview still drains
// waits for the drain, and never reaches the stable service directly: the
// stable keeps the release it just got, and the new revision starts as a
// preview of its own once the old one has stopped.
func TestACommitDuringACompletedColoursDrainWaitsAndLeavesTheStableAlone(t *testing.T) {
	b, f, c, clk := blueGreenSwitched(t)
	reconcileOK(t, c) // promoting
	reconcileOK(t, c) // completed, draining
	if st, web, _, n := previewState(t, b); st.Phase != rollout.Completed || st.ScaleDownAt.IsZero() || web != "example/web:2" || n != 3 {
		t.Fatalf("before the commit: %+v web %s preview x%d, want a completed release draining", st, web, n)
	}

	f.commit(t, map[string]string{"docker-compose.yml": blueGreenCompose("3")})
	reconcileOK(t, c)
	if st, web, img, n := previewState(t, b); st.Phase != rollout.Completed || web != "example/web:2" || img != "example/web:2" || n != 3 {
		t.Fatalf("a commit during the drain: %+v web %s preview %s x%d; want web:2 on stable and the preview draining web:2", st, web, img, n)
	}
	clk.add(rollout.DefaultScaleDownDelay)
	reconcileOK(t, c)
	if st, web, img, n := previewState(t, b); st.Phase != rollout.Previewing || web != "example/web:2" || img != "example/web:3" || n != 3 {
		t.Fatalf("after the drain: %+v web %s preview %s x%d; want v3 previewing beside web:2", st, web, img, n)
	}
}

// TestTheLoopRunsARolloutAtItsNextCheckNotAtTheInterval runs the loop on the
// real clock with an interval of an hour: only the rollout's own next
// checks (readiness polls, one-second pauses) can carry it to the end.
func TestTheLoopRunsARolloutAtItsNextCheckNotAtTheInterval(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	quick := strings.ReplaceAll(canaryCompose("1"), "pause: 1m", "pause: 1s")
	f.commit(t, map[string]string{"docker-compose.yml": quick})
	app := testApp("shop", true)
	app.SyncPolicy.Interval.Duration = time.Hour
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Tick: 100 * time.Millisecond}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": strings.ReplaceAll(quick, "web:1", "web:2")})
	reconcileOK(t, c)
	runLoop(t, c)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, web, _, _ := rolloutState(t, b)
		if st.Phase == rollout.Completed && web == "example/web:2" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop left the rollout at %+v (web %s)", st, web)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRoutesFollowWhatRunsNotWhatAFailedPassDecided(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	if _, complete := c.RolloutRoutes(); complete {
		t.Fatal("routes complete before any pass")
	}
	reconcileOK(t, c)
	if r, complete := c.RolloutRoutes(); !complete || len(r) != 1 || r[0].Colour != "" || r[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("after the first deploy: %+v %v, want all on stable", r, complete)
	}
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	want := rollout.Weights{Stable: 75, Canary: 25}
	if r, _ := c.RolloutRoutes(); r[0].Weights != want {
		t.Fatalf("at step 0: %+v", r)
	}

	// An abort whose deploy fails changed nothing on the swarm: the
	// router keeps serving what runs.
	b.FailDeploy = errors.New("daemon unreachable")
	if err := c.RolloutCommand("shop", "web", rollout.CommandAbort); err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err == nil {
		t.Fatal("the pass did not fail")
	}
	if r, _ := c.RolloutRoutes(); r[0].Weights != want {
		t.Fatalf("after a failed abort: %+v, want %+v", r[0].Weights, want)
	}
	// The abort was not deployed: the next pass takes it again.
	b.FailDeploy = nil
	reconcileOK(t, c)
	if r, _ := c.RolloutRoutes(); r[0].Weights != (rollout.Weights{Stable: 100}) {
		t.Fatalf("after the abort: %+v", r[0].Weights)
	}
}

func TestForgottenRoutesStayIncompleteUntilTheNextPass(t *testing.T) {
	_, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	want := rollout.Weights{Stable: 75, Canary: 25}
	if r, complete := c.RolloutRoutes(); !complete || len(r) != 1 || r[0].Weights != want {
		t.Fatalf("at step 0: %+v %v", r, complete)
	}

	c.ForgetRoutes()
	if r, complete := c.RolloutRoutes(); complete || len(r) != 0 {
		t.Fatalf("after ForgetRoutes: %+v %v, want nothing and incomplete", r, complete)
	}
	// The next pass works them out again from what the swarm records.
	reconcileOK(t, c)
	if r, complete := c.RolloutRoutes(); !complete || len(r) != 1 || r[0].Weights != want {
		t.Fatalf("after the next pass: %+v %v, want %+v", r, complete, want)
	}
}

func TestForgottenRolloutCommandsAreNeitherPendingNorDeployed(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if err := c.RolloutCommand("shop", "web", rollout.CommandAbort); err != nil {
		t.Fatal(err)
	}

	if n := c.ForgetRolloutCommands(); n != 1 {
		t.Fatalf("ForgetRolloutCommands dropped %d commands, want 1", n)
	}
	if st, _ := c.Status("shop"); len(st.Rollouts) != 1 || st.Rollouts[0].Pending != "" {
		t.Fatalf("status rollouts %+v, want nothing pending", st.Rollouts)
	}
	reconcileOK(t, c)
	if st, _, _, _ := rolloutState(t, b); st.Phase != rollout.Progressing || st.Weight != 25 {
		t.Fatalf("after a pass, state %+v: the forgotten abort was deployed", st)
	}
}

// A pass whose deploy fails changed nothing on the swarm, and its status
// must say so: a decided abort shown as done would let the operator, or
// `--wait`, take the command for deployed once a leader change forgets it.
func TestAFailedPassShowsTheRolloutThatRunsNotTheOneItDecided(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)

	b.FailDeploy = errors.New("daemon unreachable")
	if err := c.RolloutCommand("shop", "web", rollout.CommandAbort); err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err == nil {
		t.Fatal("the pass did not fail")
	}
	st, _ := c.Status("shop")
	if r := st.Rollouts; len(r) != 1 || r[0].Phase != "Progressing" || r[0].Weight != 25 || r[0].Pending != "abort" ||
		!strings.HasPrefix(r[0].Reason, "not deployed yet: aborted by an operator") {
		t.Fatalf("after the failed abort: %+v, want the running step 0 at 25%% with the abort pending", r)
	}
	c.ForgetRolloutCommands()
	if st, _ := c.Status("shop"); st.Rollouts[0].Phase != "Progressing" || st.Rollouts[0].Pending != "" {
		t.Fatalf("the forgotten abort: %+v, want Progressing with nothing pending", st.Rollouts[0])
	}
	b.FailDeploy = nil
	reconcileOK(t, c)
	if st, _ := c.Status("shop"); st.Rollouts[0].Phase != "Progressing" || st.Rollouts[0].Weight != 25 {
		t.Fatalf("after the next pass: %+v", st.Rollouts[0])
	}
}
