package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// changeService edits a live service the way `docker service update` does:
// read, change, write with the version read, retrying when Swarm's own
// bookkeeping moved the version in between.
func changeService(t *testing.T, h *harness, name string, edit func(*swarm.ServiceSpec)) {
	t.Helper()
	c := swarmtest.Client(t)
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		s, _, err := c.ServiceInspectWithRaw(ctx, h.app.Stack+"_"+name, swarm.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(&s.Spec)
		_, err = c.ServiceUpdate(ctx, s.ID, s.Version, s.Spec, swarm.ServiceUpdateOptions{})
		if err == nil {
			return
		}
		if attempt > 5 || !strings.Contains(err.Error(), "out of sequence") {
			t.Fatal(err)
		}
	}
}

func driftFields(st application.Status) []string {
	var out []string
	for _, d := range st.Drift {
		out = append(out, d.Service+":"+d.Field)
	}
	return out
}

func TestDriftIsReportedAndHealedOnlyWithSelfHeal(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)

	// An untouched stack reports no drift.
	res := h.reconcile(ctl)
	if res.Err != nil || len(res.Status.Drift) != 0 || res.Status.Sync != application.Synced {
		t.Fatalf("untouched stack: %v %v", res.Err, driftFields(res.Status))
	}

	// Someone changes the worker's environment by hand.
	changeService(t, h, "worker", func(s *swarm.ServiceSpec) {
		s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "DEBUG=1", "API_TOKEN=leaked")
	})
	h.waitRunning(3)
	// Drift is judged on settled services; the hand-made update may still
	// be rolling out when the first pass looks, so passes repeat until it
	// settles, as the controller's interval would.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		res = h.reconcile(ctl)
		return res.Err == nil && len(res.Status.Drift) > 0, fmt.Sprint(res.Err, driftFields(res.Status))
	})
	got := driftFields(res.Status)
	var before map[string]uint64
	if !slices.Equal(got, []string{"worker:env.API_TOKEN", "worker:env.DEBUG"}) {
		t.Fatalf("drift %v, want worker env.API_TOKEN and env.DEBUG", got)
	}
	for _, d := range res.Status.Drift {
		if d.Field == "env.API_TOKEN" && (!d.Masked || strings.Contains(d.Live, "leaked")) {
			t.Fatalf("secret-looking env value not masked: %+v", d)
		}
	}
	if res.Status.Sync != application.OutOfSync || res.Status.SyncReason != application.ReasonDrift {
		t.Fatalf("sync %s/%s, want OutOfSync/drift", res.Status.Sync, res.Status.SyncReason)
	}
	// Another pass without selfHeal reports the same drift and writes
	// nothing: versions taken once the hand-made update settled stay put.
	before = versions(h.services())
	res = h.reconcile(ctl)
	if got := driftFields(res.Status); !slices.Equal(got, []string{"worker:env.API_TOKEN", "worker:env.DEBUG"}) {
		t.Fatalf("drift on the next pass %v", got)
	}
	if !maps.Equal(before, versions(h.services())) {
		t.Fatal("drift was corrected without selfHeal")
	}

	// With selfHeal the next pass corrects exactly that service.
	h.app.SyncPolicy.Automated.SelfHeal = true
	ctl = h.controller(false)
	res = h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	after := versions(h.services())
	for _, n := range []string{"web", "cron"} {
		if after[n] != before[n] {
			t.Fatalf("%s touched by self-heal", n)
		}
	}
	if after["worker"] == before["worker"] {
		t.Fatal("worker not healed")
	}
	env := h.services()["worker"].Spec.TaskTemplate.ContainerSpec.Env
	if slices.Contains(env, "DEBUG=1") {
		t.Fatalf("worker env still drifted: %v", env)
	}
	h.waitRunning(3)
	res = h.reconcile(ctl)
	if res.Err != nil || len(res.Status.Drift) != 0 || res.Status.Sync != application.Synced {
		t.Fatalf("after heal: %v %v %s", res.Err, driftFields(res.Status), res.Status.Sync)
	}

	// A deleted service is drift too, and self-heal brings it back.
	if err := swarmtest.Client(t).ServiceRemove(context.Background(), h.services()["cron"].ID); err != nil {
		t.Fatal(err)
	}
	res = h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, ok := h.services()["cron"]; !ok {
		t.Fatalf("deleted service not restored: %v", driftFields(res.Status))
	}
}

// flakyReads wraps the real backend and fails its reads while down is set,
// as a daemon that stopped answering would.
type flakyReads struct {
	charts.Backend
	down atomic.Bool
}

var errDaemonDown = errors.New("Cannot connect to the Docker daemon")

func (f *flakyReads) Unwrap() charts.Backend { return f.Backend }

func (f *flakyReads) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	if f.down.Load() {
		return nil, errDaemonDown
	}
	return f.Backend.(capability.StacksReader).ReadStacks(ctx, stacks)
}

func (f *flakyReads) ReadStackServices(ctx context.Context, stack string) ([]charts.ServiceState, error) {
	if f.down.Load() {
		return nil, errDaemonDown
	}
	return f.Backend.(capability.StackServicesReader).ReadStackServices(ctx, stack)
}

var (
	_ capability.StacksReader        = (*flakyReads)(nil)
	_ capability.StackServicesReader = (*flakyReads)(nil)
)

func TestUnreachableDaemonIsUnknownAndRecovers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("initial", files(stackFile))
	flaky := &flakyReads{Backend: h.backend}
	ctl, err := reconcile.New(reconcile.Options{ControllerID: h.id, Backend: flaky, Fetcher: h.controllerFetcher(), Logger: quiet},
		[]application.Application{h.app})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := ctl.Reconcile(context.Background(), h.app.Name); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(3)

	flaky.down.Store(true)
	res, _ := ctl.Reconcile(context.Background(), h.app.Name)
	if res.Status.Health != application.HealthUnknown {
		t.Fatalf("daemon down: health %s (%s), want Unknown", res.Status.Health, res.Status.HealthMessage)
	}
	flaky.down.Store(false)
	res, _ = ctl.Reconcile(context.Background(), h.app.Name)
	if res.Status.Health != application.Healthy {
		t.Fatalf("daemon back: health %s (%s)", res.Status.Health, res.Status.HealthMessage)
	}
}
