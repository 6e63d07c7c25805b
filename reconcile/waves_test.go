package reconcile

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/compose"
)

// orderBackend is a MinimalBackend that logs every deploy (by the services
// its manifest declares) and every read, in order, and lets a test make a
// service look failed.
type orderBackend struct {
	*chartstest.MinimalBackend
	mu     sync.Mutex
	log    []string
	failed map[string]bool // unscoped service → its task failed
}

func newOrderBackend() *orderBackend {
	return &orderBackend{MinimalBackend: chartstest.NewMinimal(), failed: map[string]bool{}}
}

func (b *orderBackend) Unwrap() charts.Backend { return b.MinimalBackend }

func (b *orderBackend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	names, err := compose.ServiceNames(req.Manifest)
	if err != nil {
		return charts.DeployResult{}, err
	}
	res, err := b.MinimalBackend.DeployStack(ctx, req)
	b.mu.Lock()
	b.log = append(b.log, "deploy "+strings.Join(names, ","))
	for _, h := range req.Heal {
		delete(b.failed, strings.TrimPrefix(h, req.Stack+"_")) // a rewritten job runs again
	}
	b.mu.Unlock()
	return res, err
}

func (b *orderBackend) StackServices(ctx context.Context, stack string) []charts.ServiceState {
	states := b.MinimalBackend.StackServices(ctx, stack)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, "read")
	for i, s := range states {
		if !b.failed[s.Name] {
			continue
		}
		states[i].Running, states[i].Completed = 0, 0
		states[i].Tasks = []charts.TaskState{{ID: s.Name + ".1", Slot: 1, State: "failed", DesiredState: "running",
			Err: "task: non-zero exit (1)", Timestamp: time.Now()}}
	}
	return states
}

func (b *orderBackend) fail(service string, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failed[service] = failed
}

// deploys returns the logged deploys, reads left out.
func (b *orderBackend) deploys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.log {
		if strings.HasPrefix(l, "deploy ") {
			out = append(out, strings.TrimPrefix(l, "deploy "))
		}
	}
	return out
}

func (b *orderBackend) resetLog() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = nil
}

const composeWaves = `version: "3.8"
services:
  db:
    image: example/db:1
    x-flotilla: {wave: 0}
  api:
    image: example/api:1
    x-flotilla: {wave: 1}
  web:
    image: example/web:1
    x-flotilla: {wave: 2}
`

const composeHooks = `version: "3.8"
services:
  migrate:
    image: example/api:1
    command: ["migrate"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync}
  api:
    image: example/api:1
  notify:
    image: example/api:1
    command: ["notify"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PostSync, deletePolicy: HookSucceeded}
`

func orderedApp(t *testing.T, compose string) (*orderBackend, *fakeFetcher, *Controller) {
	t.Helper()
	b := newOrderBackend()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": compose})
	app := testApp("shop", true)
	app.SyncPolicy.Wait = &application.Wait{Timeout: application.Duration{Duration: 2 * time.Second}}
	return b, f, newTestController(t, b, f, app)
}

func TestWavesAreDeployedLowestFirstEachAfterTheOneBeforeIsHealthy(t *testing.T) {
	b, _, c := orderedApp(t, composeWaves)
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"db", "api", "web"}) {
		t.Fatalf("deploys %v, want db, api, web in that order", got)
	}
	// Each wave after the first was written only after a read that
	// found the one before Healthy.
	b.mu.Lock()
	log := slices.Clone(b.log)
	b.mu.Unlock()
	for _, w := range []string{"deploy api", "deploy web"} {
		i := slices.Index(log, w)
		if i < 1 || log[i-1] != "read" {
			t.Errorf("%q was not preceded by a read of the stack: %v", w, log)
		}
	}
	if res.Revision != 1 || res.Status.Sync != application.Synced {
		t.Errorf("revision %d, sync %s: want revision 1 Synced", res.Revision, res.Status.Sync)
	}
}

