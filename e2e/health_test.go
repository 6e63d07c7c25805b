package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

const unstartable = `version: "3.8"
services:
  ok:
    image: flotilla-test/app:1
    stop_grace_period: 1s
  noimage:
    image: flotilla-test/never-built:1
    stop_grace_period: 1s
  nowhere:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy:
      placement:
        constraints: [node.labels.flotilla-test-nonexistent == yes]
`

func TestServicesThatCannotStartAreDegradedWithTheReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": unstartable, "deploy/.env": "\n# none\n"})
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	var st application.Status
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		st = h.reconcile(ctl).Status
		byName := map[string]application.ServiceStatus{}
		for _, s := range st.Services {
			byName[s.Name] = s
		}
		ni, nw, ok := byName["noimage"], byName["nowhere"], byName["ok"]
		return ni.Health == application.Degraded && nw.Health == application.Degraded && ok.Health == application.Healthy,
			fmt.Sprintf("%+v", st.Services)
	})
	if st.Health != application.Degraded || !strings.Contains(st.HealthMessage, "1/3 running") {
		t.Fatalf("application health %s: %s", st.Health, st.HealthMessage)
	}
	for _, s := range st.Services {
		switch s.Name {
		case "noimage":
			// 20.10 says "No such image: …"; a current engine, which tries
			// the registry, "failed to resolve reference …". Both name it.
			if !strings.Contains(s.Message, "flotilla-test/never-built:1") {
				t.Errorf("noimage reason: %q", s.Message)
			}
		case "nowhere":
			if !strings.Contains(s.Message, "no suitable node") {
				t.Errorf("nowhere reason: %q", s.Message)
			}
		}
	}
}

const rollbackV1 = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy:
      replicas: 1
      update_config:
        failure_action: rollback
        monitor: 3s
      rollback_config:
        monitor: 1s
`

func TestSwarmRollbackFailsTheSyncAndIsNotPushedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Automated.SelfHeal = true
	h.app.SyncPolicy.Wait = &application.Wait{}
	h.app.SyncPolicy.Wait.Timeout.Duration = 90 * time.Second
	env := map[string]string{"deploy/.env": "# none\n"}
	h.repo.Commit("v1", map[string]string{"deploy/docker-compose.yml": rollbackV1, "deploy/.env": env["deploy/.env"]})
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatalf("v1: %v", res.Err)
	}

	// v2 exits at once: Swarm's update fails and rolls back.
	v2 := strings.Replace(rollbackV1, "    stop_grace_period: 1s\n", "    command: [\"exit\", \"3\"]\n    stop_grace_period: 1s\n", 1)
	h.repo.Commit("v2 crashes", map[string]string{"deploy/docker-compose.yml": v2, "deploy/.env": env["deploy/.env"]})
	res := h.reconcile(ctl)
	if res.Err == nil || !strings.Contains(res.Status.LastError, "rolled back") {
		t.Fatalf("sync of a crashing update: err %v, status %q", res.Err, res.Status.LastError)
	}

	// The next passes report the rollback and do not push v2 again.
	stats := h.backend.Stats()
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		res = h.reconcile(ctl)
		return len(res.Status.RolledBack) == 1, fmt.Sprint(res.Err, res.Status.RolledBack, driftFields(res.Status))
	})
	if res.Action != charts.Unchanged || res.Deployed != nil {
		t.Fatalf("after rollback: %+v", res)
	}
	if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
		t.Fatalf("the rolled-back spec was pushed again: %v", d.Requests)
	}
	if res.Status.RolledBack[0] != "api" {
		t.Fatalf("rolled back: %v", res.Status.RolledBack)
	}
}
