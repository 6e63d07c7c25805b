package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
)

// swarmFake is one swarm of several: batchFake with a batched health read
// it counts, and a switch that makes every read and write fail as a daemon
// that cannot be reached does.
type swarmFake struct {
	*batchFake
	down       atomic.Bool
	smu        sync.Mutex
	stackReads int
}

var (
	_ capability.StacksReader  = (*swarmFake)(nil)
	_ capability.ReleaseLister = (*swarmFake)(nil)
)

var errUnreachable = errors.New("dial unix /run/eu.sock: connect: connection refused")

func newSwarmFake() *swarmFake {
	return &swarmFake{batchFake: &batchFake{liveDriftFake: newLiveDriftFake()}}
}

func (f *swarmFake) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	f.smu.Lock()
	f.stackReads++
	f.smu.Unlock()
	if f.down.Load() {
		return nil, errUnreachable
	}
	out := map[string][]charts.ServiceState{}
	for _, s := range stacks {
		out[s] = f.StackServices(ctx, s)
	}
	return out, nil
}

func (f *swarmFake) Releases(ctx context.Context, release string) ([]charts.Release, error) {
	if f.down.Load() {
		return nil, errUnreachable
	}
	return f.batchFake.Releases(ctx, release)
}

func (f *swarmFake) LiveServices(ctx context.Context, stack string) (map[string]swarm.Service, error) {
	if f.down.Load() {
		return nil, errUnreachable
	}
	return f.batchFake.LiveServices(ctx, stack)
}

func (f *swarmFake) LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error) {
	if f.down.Load() {
		return nil, errUnreachable
	}
	return f.batchFake.LiveServicesOf(ctx, stacks)
}

func (f *swarmFake) AreLatestReleases(ctx context.Context, kept []charts.Release) (map[string]bool, error) {
	if f.down.Load() {
		return nil, errUnreachable
	}
	return f.batchFake.AreLatestReleases(ctx, kept)
}

func (f *swarmFake) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	if f.down.Load() {
		return charts.DeployResult{}, errUnreachable
	}
	return f.batchFake.DeployStack(ctx, req)
}

func (f *swarmFake) ReleaseOwners(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, stack := range f.ReleaseNames() {
		if rs, _ := f.Releases(ctx, stack); len(rs) > 0 {
			out[stack] = rs[0].Owner
		}
	}
	return out, nil
}

// eventLog records what the controller publishes.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

func (l *eventLog) Publish(e events.Event) events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
	return e
}

func (f *swarmFake) reads() int {
	f.smu.Lock()
	defer f.smu.Unlock()
	n := f.stackReads
	f.stackReads = 0
	return n
}

// threeSwarms is a controller with the application "shop" on the local
// swarm and on eu (the same stack name on both), and "blog" on lab.
func threeSwarms(t *testing.T) (map[string]*swarmFake, *fakeFetcher, *Controller) {
	fakes, f, c, _ := threeSwarmsWithEvents(t)
	return fakes, f, c
}

func threeSwarmsWithEvents(t *testing.T) (map[string]*swarmFake, *fakeFetcher, *Controller, *eventLog) {
	t.Helper()
	fakes := map[string]*swarmFake{application.LocalDestination: newSwarmFake(), "eu": newSwarmFake(), "lab": newSwarmFake()}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	shopLocal := testApp("shop", true)
	shopEU := testApp("shop-eu", true)
	shopEU.Stack, shopEU.Destination = "shop", "eu"
	blog := testApp("blog", true)
	blog.Destination = "lab"
	log := &eventLog{}
	c, err := New(Options{ControllerID: "ctl", Fetcher: f, Logger: quiet, Events: log,
		Backend:  fakes[application.LocalDestination],
		Backends: map[string]charts.Backend{"eu": fakes["eu"], "lab": fakes["lab"]},
	}, []application.Application{shopLocal, shopEU, blog})
	if err != nil {
		t.Fatal(err)
	}
	return fakes, f, c, log
}