func TestAWaveThatIsNotHealthyStopsTheSyncBeforeTheNextOne(t *testing.T) {
	b, _, c := orderedApp(t, composeWaves)
	b.fail("db", true)
	res := mustReconcile(t, c, "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "wave 0, service db") || !strings.Contains(res.Err.Error(), "wave(s) 1, 2 not written") {
		t.Fatalf("pass error %v, want it to name wave 0, service db and the waves not written", res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"db"}) {
		t.Errorf("deploys %v, want only wave 0", got)
	}
	if rs, _ := b.Releases(context.Background(), "shop"); len(rs) != 0 {
		t.Errorf("a revision was recorded for a sync that stopped: %+v", rs)
	}
	if res.Status.Health != application.Degraded {
		t.Errorf("health %s, want the failed wave's Degraded", res.Status.Health)
	}

	// Once db recovers, the next pass writes nothing for wave 0 and goes on.
	b.fail("db", false)
	b.resetLog()
	res = mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"db", "api", "web"}) {
		t.Errorf("deploys %v", got)
	}
	if res.Deployed == nil || slices.Contains(res.Deployed.Created, "db") || res.Deployed.Writes != 2 {
		t.Errorf("deploy %+v, want api and web created and db left alone", res.Deployed)
	}
}

func TestAnUnchangedHealthyWaveCostsNoWriteAndNoWait(t *testing.T) {
	b, f, c := orderedApp(t, composeWaves)
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	f.commit(t, map[string]string{"docker-compose.yml": strings.Replace(composeWaves, "example/web:1", "example/web:2", 1)})
	b.resetLog()
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Deployed == nil || res.Deployed.Writes != 1 || !slices.Equal(res.Deployed.Updated, []string{"web"}) {
		t.Fatalf("deploy %+v, want only web updated", res.Deployed)
	}
	b.mu.Lock()
	log := strings.Join(b.log, "; ")
	b.mu.Unlock()
	if !strings.Contains(log, "deploy db; deploy api; deploy web") {
		t.Errorf("unchanged Healthy waves were waited for: %s", log)
	}
}

func TestAPreSyncHookRunsBeforeAnyServiceAndOncePerRevision(t *testing.T) {
	b, f, c := orderedApp(t, composeHooks)
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"migrate", "api", "notify"}) {
		t.Fatalf("deploys %v, want the PreSync hook, the services, then the PostSync hook", got)
	}
	for _, s := range res.Status.Services {
		if s.Name == "migrate" || s.Name == "notify" {
			t.Errorf("hook %s is judged as a service of the stack", s.Name)
		}
	}
	// An unchanged pass, and a restarted controller, run no hook again.
	b.resetLog()
	if res := mustReconcile(t, c, "shop"); res.Err != nil || len(b.deploys()) != 0 {
		t.Fatalf("unchanged pass: %v, deploys %v", res.Err, b.deploys())
	}
	c2 := newTestController(t, b, f, c.Applications()[0])
	if res := mustReconcile(t, c2, "shop"); res.Err != nil || len(b.deploys()) != 0 {
		t.Fatalf("restarted controller: %v, deploys %v", res.Err, b.deploys())
	}
	if res.Status.Sync != application.Synced || len(res.Status.Drift) != 0 {
		t.Errorf("sync %s, drift %v: a hook counted as drift", res.Status.Sync, res.Status.Drift)
	}
}

func TestAHookThatSucceededIsNotRunAgainWhenItsSyncIsRetried(t *testing.T) {
	withWave := strings.Replace(composeHooks, "  api:\n    image: example/api:1\n", "  api:\n    image: example/api:1\n    x-flotilla: {wave: 1}\n  db:\n    image: example/db:1\n", 1)
	b, _, c := orderedApp(t, withWave)
	b.fail("db", true)
	if res := mustReconcile(t, c, "shop"); res.Err == nil || !strings.Contains(res.Err.Error(), "wave 0, service db") {
		t.Fatalf("pass error %v, want wave 0 to fail", res.Err)
	}
	b.fail("db", false)
	b.resetLog()
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := b.deploys(); slices.Contains(got, "migrate") {
		t.Errorf("deploys %v: the PreSync hook that succeeded ran again", got)
	}
}

