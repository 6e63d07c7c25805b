package reconcile

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/window"
)

// fixedClock is a clock the test moves by hand.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fixedClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixedClock) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.mu.Unlock()
}

func TestADependentWaitsUntilItsDependencyIsSyncedAndHealthy(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	platform := testApp("platform", true)
	api := testApp("api", true)
	api.DependsOn = []string{"platform"}
	c := newTestController(t, b, f, platform, api)

	res := mustReconcile(t, c, "api")
	if res.Err != nil || res.Deployed != nil {
		t.Fatalf("api deployed before platform ran: %+v", res)
	}
	if w := res.Status.Waiting; !strings.Contains(w, "waiting for platform") || !strings.Contains(w, "Unknown") {
		t.Fatalf("status does not say what api waits for: %q", w)
	}
	if got := b.StackServices(context.Background(), "api"); len(got) != 0 {
		t.Fatalf("api's stack has %d services while it waits", len(got))
	}

	if res := mustReconcile(t, c, "platform"); res.Err != nil || res.Status.Health != application.Healthy {
		t.Fatalf("platform: %+v", res)
	}
	// Health read by the pass that deployed is not settled yet: a task can
	// be caught running in the moment before it fails.
	res = mustReconcile(t, c, "api")
	if res.Deployed != nil || !strings.Contains(res.Status.Waiting, "platform (just deployed") {
		t.Fatalf("api went ahead on the health of platform's deploying pass: %+v", res)
	}
	mustReconcile(t, c, "platform")
	res = mustReconcile(t, c, "api")
	if res.Err != nil || res.Deployed == nil || res.Status.Waiting != "" {
		t.Fatalf("api did not sync once platform was Healthy: %+v", res)
	}
}

func TestAnExplicitSyncOfADependentIsRefusedWhileItsDependencyIsNotReady(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	api := testApp("api", false)
	api.DependsOn = []string{"db"}
	c := newTestController(t, b, f, testApp("db", false), api)

	res, err := c.SyncNow(context.Background(), "api", "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "waiting for db") || res.Deployed != nil {
		t.Fatalf("explicit sync of api went ahead or did not say why not: %+v", res)
	}
}

func TestADenyWindowHoldsAnAutomatedSyncUntilItEndsAndSaysUntilWhen(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	clock := &fixedClock{now: time.Date(2026, 12, 5, 12, 0, 30, 0, time.UTC)}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clock.Now}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := window.Compile([]window.Window{{Kind: window.Deny, Schedule: "0 12 * * *", Duration: time.Minute, Applications: []string{"sh*"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetSyncWindows(ws)

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Deployed != nil || b.Writes() != 0 {
		t.Fatalf("synced inside a deny window: %+v", res)
	}
	if w := res.Status.Waiting; !strings.Contains(w, "sync window") || !strings.Contains(w, "2026-12-05T12:01:00Z") {
		t.Fatalf("status does not say the window holds it and until when: %q", w)
	}
	if res.Status.Sync != application.OutOfSync {
		t.Fatalf("sync %s while held, want OutOfSync", res.Status.Sync)
	}

	clock.Set(time.Date(2026, 12, 5, 12, 1, 0, 0, time.UTC))
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Deployed == nil || res.Status.Waiting != "" {
		t.Fatalf("not synced once the window ended: %+v", res)
	}
}

func TestAnExplicitSyncPassesADenyWindowOnlyWhenItAllowsManualSyncs(t *testing.T) {
	for _, manual := range []bool{false, true} {
		b := chartstest.NewMinimal()
		f := newFakeFetcher()
		f.commit(t, repoFiles(composeV1))
		clock := &fixedClock{now: time.Date(2026, 12, 5, 12, 0, 30, 0, time.UTC)}
		c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clock.Now}, []application.Application{testApp("shop", true)})
		if err != nil {
			t.Fatal(err)
		}
		ws, _ := window.Compile([]window.Window{{Kind: window.Deny, Schedule: "0 12 * * *", Duration: time.Hour, Applications: []string{"shop"}, ManualSync: manual}})
		c.SetSyncWindows(ws)
		res, err := c.SyncNow(context.Background(), "shop", "test")
		if err != nil {
			t.Fatal(err)
		}
		if synced := res.Err == nil && res.Deployed != nil; synced != manual {
			t.Fatalf("manualSync %v: explicit sync result %+v", manual, res)
		}
	}
}

func TestSelfHealWaitsForADenyWindowToEnd(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	clock := &fixedClock{now: time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)}
	app := testApp("shop", true)
	app.SyncPolicy.Automated.SelfHeal = true
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clock.Now}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, c, "shop")
	p := &pass{app: app, action: "unchanged", missing: []string{"shop_web"}}
	ws, _ := window.Compile([]window.Window{{Kind: window.Deny, Schedule: "0 12 * * *", Duration: time.Hour, Applications: []string{"shop"}}})
	c.SetSyncWindows(ws)
	clock.Set(time.Date(2026, 12, 5, 12, 30, 0, 0, time.UTC))
	if err := c.hold(p); err == nil || !strings.Contains(p.status.Waiting, "deny") {
		t.Fatalf("healing drift was not held by the window: %v %q", err, p.status.Waiting)
	}
	p.missing = nil
	if err := c.hold(p); err != nil || p.status.Waiting != "" {
		t.Fatalf("a pass with nothing to write was held: %v %q", err, p.status.Waiting)
	}
}
