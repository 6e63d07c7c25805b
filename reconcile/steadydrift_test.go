package reconcile

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// versionedFake is batchFake with the one thing Swarm does that the steady
// mark relies on: a service's version moves whenever anything about it
// changes. The version here is a digest of the whole service, so no write,
// however it is made, can leave it where it was. It counts conversions.
type versionedFake struct {
	*batchFake
	vmu         sync.Mutex
	conversions int
}

func (f *versionedFake) DesiredServices(ctx context.Context, manifest, stack string) (*compose.Stack, error) {
	f.vmu.Lock()
	f.conversions++
	f.vmu.Unlock()
	return f.batchFake.DesiredServices(ctx, manifest, stack)
}

func (f *versionedFake) LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error) {
	out, err := f.batchFake.LiveServicesOf(ctx, stacks)
	for _, m := range out {
		for name, s := range m {
			s.Version.Index = 0
			b, _ := json.Marshal(s)
			h := fnv.New64a()
			h.Write(b)
			s.Version.Index = h.Sum64() | 1
			m[name] = s
		}
	}
	return out, err
}

func (f *versionedFake) takeConversions() int {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	n := f.conversions
	f.conversions = 0
	return n
}

func versionedBatch(t *testing.T, n int, selfHeal bool) (*versionedFake, *Controller) {
	t.Helper()
	b := &versionedFake{batchFake: &batchFake{liveDriftFake: newLiveDriftFake()}}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	var apps []application.Application
	for i := range n {
		a := testApp(string(rune('a'+i))+"pp", true)
		a.SyncPolicy.Automated.SelfHeal = selfHeal
		apps = append(apps, a)
	}
	c := newTestController(t, b, f, apps...)
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Install {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
	}
	b.takeConversions()
	return b, c
}

// runSteady runs one batch and returns, by application, the services the
// status reports drifted.
func runSteady(t *testing.T, c *Controller) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Unchanged {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
		for _, d := range r.Status.Drift {
			if !slices.Contains(out[r.App], d.Service) {
				out[r.App] = append(out[r.App], d.Service)
			}
		}
		for _, d := range r.Status.Corrected {
			if !slices.Contains(out[r.App], d.Service) {
				out[r.App] = append(out[r.App], d.Service)
			}
		}
	}
	return out
}

// Once a comparison found a render in sync, a pass that reads every
// service of the stack at the version that comparison saw converts
// nothing and compares nothing; a write behind the controller's back, a
// removed service or a service set in motion moves a version, and that
// application, and only it, is compared in full again and its drift
// reported.
func TestASteadyPassComparesOnlyTheStacksWhoseServicesMoved(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*versionedFake)
		app     string
		service string
	}{
		{"a write behind its back", func(b *versionedFake) { b.edit("bpp_web", setEnv("foreign")) }, "bpp", "web"},
		{"a removed service", func(b *versionedFake) { b.remove("cpp_worker") }, "cpp", "worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := versionedBatch(t, 3, false)
			if d := runSteady(t, c); len(d) != 0 {
				t.Fatalf("drift right after the deploy: %v", d)
			}
			if n := b.takeConversions(); n != 3 {
				t.Fatalf("first steady batch converted %d manifests, want each of the 3 once", n)
			}
			for i := range 2 {
				if d := runSteady(t, c); len(d) != 0 {
					t.Fatalf("steady batch %d: drift %v", i, d)
				}
				if n := b.takeConversions(); n != 0 {
					t.Fatalf("steady batch %d over an unchanged swarm converted %d manifests, want none", i, n)
				}
			}
			tc.change(b)
			for range 2 { // reported on every pass while it lasts
				d := runSteady(t, c)
				if len(d) != 1 || !slices.Contains(d[tc.app], tc.service) {
					t.Fatalf("drift %v, want %s of %s only", d, tc.service, tc.app)
				}
				if n := b.takeConversions(); n != 1 {
					t.Errorf("%d manifests converted, want only the drifted application's", n)
				}
			}
		})
	}
}