func TestAFailedPreSyncHookLeavesTheServicesUntouchedAndSaysWhy(t *testing.T) {
	b, _, c := orderedApp(t, composeHooks)
	b.fail("migrate", true)
	res := mustReconcile(t, c, "shop")
	if res.Err == nil {
		t.Fatal("the sync succeeded with a failed PreSync hook")
	}
	msg := res.Err.Error()
	for _, want := range []string{"PreSync hook migrate failed", "non-zero exit (1)", "backend lacks ServiceLogs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if got := b.deploys(); !slices.Equal(got, []string{"migrate"}) {
		t.Errorf("deploys %v, want only the hook", got)
	}
	if !strings.Contains(res.Status.LastError, "PreSync hook migrate failed") {
		t.Errorf("status error %q", res.Status.LastError)
	}
	if !slices.Contains(res.Status.Unavailable, "hook logs unavailable: backend lacks ServiceLogs") {
		t.Errorf("status does not list the lost hook logs: %v", res.Status.Unavailable)
	}
	// The same revision fails again without running the hook again.
	b.resetLog()
	if res := mustReconcile(t, c, "shop"); res.Err == nil || len(b.deploys()) != 0 {
		t.Errorf("retry: %v, deploys %v", res.Err, b.deploys())
	}
	// An explicit sync runs it anew, and this time it succeeds.
	b.resetLog()
	res, err := c.SyncNow(context.Background(), "shop", "alice")
	if err != nil || res.Err != nil {
		t.Fatalf("explicit sync: %v %v", err, res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"migrate", "api", "notify"}) {
		t.Errorf("explicit sync deploys %v, want the hook run again, then the services", got)
	}
}

func TestASyncThatFailedRunsItsSyncFailHook(t *testing.T) {
	withFail := composeWaves + `  cleanup:
    image: example/db:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: SyncFail}
`
	b, _, c := orderedApp(t, withFail)
	b.fail("api", true)
	res := mustReconcile(t, c, "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "wave 1, service api") {
		t.Fatalf("pass error %v", res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"db", "api", "cleanup"}) {
		t.Errorf("deploys %v, want the SyncFail hook after the failed wave and no wave 2", got)
	}
}

func TestADegradedSyncIsRolledBackAndPinned(t *testing.T) {
	b := newOrderBackend()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": composeWaves})
	app := testApp("shop", true)
	app.SyncPolicy.Rollback = &application.Rollback{OnDegraded: application.Duration{Duration: time.Minute}}
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clock}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	commit2 := f.commit(t, map[string]string{"docker-compose.yml": strings.Replace(composeWaves, "example/web:1", "example/web:2", 1)})
	b.fail("web", true)
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("revision 2: %v, %d", res.Err, res.Revision)
	}
	advance(30 * time.Second)
	mustReconcile(t, c, "shop")
	if q := pendingOf(c, "shop"); len(q) != 0 {
		t.Fatalf("rolled back after 30s of a 1m onDegraded: %+v", q)
	}
	advance(31 * time.Second)
	mustReconcile(t, c, "shop")
	q := pendingOf(c, "shop")
	if len(q) != 1 || q[0].Rollback != 1 || !strings.Contains(q[0].By, "automatically") {
		t.Fatalf("queued %+v, want one automatic rollback to revision 1", q)
	}
	b.fail("web", false)
	res := c.pass(context.Background(), app, &q[0], nil)
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback pass: %v, revision %d", res.Err, res.Revision)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].PinnedCommit != commit2 || !strings.Contains(rs[0].Trigger, "automatically: Degraded for 1m0s after revision 2") {
		t.Errorf("record %+v, want a pin on commit 2 naming the automatic rollback", rs[0])
	}
	if !strings.Contains(res.Status.Pinned, "automatically") {
		t.Errorf("status pinned %q does not say it was automatic", res.Status.Pinned)
	}
	// Pinned: the next automated pass stays on revision 1's manifest, and a
	// rollback is never rolled back.
	advance(2 * time.Minute)
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Deployed != nil || res.Status.Pinned == "" {
		t.Errorf("pass after the rollback: %v, deployed %+v, pinned %q", res.Err, res.Deployed, res.Status.Pinned)
	}
}

func pendingOf(c *Controller, name string) []SyncRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SyncRequest
	for _, q := range c.apps[name].pending {
		out = append(out, q.req)
	}
	return out
}
