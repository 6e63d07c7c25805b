package reconcile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/compose"
)

// liveDriftFake is a MinimalBackend that also answers LiveDrift from a live
// map the test controls. Each write puts the written spec in the map, passed
// through drop first: what a daemon that does not keep some field does.
type liveDriftFake struct {
	*chartstest.MinimalBackend
	mu   sync.Mutex
	live map[string]swarm.Service
	drop func(*swarm.ServiceSpec)
	// liveErr, when set, is what LiveServices answers: a daemon that
	// stopped answering after the batch's read.
	liveErr error
}

var _ capability.LiveDrift = (*liveDriftFake)(nil)

func newLiveDriftFake() *liveDriftFake {
	return &liveDriftFake{MinimalBackend: chartstest.NewMinimal(), live: map[string]swarm.Service{}}
}

func (f *liveDriftFake) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	res, err := f.MinimalBackend.DeployStack(ctx, req)
	if err != nil {
		return res, err
	}
	st, err := compose.Convert(ctx, req.Manifest, req.Stack, nil)
	if err != nil {
		return res, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, short := range slices.Concat(res.Created, res.Updated) {
		spec := st.Services[req.Stack+"_"+short]
		if f.drop != nil {
			f.drop(&spec)
		}
		f.live[spec.Name] = swarm.Service{ID: spec.Name, Spec: spec}
	}
	return res, nil
}

func (f *liveDriftFake) DesiredServices(ctx context.Context, manifest, stack string) (*compose.Stack, error) {
	return compose.Convert(ctx, manifest, stack, nil)
}

func (f *liveDriftFake) LiveServices(_ context.Context, stack string) (map[string]swarm.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.liveErr != nil {
		return nil, f.liveErr
	}
	out := map[string]swarm.Service{}
	for k, v := range f.live {
		if strings.HasPrefix(k, stack+"_") {
			out[k] = v
		}
	}
	return out, nil
}

// edit changes one live service the way another writer would.
func (f *liveDriftFake) edit(scoped string, change func(*swarm.Service)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.live[scoped]
	change(&s)
	f.live[scoped] = s
}

func (f *liveDriftFake) remove(scoped string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, scoped)
}

const sixServices = `version: "3.8"
services:
  steady: {image: example/app:1, environment: {MESSAGE: one}}
  drifted: {image: example/app:1, environment: {MESSAGE: one}}
  missing: {image: example/app:1, environment: {MESSAGE: one}}
  updating: {image: example/app:1, environment: {MESSAGE: one}}
  rolledback: {image: example/app:1, environment: {MESSAGE: one}}
  stuck: {image: example/app:1, environment: {MESSAGE: one}}
`

func setEnv(v string) func(*swarm.Service) {
	return func(s *swarm.Service) {
		cs := *s.Spec.TaskTemplate.ContainerSpec
		cs.Env = []string{"MESSAGE=" + v}
		s.Spec.TaskTemplate.ContainerSpec = &cs
	}
}

func withUpdate(state swarm.UpdateState, started time.Time) func(*swarm.Service) {
	return func(s *swarm.Service) {
		s.UpdateStatus = &swarm.UpdateStatus{State: state, StartedAt: &started}
	}
}