// A service in motion is judged again on every pass (its verdict depends on
// how long it has been moving), so no mark is kept while one is.
func TestASteadyPassComparesAgainWhileAServiceIsInMotion(t *testing.T) {
	b, c := versionedBatch(t, 1, false)
	runSteady(t, c)
	b.edit("app_web", withUpdate(swarm.UpdateStateUpdating, time.Now()))
	b.takeConversions()
	for i := range 3 {
		runSteady(t, c)
		if n := b.takeConversions(); n != 1 {
			t.Fatalf("pass %d with a service updating converted %d manifests, want 1", i, n)
		}
	}
}

// Self-heal still heals what moved, and the pass after the heal compares in
// full (the heal moved the version) and then rests again.
func TestASteadyPassStillHealsAWriteBehindItsBack(t *testing.T) {
	b, c := versionedBatch(t, 2, true)
	runSteady(t, c)
	runSteady(t, c)
	b.takeConversions()
	b.edit("app_web", setEnv("foreign"))
	if d := runSteady(t, c); !slices.Contains(d["app"], "web") || len(d) != 1 {
		t.Fatalf("drift %v, want web of app corrected", d)
	}
	if got := b.live["app_web"].Spec.TaskTemplate.ContainerSpec.Env; !slices.Contains(got, "MESSAGE=one") {
		t.Fatalf("web not healed: env %v", got)
	}
	b.takeConversions()
	if d := runSteady(t, c); len(d) != 0 {
		t.Fatalf("drift after the heal: %v", d)
	}
	runSteady(t, c)
	if n := b.takeConversions(); n != 1 {
		t.Errorf("%d conversions over the two passes after a heal, want one (the first) and then none", n)
	}
}

// networkedFake is versionedFake on a swarm that addresses networks by id:
// live services attach to "id-<name>", and LiveNetworkNames maps the ids
// the test says exist.
type networkedFake struct {
	*versionedFake
	nmu  sync.Mutex
	nets map[string]string
}

var _ capability.NetworkNamer = (*networkedFake)(nil)

func (f *networkedFake) LiveNetworkNames(context.Context) (map[string]string, error) {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	return maps.Clone(f.nets), nil
}

func (f *networkedFake) LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error) {
	out, err := f.batchFake.LiveServicesOf(ctx, stacks)
	for _, m := range out {
		for name, s := range m {
			nets := slices.Clone(s.Spec.TaskTemplate.Networks)
			for i := range nets {
				nets[i].Target = "id-" + nets[i].Target
			}
			s.Spec.TaskTemplate.Networks = nets
			m[name] = s
		}
	}
	for _, m := range out {
		for name, s := range m {
			b, _ := json.Marshal(s)
			h := fnv.New64a()
			h.Write(b)
			s.Version.Index = h.Sum64() | 1
			m[name] = s
		}
	}
	return out, err
}

// A network removed and created again under the same name moves no
// service's version, yet the services still attach to the old one: the
// steady mark names the networks its services use, so the pass compares in
// full and reports the attachment. A network no service uses coming and
// going does not void the mark.
func TestASteadyPassComparesAgainWhenANetworkItsServicesUseIsReplaced(t *testing.T) {
	b := &networkedFake{versionedFake: &versionedFake{batchFake: &batchFake{liveDriftFake: newLiveDriftFake()}},
		nets: map[string]string{"id-app_back": "app_back"}}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("app", true))
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Install {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
	}
	if d := runSteady(t, c); len(d) != 0 {
		t.Fatalf("drift right after the deploy: %v", d)
	}
	b.takeConversions()
	b.nmu.Lock()
	b.nets["id-elsewhere"] = "someone_else"
	b.nmu.Unlock()
	if d := runSteady(t, c); len(d) != 0 || b.takeConversions() != 0 {
		t.Fatalf("a network no service uses voided the mark (drift %v)", d)
	}
	b.nmu.Lock()
	b.nets = map[string]string{"id2-app_back": "app_back"}
	b.nmu.Unlock()
	d := runSteady(t, c)
	if !slices.Contains(d["app"], "web") || !slices.Contains(d["app"], "worker") {
		t.Errorf("services attached to a replaced network not reported: drift %v", d)
	}
	if n := b.takeConversions(); n != 1 {
		t.Errorf("%d conversions, want the full comparison", n)
	}
}
