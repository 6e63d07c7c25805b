package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// rolloutStack is one web service released by a canary of two short
// steps with no router: the replica ratio is the traffic split.
func rolloutStack(tag string) string {
	return `version: "3.8"
services:
  web:
    image: flotilla-test/app:` + tag + `
    command: ["serve", ":8080"]
    stop_grace_period: 1s
    deploy:
      replicas: 2
    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 50, pause: 3s}
          - {weight: 100, pause: 3s}
`
}

func rolloutFiles(tag string) map[string]string {
	return map[string]string{"deploy/docker-compose.yml": rolloutStack(tag), "deploy/.env": "GREETING=hello\n"}
}

// colourView is what the swarm shows of web and web-canary.
type colourView struct {
	state        rollout.State
	web, canary  string // images
	canaryScale  uint64
	canaryExists bool
}

func (v colourView) String() string {
	return fmt.Sprintf("web %s, canary %s x%d, %s step %d weight %d", v.web, v.canary, v.canaryScale, v.state.Phase, v.state.Step, v.state.Weight)
}

func (h *harness) colours() colourView {
	h.t.Helper()
	svcs := h.services()
	var v colourView
	v.web = imageTag(svcs["web"])
	c, ok := svcs["web-canary"]
	if !ok {
		return v
	}
	st, err := rollout.StateFromLabels(c.Spec.Labels)
	if err != nil {
		h.t.Fatal(err)
	}
	v.state, v.canary, v.canaryExists = st, imageTag(c), true
	if r := c.Spec.Mode.Replicated; r != nil && r.Replicas != nil {
		v.canaryScale = *r.Replicas
	}
	return v
}

func imageTag(s swarm.Service) string {
	img := s.Spec.TaskTemplate.ContainerSpec.Image
	if i := strings.IndexByte(img, '@'); i >= 0 {
		img = img[:i]
	}
	return img[strings.LastIndexByte(img, ':')+1:]
}

func TestCanaryRolloutOnTheSwarm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("v1", rolloutFiles("1"))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(1)
	if v := h.colours(); v.canaryExists {
		t.Fatalf("first deploy made a canary: %s", v)
	}

	// v2: the canary comes up at step 0's replicas beside web on v1.
	h.repo.Commit("v2", rolloutFiles("2"))
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	v := h.colours()
	if v.web != "1" || v.canary != "2" || v.canaryScale != 1 || v.state.Phase != rollout.Progressing || v.state.Weight != 0 {
		t.Fatalf("after v2: %s", v)
	}

	// The pass, run again and again, walks the steps to the promote;
	// web stays on v1 until then.
	var seen []string
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		res := h.reconcile(ctl)
		if res.Err != nil {
			return false, res.Err.Error()
		}
		v := h.colours()
		s := fmt.Sprintf("%s/%d/%d", v.state.Phase, v.state.Step, v.state.Weight)
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		if v.state.Phase == rollout.Progressing && v.web != "1" {
			t.Fatalf("web left v1 before the promote: %s", v)
		}
		return v.state.Phase == rollout.Completed, v.String()
	})
	v = h.colours()
	if v.web != "2" || v.canaryScale != 0 {
		t.Fatalf("after the rollout: %s", v)
	}
	for _, want := range []string{"Progressing/0/50", "Progressing/1/100", "Promoting/1/100", "Completed/1/0"} {
		if !strings.Contains(strings.Join(seen, " "), want) {
			t.Fatalf("steps seen %v lack %s", seen, want)
		}
	}
	t.Logf("steps seen: %v", seen)

	// Once complete, a pass writes nothing and finds no drift: the
	// colour's recorded labels and its zero scale are what git declares.
	h.waitRunning(2)
	res0 := h.reconcile(ctl)
	if res0.Err != nil || res0.Action != charts.Unchanged || len(res0.Status.Drift) != 0 || res0.Status.Sync != "Synced" {
		t.Fatalf("steady pass after the rollout: action %s sync %s drift %+v err %v", res0.Action, res0.Status.Sync, res0.Status.Drift, res0.Err)
	}
	if res0.Status.Health != "Healthy" {
		t.Fatalf("health after the rollout: %s %q", res0.Status.Health, res0.Status.HealthMessage)
	}

	// v3, aborted by an operator: web stays on v2, the canary at zero.
	h.repo.Commit("v3", rolloutFiles("1"))
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := ctl.RolloutCommand(h.app.Name, "web", rollout.CommandAbort); err != nil {
		t.Fatal(err)
	}
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	v = h.colours()
	if v.state.Phase != rollout.Aborted || v.canaryScale != 0 || v.web != "2" {
		t.Fatalf("after abort: %s", v)
	}
	if res.Status.Health != "Degraded" || !strings.Contains(res.Status.HealthMessage, "aborted") {
		t.Fatalf("health after abort: %s %q", res.Status.Health, res.Status.HealthMessage)
	}
}

func TestCanaryRolloutResumesAfterAControllerRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("v1", rolloutFiles("1"))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(1)
	h.repo.Commit("v2", rolloutFiles("2"))
	var before rollout.State
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		if res := h.reconcile(ctl); res.Err != nil {
			return false, res.Err.Error()
		}
		v := h.colours()
		before = v.state
		return v.state.Phase == rollout.Progressing && v.state.Weight == 50, v.String()
	})

	// A new controller, with no memory and an empty git cache, takes the
	// rollout up where the swarm records it.
	ctl2 := h.controller(true)
	res := h.reconcile(ctl2)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	after := h.colours().state
	if after.Revision != before.Revision || after.Step < before.Step || (after.Step == before.Step && after.Weight < before.Weight) {
		t.Fatalf("the restart moved the rollout back: %+v → %+v", before, after)
	}
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		if res := h.reconcile(ctl2); res.Err != nil {
			return false, res.Err.Error()
		}
		v := h.colours()
		return v.state.Phase == rollout.Completed && v.web == "2", v.String()
	})
}

func TestAnUnreadableRolloutRecordHoldsOnStableUntilRetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("v1", rolloutFiles("1"))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(1)
	h.repo.Commit("v2", rolloutFiles("2"))
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}

	// Someone edits the record on the swarm into something unreadable.
	changeService(t, h, "web-canary", func(s *swarm.ServiceSpec) { s.Labels[rollout.LabelPrefix+"step"] = "many" })
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	svcs := h.services()
	canary := svcs["web-canary"]
	if n := *canary.Spec.Mode.Replicated.Replicas; n != 0 || imageTag(svcs["web"]) != "1" {
		t.Fatalf("unreadable record: canary x%d, web %s; want all on stable", n, imageTag(svcs["web"]))
	}
	if r := res.Status.Rollouts; len(r) != 1 || !strings.Contains(r[0].Error, "step") || res.Status.Health != "Degraded" {
		t.Fatalf("status: health %s rollouts %+v", res.Status.Health, r)
	}
	if got := canary.Spec.Labels[rollout.LabelPrefix+"step"]; got != "many" {
		t.Fatalf("the unreadable record was rewritten to %q", got)
	}

	// An operator's retry starts it again from nothing.
	if err := ctl.RolloutCommand(h.app.Name, "web", rollout.CommandRetry); err != nil {
		t.Fatal(err)
	}
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	if v := h.colours(); v.state.Phase != rollout.Progressing || v.state.Step != 0 || v.canaryScale != 1 {
		t.Fatalf("after retry: %s", v)
	}
}

// TestTheControllerLoopCarriesACanaryOnTheSwarm leaves the rollout to the
// loop, with an interval of an hour: only the rollout's own next checks can
// take it through its steps in time.
func TestTheControllerLoopCarriesACanaryOnTheSwarm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Interval.Duration = time.Hour
	h.repo.Commit("v1", rolloutFiles("1"))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(1)
	h.repo.Commit("v2", rolloutFiles("2"))
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		v := h.colours()
		return v.state.Phase == rollout.Completed && v.web == "2" && v.canaryScale == 0, v.String()
	})

	// A rollback to revision 1 goes out through the same steps: v1 as
	// the canary beside web on v2, then promoted, the application pinned
	// to the rollback all along.
	ch, err := ctl.Rollback(h.app.Name, 1, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			t.Fatalf("rollback: %v", res.Err)
		}
		if v := h.colours(); v.web != "2" || v.canary != "1" || v.state.Phase != rollout.Progressing || v.state.Step != 0 {
			t.Fatalf("after the rollback's pass: %s, want v1 as the canary at step 0 beside web on v2", v)
		}
		if res.Status.Pinned == "" {
			t.Fatal("the rollback does not pin the application")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("rollback not served")
	}
	var seen []string
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		v := h.colours()
		if s := fmt.Sprintf("%s/%d/%d", v.state.Phase, v.state.Step, v.state.Weight); len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		// The promote writes web and web-canary side by side, so a read
		// may see web on v1 while the record still says the last step
		// (weight 100); before that step web must not move.
		if v.state.Phase == rollout.Progressing && v.state.Weight < 100 && v.web != "2" {
			t.Fatalf("web left v2 before the rollback's promote: %s", v)
		}
		return v.state.Phase == rollout.Completed && v.web == "1" && v.canaryScale == 0, v.String()
	})
	if !strings.Contains(strings.Join(seen, " "), "Progressing/1/100") {
		t.Fatalf("the rollback's steps seen %v skip step 1", seen)
	}
	t.Logf("the rollback's steps seen: %v", seen)
	if st, _ := ctl.Status(h.app.Name); st.Pinned == "" {
		t.Fatalf("after the rollback's rollout the application is not pinned: %+v", st)
	}
}