func TestStatusAndDiffAgreeOnMissingDriftedUpdatingRolledBackAndStuckServices(t *testing.T) {
	b := newLiveDriftFake()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": sixServices})
	c := newTestController(t, b, f, testApp("six", true))
	if res := mustReconcile(t, c, "six"); res.Err != nil {
		t.Fatal(res.Err)
	}

	now := time.Now()
	b.edit("six_drifted", setEnv("foreign"))
	b.remove("six_missing")
	b.edit("six_updating", setEnv("foreign"))
	b.edit("six_updating", withUpdate(swarm.UpdateStateUpdating, now))
	b.edit("six_rolledback", setEnv("previous"))
	b.edit("six_rolledback", withUpdate(swarm.UpdateStateRollbackCompleted, now.Add(-time.Minute)))
	// A writer that keeps the service updating for ten minutes: far past
	// what its default update config allows.
	b.edit("six_stuck", setEnv("foreign"))
	b.edit("six_stuck", withUpdate(swarm.UpdateStateUpdating, now.Add(-10*time.Minute)))

	res := mustReconcile(t, c, "six")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st := res.Status
	d, err := c.Diff(context.Background(), "six")
	if err != nil {
		t.Fatal(err)
	}

	// What the status reports as drift, the diff reports as drift or
	// create, field for field.
	var fromStatus, fromDiff []string
	for _, dr := range st.Drift {
		fromStatus = append(fromStatus, dr.Service+" "+dr.Field+" "+dr.Live+"→"+dr.Desired)
	}
	changes := map[string]string{}
	for _, s := range d.Services {
		changes[s.Name] = s.Change
		switch s.Change {
		case "create":
			fromDiff = append(fromDiff, s.Name+" service (none)→present")
		case "drift":
			for _, ch := range s.Fields {
				fromDiff = append(fromDiff, s.Name+" "+ch.Field+" "+ch.Live+"→"+ch.Desired)
			}
		}
	}
	slices.Sort(fromStatus)
	slices.Sort(fromDiff)
	if !slices.Equal(fromStatus, fromDiff) {
		t.Errorf("status drift and diff disagree:\nstatus %q\ndiff   %q", fromStatus, fromDiff)
	}
	want := []string{"drifted env.MESSAGE foreign→one", "missing service (none)→present", "stuck env.MESSAGE foreign→one"}
	if !slices.Equal(fromStatus, want) {
		t.Errorf("status drift = %q, want %q", fromStatus, want)
	}

	if !slices.Equal(st.RolledBack, []string{"rolledback"}) || changes["rolledback"] != changeRolledBack {
		t.Errorf("rolled back: status %q, diff %q; want both to name rolledback", st.RolledBack, changes["rolledback"])
	}
	if changes["updating"] != changeUpdating || slices.ContainsFunc(st.Drift, func(dr application.Drift) bool { return dr.Service == "updating" }) {
		t.Errorf("updating: diff %q, status drift %q; want updating in the diff and no drift in either", changes["updating"], fromStatus)
	}
	if _, ok := changes["steady"]; ok {
		t.Errorf("steady service is in the diff as %q", changes["steady"])
	}
	notSettling := func(lines []string) bool {
		return slices.ContainsFunc(lines, func(w string) bool { return strings.Contains(w, "service stuck has been updating for") })
	}
	if !notSettling(st.Warnings) || !notSettling(d.Notes) {
		t.Errorf("not settling: status warnings %q, diff notes %q; want both to name stuck", st.Warnings, d.Notes)
	}
}

func TestAServiceWithinItsUpdateAllowanceIsNotComparedUntilItSettles(t *testing.T) {
	b := newLiveDriftFake()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": sixServices})
	clock := time.Now()
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: func() time.Time { return clock }},
		[]application.Application{testApp("six", true)})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "six"); res.Err != nil {
		t.Fatal(res.Err)
	}
	// Swarm restarts its own clock on every write of a writer that keeps
	// writing, so only the controller's memory shows how long it has moved.
	b.edit("six_updating", setEnv("foreign"))
	for i := 0; i < 4; i++ {
		b.edit("six_updating", withUpdate(swarm.UpdateStateUpdating, clock))
		res := mustReconcile(t, c, "six")
		if slices.ContainsFunc(res.Status.Drift, func(dr application.Drift) bool { return dr.Service == "updating" }) {
			t.Fatalf("after %v of motion the service was compared; its allowance is longer", time.Duration(i)*5*time.Second)
		}
		clock = clock.Add(5 * time.Second)
	}
	clock = clock.Add(30 * time.Second)
	b.edit("six_updating", withUpdate(swarm.UpdateStateUpdating, clock))
	res := mustReconcile(t, c, "six")
	if !slices.ContainsFunc(res.Status.Drift, func(dr application.Drift) bool { return dr.Service == "updating" && dr.Field == "env.MESSAGE" }) {
		t.Fatalf("after 50s of motion: drift %v warnings %q; want env.MESSAGE of updating reported", res.Status.Drift, res.Status.Warnings)
	}
}