func TestEachSwarmGetsItsOwnBatchReadAndItsOwnDeploysOfOneStackName(t *testing.T) {
	fakes, _, c, log := threeSwarmsWithEvents(t)
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Install {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
	}
	log.mu.Lock()
	for _, e := range log.evs {
		if want := map[string]string{"shop": "local", "shop-eu": "eu", "blog": "lab"}[e.App]; e.Swarm != want {
			t.Errorf("event %s of %s names swarm %q, want %q", e.Type, e.App, e.Swarm, want)
		}
	}
	if len(log.evs) == 0 {
		t.Error("no events")
	}
	log.mu.Unlock()
	for name, want := range map[string]string{"shop": "local", "shop-eu": "eu", "blog": "lab"} {
		if st, _ := c.Status(name); st.Destination != want {
			t.Errorf("%s: destination %q, want %q", name, st.Destination, want)
		}
	}
	for name, f := range fakes {
		if f.Writes() == 0 {
			t.Errorf("swarm %s: nothing was deployed to it", name)
		}
		if rs, _ := f.Releases(context.Background(), map[string]string{"local": "shop", "eu": "shop", "lab": "blog"}[name]); len(rs) != 1 {
			t.Errorf("swarm %s: %d records, want 1", name, len(rs))
		}
		f.reads()
		f.reset()
	}
	before := map[string]int{}
	for name, f := range fakes {
		before[name] = f.Writes()
	}
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Unchanged {
			t.Fatalf("steady %s: %v %s", r.App, r.Err, r.Action)
		}
	}
	for name, f := range fakes {
		if n := f.reads(); n != 1 {
			t.Errorf("swarm %s: %d batch reads in one steady batch, want 1", name, n)
		}
		if f.Writes() != before[name] {
			t.Errorf("swarm %s: a steady batch wrote", name)
		}
	}
}

func TestAnUnreachableSwarmMakesOnlyItsApplicationsUnknown(t *testing.T) {
	fakes, f, c := threeSwarms(t)
	c.RunOnce(context.Background())
	fakes["eu"].down.Store(true)
	f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
	writes := map[string]int{}
	for name, fk := range fakes {
		writes[name] = fk.Writes()
	}
	res := map[string]Result{}
	for _, r := range c.RunOnce(context.Background()) {
		res[r.App] = r
	}
	if st := res["shop-eu"].Status; st.Health != application.HealthUnknown || res["shop-eu"].Err == nil {
		t.Errorf("shop-eu on the unreachable swarm: health %s, err %v; want Unknown and a failed pass", st.Health, res["shop-eu"].Err)
	}
	for _, app := range []string{"shop", "blog"} {
		r := res[app]
		if r.Err != nil || r.Action != charts.Upgrade || r.Status.Health == application.HealthUnknown {
			t.Errorf("%s on a reachable swarm: %v %s health %s; want an upgrade", app, r.Err, r.Action, r.Status.Health)
		}
	}
	if fakes["eu"].Writes() != writes["eu"] {
		t.Error("the unreachable swarm was written to")
	}
	if fakes["local"].Writes() == writes["local"] || fakes["lab"].Writes() == writes["lab"] {
		t.Error("a reachable swarm was not deployed to")
	}

	fakes["eu"].down.Store(false)
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Status.Health == application.HealthUnknown {
			t.Errorf("%s after the swarm came back: %v, health %s", r.App, r.Err, r.Status.Health)
		}
	}
}

func TestAnApplicationWhoseDestinationIsNotConnectedFailsNamingIt(t *testing.T) {
	b := newSwarmFake()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	a := testApp("shop", true)
	a.Destination = "us"
	c := newTestController(t, b, f, a)
	r := c.RunOnce(context.Background())[0]
	if !errors.Is(r.Err, ErrNoSwarm) || KindOf(r.Err) != Stalled {
		t.Fatalf("err %v (kind %s), want a stalled ErrNoSwarm", r.Err, KindOf(r.Err))
	}
	if r.Status.Health != application.HealthUnknown || b.Writes() != 0 {
		t.Errorf("health %s, %d writes", r.Status.Health, b.Writes())
	}
}

func TestOrphansAreFoundPerSwarmAndAMovedApplicationsStackIsKept(t *testing.T) {
	_, _, c := threeSwarms(t)
	c.RunOnce(context.Background())
	apps := c.Applications()
	var keep []application.Application
	for _, a := range apps {
		switch a.Name {
		case "blog":
			// dropped: its stack on lab is an orphan
		case "shop":
			a.Destination = "lab" // moved: the local stack is kept
			keep = append(keep, a)
		default:
			keep = append(keep, a)
		}
	}
	c.opts.PruneOrphans = true
	c.SetApplications(keep)
	orphans, err := c.SweepOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Orphan{}
	for _, o := range orphans {
		got[o.Destination+"/"+o.Stack] = o
	}
	if len(got) != 2 {
		t.Fatalf("orphans %+v, want local/shop and lab/blog", orphans)
	}
	if o := got["lab/blog"]; o.Sweep == nil || o.Error != "" {
		t.Errorf("lab/blog: %+v, want swept as an orphan", o)
	}
	if o := got["local/shop"]; o.Sweep == nil || !o.Sweep.DryRun || !strings.Contains(o.Error, "now deploys stack shop to swarm lab") {
		t.Errorf("local/shop: %+v, want only reported, and why", o)
	}
}
