package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The orphan report of a removed application counts what is still on the
// swarm, not what its records declared: objects removed by hand since (one
// service and its config, then the whole stack with docker stack rm) are
// not counted.
func TestOrphanReportCountsWhatIsStillOnTheSwarm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	ctx := context.Background()
	h.repo.Commit("initial", sweepFiles(sweepFile, "v1\n"))
	if res := h.reconcile(h.controller(false)); res.Err != nil {
		t.Fatal(res.Err)
	}
	pending := func() []string {
		t.Helper()
		orphans, err := testController(t, h, h.id, false).SweepOrphans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o := findOrphan(orphans, h.app.Stack)
		if o == nil || o.Sweep == nil || !o.Sweep.DryRun {
			t.Fatalf("orphan report: %+v", o)
		}
		return o.Sweep.Pending
	}
	// docker runs a command until it succeeds: a config stays in use until
	// the removed service's task is gone.
	docker := func(args ...string) {
		t.Helper()
		swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
			out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
			return err == nil, string(out)
		})
	}
	if got := pending(); len(got) != 8 {
		t.Fatalf("pending %v, want the 8 objects deployed", got)
	}
	confs, err := h.backend.LiveConfigs(ctx, h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	var workerConf string
	for name := range confs {
		if strings.HasPrefix(name, h.app.Stack+"_worker_conf-") {
			workerConf = name
		}
	}
	docker("service", "rm", h.app.Stack+"_worker")
	docker("config", "rm", workerConf)
	got := pending()
	if len(got) != 6 || slices.Contains(got, "service "+h.app.Stack+"_worker") || slices.Contains(got, "config "+workerConf) {
		t.Errorf("after removing the worker and its config by hand: pending %v, want the 6 left", got)
	}
	docker("stack", "rm", h.app.Stack)
	// The stack's networks go once its tasks have.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		got := pending()
		return len(got) == 0, fmt.Sprintf("after docker stack rm: pending %v, want nothing", got)
	})
}
