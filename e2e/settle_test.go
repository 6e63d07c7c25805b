package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	apiversions "github.com/moby/moby/client/pkg/versions"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// A writer that changes a service every two seconds keeps it updating for
// ever. Drift used to be judged on settled services only, so the
// application read Synced with the writer's value live. Past what its update
// config allows, the service must be compared anyway.
func TestAServiceAnotherWriterKeepsUpdatingIsComparedAnyway(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := swarmtest.Client(t)
		for n := 1; ctx.Err() == nil; n++ {
			s, err := c.ServiceInspect(ctx, h.app.Stack+"_worker", client.ServiceInspectOptions{})
			if err == nil {
				cs := s.Service.Spec.TaskTemplate.ContainerSpec
				cs.Env = append(slices.DeleteFunc(cs.Env, func(e string) bool { return strings.HasPrefix(e, "WRITER=") }), "WRITER="+strconv.Itoa(n))
				_, _ = c.ServiceUpdate(ctx, s.Service.ID, client.ServiceUpdateOptions{Version: s.Service.Version, Spec: s.Service.Spec})
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	t.Cleanup(func() { stop(); wg.Wait() })

	var res = h.reconcile(ctl)
	swarmtest.Eventually(t, 45*time.Second, func() (bool, string) {
		res = h.reconcile(ctl)
		// A pass that looks in the instant between a write and Swarm
		// starting its update sees a service at rest and compares it;
		// only a comparison made while the service is moving, reported
		// as not settling, shows what this test is about.
		drifted := slices.ContainsFunc(res.Status.Drift, func(d application.Drift) bool {
			return d.Service == "worker" && d.Field == "env.WRITER"
		})
		notSettling := slices.ContainsFunc(res.Status.Warnings, func(w string) bool {
			return strings.Contains(w, "service worker has been updating for") && strings.Contains(w, "compared anyway")
		})
		return res.Err == nil && drifted && notSettling, fmt.Sprintf("err %v, drift %v, warnings %q", res.Err, driftFields(res.Status), res.Status.Warnings)
	})
	stop()
	wg.Wait()
	if res.Status.Sync != application.OutOfSync || res.Status.SyncReason != application.ReasonDrift {
		t.Errorf("sync %s/%s, want OutOfSync/drift", res.Status.Sync, res.Status.SyncReason)
	}
	t.Logf("reported: %q", res.Status.Warnings)
}

// Version-less compose knows healthcheck.start_interval; a 1.41 daemon does
// not, and drops it from what it stores.
const startIntervalStack = `services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ":8080"]
    stop_grace_period: 1s
    healthcheck:
      test: ["CMD", "/app", "healthcheck"]
      interval: 2s
      start_period: 5s
      start_interval: 1s
`

// belowStartInterval returns a backend that speaks an engine API older than
// 1.44, where healthcheck.start_interval came in: the daemon's own (20.10
// speaks 1.41), or 1.43 pinned for a newer daemon, which then drops the
// field from a write the way 20.10 does. Both engines of the suite run the
// tests that need a daemon that does not keep a field.
func belowStartInterval(t *testing.T, opts backend.Options) *backend.Backend {
	t.Helper()
	if v := swarmtest.Client(t).ClientVersion(); !apiversions.LessThan(v, "1.44") {
		t.Logf("the suite speaks API %s with this daemon; this test speaks 1.43", v)
		opts.APIVersion = "1.43"
	}
	b, err := backend.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A field the daemon does not keep used to make live differ from desired
// for ever, and self-heal rewrote the service on every pass. A field the
// daemon's API version cannot carry is now dropped before the write (as the
// daemon would drop it), reported on every pass, and never written or
// healed. The net for a write that did not stick (checkWritesKept) stays
// for fields the API-version table does not know; its own tests drive it.
func TestAFieldTheDaemonDropsIsReportedAndNeverRewritten(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.backend = belowStartInterval(t, backend.Options{Logger: quiet})
	h.app.SyncPolicy.Automated.SelfHeal = true
	h.repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": startIntervalStack, "deploy/.env": "UNUSED=1\n"})
	ctl := h.controller(false)

	res := h.reconcile(ctl)
	if res.Err != nil || res.Deployed == nil || !slices.Equal(res.Deployed.Created, []string{"web"}) {
		t.Fatalf("first pass: %v %+v", res.Err, res.Deployed)
	}
	version := h.backend.APIVersion()
	if live := h.services()["web"].Spec.TaskTemplate.ContainerSpec.Healthcheck; live == nil || live.StartInterval != 0 || live.Interval == 0 {
		t.Fatalf("live healthcheck %+v, want the interval without the start interval", live)
	}
	reported := func(st application.Status) bool {
		return slices.ContainsFunc(st.Warnings, func(w string) bool {
			return strings.Contains(w, "service web: healthcheck.start_interval needs engine API 1.44 and is dropped for API "+version)
		})
	}
	if !reported(res.Status) {
		t.Errorf("first pass warnings %q, want the field reported", res.Status.Warnings)
	}
	h.waitRunning(1)

	for pass := 2; pass <= 3; pass++ {
		stats := h.backend.Stats()
		res = h.reconcile(ctl)
		d := h.backend.Stats().Sub(stats)
		if res.Err != nil || res.Healed != nil || d.Writes != 0 {
			t.Fatalf("pass %d: err %v, healed %+v, %d writes; want none", pass, res.Err, res.Healed, d.Writes)
		}
		if !reported(res.Status) || len(res.Status.Drift) != 0 || res.Status.Sync != application.Synced {
			t.Fatalf("pass %d: sync %s, drift %v, warnings %q; want Synced with the field reported", pass, res.Status.Sync, driftFields(res.Status), res.Status.Warnings)
		}
	}
}

// The net under the API-version table: a field the daemon silently drops
// from a write is noticed right after the write, reported, and not written
// again pass after pass. The backend is told to keep fields of API 1.44, so
// this 1.41 daemon drops healthcheck.start_interval itself, as it would a
// field no table knows.
func TestAWriteTheDaemonDidNotKeepIsReportedAndNotRepeated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.backend = belowStartInterval(t, backend.Options{Logger: quiet, FieldsAPIVersion: "1.44"})
	h.app.SyncPolicy.Automated.SelfHeal = true
	h.repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": startIntervalStack, "deploy/.env": "UNUSED=1\n"})
	ctl := h.controller(false)

	notKept := func(st application.Status) bool {
		return slices.ContainsFunc(st.Warnings, func(w string) bool {
			return strings.Contains(w, "service web: field healthcheck") && strings.Contains(w, "not kept by the daemon")
		})
	}
	res := h.reconcile(ctl)
	if res.Err != nil || res.Deployed == nil || !slices.Equal(res.Deployed.Created, []string{"web"}) {
		t.Fatalf("first pass: %v %+v", res.Err, res.Deployed)
	}
	if live := h.services()["web"].Spec.TaskTemplate.ContainerSpec.Healthcheck; live == nil || live.StartInterval != 0 {
		t.Fatalf("live healthcheck %+v: the daemon kept start_interval, so nothing here tests a dropped write", live)
	}
	h.waitRunning(1)
	for pass := 2; pass <= 3; pass++ {
		stats := h.backend.Stats()
		res = h.reconcile(ctl)
		d := h.backend.Stats().Sub(stats)
		if res.Err != nil || d.Writes != 0 {
			t.Fatalf("pass %d: err %v, healed %+v, %d writes; want none", pass, res.Err, res.Healed, d.Writes)
		}
		if !notKept(res.Status) {
			t.Fatalf("pass %d: warnings %q, want the field named as not kept", pass, res.Status.Warnings)
		}
	}

	// The memory is kept in the swarm: a restarted controller (every
	// --once run is one) does not write the field again either.
	for start := 1; start <= 2; start++ {
		stats := h.backend.Stats()
		res = h.reconcile(h.controller(false))
		d := h.backend.Stats().Sub(stats)
		if res.Err != nil || d.Writes != 0 {
			t.Fatalf("restart %d: err %v, healed %+v, %d writes (%v); want none", start, res.Err, res.Healed, d.Writes, d.Requests)
		}
		if !notKept(res.Status) {
			t.Fatalf("restart %d: warnings %q, want the field named as not kept", start, res.Status.Warnings)
		}
	}

	// A commit that changes the field is still applied, once, by a
	// restarted controller, and its new value is remembered in turn.
	h.repo.Commit("slower start", map[string]string{"deploy/docker-compose.yml": strings.Replace(startIntervalStack, "start_interval: 1s", "start_interval: 3s", 1)})
	stats := h.backend.Stats()
	res = h.reconcile(h.controller(false))
	if res.Err != nil || res.Deployed == nil || !slices.Equal(res.Deployed.Updated, []string{"web"}) {
		t.Fatalf("changed field: err %v, deployed %+v; want web updated", res.Err, res.Deployed)
	}
	if d := h.backend.Stats().Sub(stats); d.Requests["service.update"] != 1 {
		t.Fatalf("changed field: %d service writes (%v), want one", d.Requests["service.update"], d.Requests)
	}
	h.waitRunning(1)
	stats = h.backend.Stats()
	res = h.reconcile(h.controller(false))
	if d := h.backend.Stats().Sub(stats); res.Err != nil || d.Writes != 0 || !notKept(res.Status) {
		t.Fatalf("restart after the change: err %v, %d writes (%v), warnings %q; want none, and the field named", res.Err, d.Writes, d.Requests, res.Status.Warnings)
	}
}
