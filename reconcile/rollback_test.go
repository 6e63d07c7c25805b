package reconcile

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

// stoppedBackend is an orderBackend on which a test can say that Swarm
// stopped a service's update at a given time, as the daemon reports it:
// UpdateStatus paused and the object's UpdatedAt at that moment.
type stoppedBackend struct {
	*orderBackend
	mu     sync.Mutex
	paused map[string]time.Time
}

func (b *stoppedBackend) Unwrap() charts.Backend { return b.orderBackend }

func (b *stoppedBackend) StackServices(ctx context.Context, stack string) []charts.ServiceState {
	states := b.orderBackend.StackServices(ctx, stack)
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range states {
		if at, ok := b.paused[s.Name]; ok {
			states[i].UpdateState, states[i].UpdatedAt = "paused", at
			states[i].UpdateMessage = "update paused due to failure or early termination of task x"
		}
	}
	return states
}

func (b *stoppedBackend) pause(service string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused[service] = at
}

// degradedScenario is "shop" at revision 1, Healthy, with a test clock;
// deployBad commits and syncs revision 2 at the clock's time.
type degradedScenario struct {
	t       *testing.T
	b       *stoppedBackend
	f       *fakeFetcher
	app     application.Application
	mu      sync.Mutex
	now     time.Time
	started time.Time
}

func newDegradedScenario(t *testing.T, onDegraded time.Duration) *degradedScenario {
	s := &degradedScenario{t: t, b: &stoppedBackend{orderBackend: newOrderBackend(), paused: map[string]time.Time{}},
		f: newFakeFetcher(), now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s.f.commit(t, map[string]string{"docker-compose.yml": composeWaves})
	s.app = testApp("shop", true)
	s.app.SyncPolicy.Rollback = &application.Rollback{OnDegraded: application.Duration{Duration: onDegraded}}
	if res := mustReconcile(t, s.controller(), "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("revision 1: %v, %d", res.Err, res.Revision)
	}
	return s
}

func (s *degradedScenario) clock() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.now }

// at sets the clock to d after revision 2 was deployed.
func (s *degradedScenario) at(d time.Duration) { s.mu.Lock(); s.now = s.started.Add(d); s.mu.Unlock() }

// controller is a freshly started controller: no memory of earlier passes.
func (s *degradedScenario) controller() *Controller {
	c, err := New(Options{ControllerID: "ctl", Backend: s.b, Fetcher: s.f, Logger: quiet, Clock: s.clock}, []application.Application{s.app})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *degradedScenario) deployBad(c *Controller) {
	s.f.commit(s.t, map[string]string{"docker-compose.yml": strings.Replace(composeWaves, "example/web:1", "example/web:2", 1)})
	s.mu.Lock()
	s.now = s.now.Add(time.Minute)
	s.started = s.now
	s.mu.Unlock()
	if res := mustReconcile(s.t, c, "shop"); res.Err != nil || res.Revision != 2 {
		s.t.Fatalf("revision 2: %v, %d", res.Err, res.Revision)
	}
}

// rolledBack runs a pass of c at d after the deploy and reports whether
// an automatic rollback is queued.
func (s *degradedScenario) rolledBack(c *Controller, d time.Duration) bool {
	s.at(d)
	res := mustReconcile(s.t, c, "shop")
	if res.Status.Health != application.Degraded {
		s.t.Fatalf("at +%s health is %s, want Degraded", d, res.Status.Health)
	}
	for _, q := range pendingOf(c, "shop") {
		if q.Rollback == 1 && strings.Contains(q.By, "automatically") {
			return true
		}
	}
	return false
}

func TestARestartedControllerRollsBackAtTheDeadlineTheSwarmRecordsNotAFullPeriodLater(t *testing.T) {
	s := newDegradedScenario(t, time.Minute)
	c := s.controller()
	s.deployBad(c)
	// Swarm stops web's update five seconds after the deploy.
	s.b.pause("web", s.started.Add(5*time.Second))
	s.b.fail("web", true)
	for _, d := range []time.Duration{10 * time.Second, 40 * time.Second} {
		if s.rolledBack(c, d) {
			t.Fatalf("rolled back at +%s of a 1m onDegraded", d)
		}
	}
	// The controller is restarted: its memory of the Degraded clock is gone.
	c2 := s.controller()
	if s.rolledBack(c2, 50*time.Second) {
		t.Fatal("the restarted controller rolled back at +50s, before the deadline of +65s")
	}
	if s.rolledBack(c2, 64*time.Second) {
		t.Fatal("rolled back at +64s, before a minute had passed since Swarm stopped the update at +5s")
	}
	if !s.rolledBack(c2, 66*time.Second) {
		t.Fatal("the restarted controller did not roll back at +66s; it counts the minute from its own start")
	}
}

func TestARestartedControllerCountsFromItsOwnFirstLookWhenTheSwarmProvesNothing(t *testing.T) {
	s := newDegradedScenario(t, time.Minute)
	c := s.controller()
	s.deployBad(c)
	// Revision 2 runs Healthy for ten minutes; then web's tasks start
	// failing, with no update of Swarm's to say since when.
	s.at(10 * time.Minute)
	if res := mustReconcile(t, c, "shop"); res.Status.Health != application.Healthy {
		t.Fatalf("health %s, want Healthy", res.Status.Health)
	}
	s.b.fail("web", true)
	c2 := s.controller()
	for _, d := range []time.Duration{10*time.Minute + time.Second, 10*time.Minute + 59*time.Second} {
		if s.rolledBack(c2, d) {
			t.Fatalf("rolled back at +%s: a restart made an application Healthy a moment ago count as Degraded since the deploy", d)
		}
	}
	if !s.rolledBack(c2, 10*time.Minute+62*time.Second) {
		t.Fatal("no rollback a minute after the restarted controller first found it Degraded")
	}
}

func TestSwarmDegradedSince(t *testing.T) {
	rec := &charts.Release{Revision: 2, Time: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	at := func(s int) time.Time { return rec.Time.Add(time.Duration(s) * time.Second) }
	degraded := []application.ServiceStatus{{Name: "api", Health: application.Degraded}, {Name: "web", Health: application.Degraded}, {Name: "db", Health: application.Healthy}}
	cases := []struct {
		name   string
		states []charts.ServiceState
		want   time.Time
		ok     bool
	}{
		{"tasks failing prove nothing", []charts.ServiceState{{Name: "api", UpdateState: "completed", UpdatedAt: at(-60)}}, time.Time{}, false},
		{"an update still running proves nothing", []charts.ServiceState{{Name: "api", UpdateState: "updating", UpdatedAt: at(1)}}, time.Time{}, false},
		{"a paused update since Swarm paused it", []charts.ServiceState{{Name: "api", UpdateState: "paused", UpdatedAt: at(7)}}, at(7), true},
		{"the earliest of two stopped updates", []charts.ServiceState{{Name: "api", UpdateState: "paused", UpdatedAt: at(30)}, {Name: "web", UpdateState: "rollback_completed", UpdatedAt: at(9)}}, at(9), true},
		{"never before the record", []charts.ServiceState{{Name: "web", UpdateState: "paused", UpdatedAt: at(-300)}}, rec.Time, true},
		{"a service not judged Degraded", []charts.ServiceState{{Name: "db", UpdateState: "paused", UpdatedAt: at(3)}}, time.Time{}, false},
		{"no time from the backend", []charts.ServiceState{{Name: "api", UpdateState: "paused"}}, time.Time{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := swarmDegradedSince(rec, tc.states, degraded)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("= %s, %v; want %s, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