// Version-less: the spec that knows start_interval.
const withStartInterval = `services:
  web:
    image: example/app:1
    healthcheck:
      test: ["CMD", "/app", "health"]
      interval: 30s
      start_period: 10s
      start_interval: %s
`

func TestAFieldTheDaemonDoesNotKeepIsWrittenOnceAndReported(t *testing.T) {
	b := newLiveDriftFake()
	b.drop = func(s *swarm.ServiceSpec) {
		if hc := s.TaskTemplate.ContainerSpec.Healthcheck; hc != nil {
			h := *hc
			h.StartInterval = 0
			cs := *s.TaskTemplate.ContainerSpec
			cs.Healthcheck = &h
			s.TaskTemplate.ContainerSpec = &cs
		}
	}
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": strings.Replace(withStartInterval, "%s", "2s", 1)})
	app := testApp("nk", true)
	app.SyncPolicy.Automated.SelfHeal = true
	c := newTestController(t, b, f, app)

	reported := func(st application.Status) bool {
		return slices.ContainsFunc(st.Warnings, func(w string) bool {
			return strings.Contains(w, "service web: field healthcheck not kept by the daemon")
		})
	}
	res := mustReconcile(t, c, "nk")
	if res.Err != nil || res.Deployed == nil || !slices.Equal(res.Deployed.Created, []string{"web"}) || !reported(res.Status) {
		t.Fatalf("first pass: err %v, deployed %+v, warnings %q; want web written once and the report", res.Err, res.Deployed, res.Status.Warnings)
	}
	base := b.Writes() // web and its stack's default network
	writes := func() int { return b.Writes() - base + 1 }
	for i := range 3 {
		res = mustReconcile(t, c, "nk")
		if res.Err != nil || writes() != 1 || res.Healed != nil {
			t.Fatalf("pass %d: err %v, writes %d, healed %+v; want no write", i+2, res.Err, writes(), res.Healed)
		}
		if !reported(res.Status) || len(res.Status.Drift) != 0 || res.Status.Sync != "Synced" {
			t.Fatalf("pass %d: sync %s drift %v warnings %q; want Synced with the report", i+2, res.Status.Sync, res.Status.Drift, res.Status.Warnings)
		}
	}

	// Someone else changes the same field: that is drift again, and healed.
	b.edit("nk_web", func(s *swarm.Service) {
		cs := *s.Spec.TaskTemplate.ContainerSpec
		h := *cs.Healthcheck
		h.Interval = time.Minute
		cs.Healthcheck = &h
		s.Spec.TaskTemplate.ContainerSpec = &cs
	})
	if res = mustReconcile(t, c, "nk"); res.Healed == nil || writes() != 2 {
		t.Fatalf("a foreign change to the field: healed %+v, writes %d; want it healed once", res.Healed, writes())
	}
	if res = mustReconcile(t, c, "nk"); res.Healed != nil || writes() != 2 || !reported(res.Status) {
		t.Fatalf("after the heal: healed %+v, writes %d, warnings %q; want no write and the report", res.Healed, writes(), res.Status.Warnings)
	}

	// The repository changes the value: written once more, then left.
	f.commit(t, map[string]string{"docker-compose.yml": strings.Replace(withStartInterval, "%s", "3s", 1)})
	if res = mustReconcile(t, c, "nk"); res.Err != nil || writes() != 3 || !reported(res.Status) {
		t.Fatalf("new desired value: err %v, writes %d, warnings %q; want one write and the report", res.Err, writes(), res.Status.Warnings)
	}
	if res = mustReconcile(t, c, "nk"); res.Err != nil || writes() != 3 {
		t.Fatalf("after the new value: err %v, writes %d; want no write", res.Err, writes())
	}
}

func TestSettleAllowance(t *testing.T) {
	three := uint64(3)
	grace := time.Second
	spec := func(uc *swarm.UpdateConfig) swarm.ServiceSpec {
		return swarm.ServiceSpec{
			Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &three}},
			UpdateConfig: uc,
			TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{StopGracePeriod: &grace}},
		}
	}
	for _, tc := range []struct {
		name  string
		uc    *swarm.UpdateConfig
		tasks uint64
		want  time.Duration
	}{
		// One task at a time, default monitor 5s: 3 × (5s + 2s start + 1s grace) + 5s.
		{"defaults", nil, 0, 3*8*time.Second + 5*time.Second},
		{"all at once", &swarm.UpdateConfig{Parallelism: 0, Monitor: time.Second}, 0, 4*time.Second + 5*time.Second},
		{"two at a time with a delay", &swarm.UpdateConfig{Parallelism: 2, Delay: 10 * time.Second, Monitor: time.Second}, 0, 2*14*time.Second + 5*time.Second},
		{"observed task count wins", &swarm.UpdateConfig{Parallelism: 1, Monitor: time.Second}, 5, 5*4*time.Second + 5*time.Second},
	} {
		if got := settleAllowance(spec(tc.uc), tc.tasks, false); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestALongRollbackIsNamedButNeverCompared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte("services:\n  web: {image: example/app:2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render("s", compose.Dir{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	desired, err := compose.Convert(ctx, r.Manifest, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	live := desired.Services["s_web"]
	live.TaskTemplate.ContainerSpec = &swarm.ContainerSpec{Image: "example/app:1"}
	now := time.Now()
	started := now.Add(-time.Hour)
	vs := compareServices(compareInput{
		stack: "s",
		cmp: comparison{desired: desired, live: map[string]swarm.Service{
			"s_web": {Spec: live, UpdateStatus: &swarm.UpdateStatus{State: swarm.UpdateStateRollbackStarted, StartedAt: &started}},
		}},
		now: now,
	})
	if len(vs) != 1 || vs[0].verdict != verdictUpdating || len(vs[0].changes) != 0 {
		t.Fatalf("verdict %+v; want the rollback waited for, not compared", vs)
	}
	if !strings.Contains(vs[0].notSettling, "has been rolling back for 1h0m0s") {
		t.Errorf("notSettling %q; want the long rollback named", vs[0].notSettling)
	}
}

// The batch's read of the swarm may succeed just before the daemon stops
// answering; a live comparison that then cannot read it must not leave the
// application published as Healthy from that older read.
func TestALiveComparisonThatCannotReadTheSwarmMakesHealthUnknown(t *testing.T) {
	b := newLiveDriftFake()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": sixServices})
	c := newTestController(t, b, f, testApp("six", true))
	if res := mustReconcile(t, c, "six"); res.Err != nil {
		t.Fatal(res.Err)
	}
	b.mu.Lock()
	b.liveErr = errors.New("docker daemon did not answer service.list within 1s")
	b.mu.Unlock()
	res := mustReconcile(t, c, "six")
	if res.Err == nil {
		t.Fatal("a pass whose live comparison failed succeeded")
	}
	st := res.Status
	if st.Health != application.HealthUnknown || st.Sync != application.SyncUnknown ||
		!strings.Contains(st.HealthMessage, "did not answer") || len(st.Services) != 0 {
		t.Fatalf("status %s/%s %q with %d services, want Unknown/Unknown naming the failed read and no services",
			st.Sync, st.Health, st.HealthMessage, len(st.Services))
	}
}
