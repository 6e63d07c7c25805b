package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// haRolloutStack is web released by a canary whose first step holds for
// haRolloutPause: long enough for a leader to be killed inside it and for
// the standby to take over before it ends.
const haRolloutStack = `version: "3.8"
services:
  web:
    image: flotilla-test/app:%s
    command: ["serve", ":8080"]
    stop_grace_period: 1s
    deploy: {replicas: 2}
    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 50, pause: 25s}
          - {weight: 100, pause: 2s}
`

const haRolloutPause = 25 * time.Second

// stackCanary reads web's image and web-canary's recorded rollout state
// from the swarm.
func stackCanary(t *testing.T, stack string) (web string, st rollout.State, ok bool) {
	t.Helper()
	for _, s := range stackServices(t, stack) {
		switch s.Spec.Name {
		case stack + "_web":
			web = imageTag(s)
		case stack + "_web-canary":
			var err error
			if st, err = rollout.StateFromLabels(s.Spec.Labels); err != nil {
				t.Fatal(err)
			}
			ok = true
		}
	}
	return web, st, ok
}

// haPair is two controllers of one stack, a leading and b standing by,
// and the repository they deploy it from.
type haPair struct {
	stack string
	repo  *gittest.Repo
	a, b  *haMember
}

// startHAPair names a stack after prefix, commits first as its stack file,
// and starts a, which leads and deploys it, then b, which stands by. The
// stack and the lease are removed after the test.
func startHAPair(t *testing.T, prefix, first string) *haPair {
	t.Helper()
	stack := swarmtest.Name(t, prefix)
	swarmtest.Cleanup(t, stack)
	t.Cleanup(func() {
		_, _ = swarmtest.Client(t).ConfigRemove(context.Background(), "flotilla-lease."+stack, client.ConfigRemoveOptions{})
	})
	repo := gittest.New(t)
	repo.Commit("v1", map[string]string{"deploy/docker-compose.yml": first})
	apps := shutdownApps(t, stack, repo.Dir, "")
	a := startHA(t, apps, stack, "a-"+stack)
	a.waitRole(t, "leader", "", 30*time.Second)
	a.ctl.waitLog("deployed revision", 60*time.Second)
	b := startHA(t, apps, stack, "b-"+stack)
	b.waitRole(t, "standby", a.id, 30*time.Second)
	return &haPair{stack: stack, repo: repo, a: a, b: b}
}

// commit commits file as the next revision of the stack and has the
// leader sync it at once.
func (p *haPair) commit(t *testing.T, file string) {
	t.Helper()
	p.repo.Commit("next", map[string]string{"deploy/docker-compose.yml": file})
	if code, e := p.a.post(t, "/api/v1/applications/"+p.stack+"/sync"); code != http.StatusAccepted {
		t.Fatalf("sync on the leader: %d %+v", code, e)
	}
}

// A leader killed while a canary step holds hands the rollout to the
// standby, which resumes it from the state the swarm records: the same
// step, its pause counted from when it really began, never back to the
// first step and never past a step before its pause is over.
func TestHAStandbyResumesARolloutAtItsRecordedStepWhenTheLeaderIsKilled(t *testing.T) {
	t.Parallel()
	p := startHAPair(t, "harollout", fmt.Sprintf(haRolloutStack, "1"))
	stack, a, b := p.stack, p.a, p.b
	p.commit(t, fmt.Sprintf(haRolloutStack, "2"))
	var held rollout.State
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		web, st, _ := stackCanary(t, stack)
		held = st
		return st.Phase == rollout.Progressing && st.Step == 0 && st.Weight == 50 && !st.StepStarted.IsZero(),
			fmt.Sprintf("web %s, canary %+v", web, st)
	})
	if err := a.ctl.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.ctl.exited
	killed := time.Now()
	b.waitRole(t, "leader", "", 4*haLease)
	t.Logf("leader killed %s into step 0; the standby leads %s later", killed.Sub(held.StepStarted).Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond))

	var seen []string
	var stepOneAt time.Time
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		web, st, ok := stackCanary(t, stack)
		if !ok {
			t.Fatalf("the canary is gone after the takeover (web %s)", web)
		}
		s := fmt.Sprintf("%s/%d/%d", st.Phase, st.Step, st.Weight)
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		switch {
		case st.Phase == rollout.Progressing && st.Step == 0 && (st.Weight != 50 || !st.StepStarted.Equal(held.StepStarted)):
			t.Fatalf("step 0 began again after the takeover: %+v, it began at %s", st, held.StepStarted)
		case st.Phase == rollout.Progressing && web != "1":
			t.Fatalf("web left v1 before the promote: %s %+v", web, st)
		case st.Step == 1 && stepOneAt.IsZero():
			stepOneAt = time.Now()
		}
		return st.Phase == rollout.Completed && web == "2", fmt.Sprintf("web %s, canary %s", web, s)
	})
	t.Logf("states after the takeover: %v", seen)
	if !strings.Contains(strings.Join(seen, " "), "Progressing/1/100") {
		t.Errorf("the standby skipped step 1: %v", seen)
	}
	if early := held.StepStarted.Add(haRolloutPause).Sub(stepOneAt); early > 0 {
		t.Errorf("step 1 began %s before step 0's pause was over", early)
	}
	if code, _ := b.ctl.stop(syscall.SIGTERM, stopDeadline); code != 0 {
		t.Errorf("the new leader exited %d on SIGTERM", code)
	}
}

// haRoutedStack is web under a rollout that names Traefik, so the
// controllers serve a route for it; the first deploy routes all of it to
// the stable service.
const haRoutedStack = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ":8080"]
    stop_grace_period: 1s
    deploy: {replicas: 0}
    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 50, pause: 1m}
        router: {provider: traefik, rule: "Host(` + "`web.example`" + `)", port: 8080}
`

// routerConfig is what Traefik's poll of m gets: the status, and the
// error of any answer but 200.
func (m *haMember) routerConfig(t *testing.T) (int, api.Error) {
	t.Helper()
	resp, err := http.Get(m.url + "/api/v1/router/traefik")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	if resp.StatusCode != http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(&e)
	}
	return resp.StatusCode, e
}

// Traefik polls an HA pair through one address: only the leader may
// answer with routes. A standby, and a leader cut off from the swarm that
// lost the lease while still running, answer 503 naming the leader, so
// Traefik keeps the configuration the leader gave it.
func TestHAOnlyTheLeaderServesTheRouterConfiguration(t *testing.T) {
	t.Parallel()
	p := startHAPair(t, "harouter", haRoutedStack)
	a, b := p.a, p.b

	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		code, e := a.routerConfig(t)
		return code == http.StatusOK, fmt.Sprintf("the leader answered %d %+v", code, e)
	})
	if code, e := b.routerConfig(t); code != http.StatusServiceUnavailable || e.Code != api.CodeStandby || !strings.Contains(e.Message, a.id) {
		t.Fatalf("the standby answered the router %d %+v, want 503 standby naming %s", code, e, a.id)
	}

	// a keeps running but loses the swarm, and with it the lease.
	a.proxy.cut(true)
	b.waitRole(t, "leader", "", 4*haLease)
	if code, e := a.routerConfig(t); code != http.StatusServiceUnavailable || e.Code != api.CodeStandby {
		t.Fatalf("the cut-off former leader answered the router %d %+v, want 503 standby", code, e)
	}
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		code, e := b.routerConfig(t)
		return code == http.StatusOK, fmt.Sprintf("the new leader answered %d %+v", code, e)
	})
	a.proxy.cut(false)
	a.waitRole(t, "standby", b.id, 4*haLease)
	if code, e := a.routerConfig(t); code != http.StatusServiceUnavailable || e.Code != api.CodeStandby || !strings.Contains(e.Message, b.id) {
		t.Fatalf("the former leader, standing by, answered the router %d %+v, want 503 standby naming %s", code, e, b.id)
	}
	for _, m := range []*haMember{a, b} {
		if code, _ := m.ctl.stop(syscall.SIGTERM, stopDeadline); code != 0 {
			t.Errorf("%s exited %d on SIGTERM", m.id, code)
		}
	}
}

// An operator's command lives in the leader's memory until a pass takes
// it. When the leader loses the lease first, the command is gone: the new
// leader never had it and the old one forgets it. `--wait` must then fail
// and say so, not exit 0 with the rollout as it was.
func TestARolloutCommandLostToALeaderChangeFailsItsWait(t *testing.T) {
	t.Parallel()
	// A pause no test run outlasts: nothing moves the rollout but a command.
	stackV := strings.ReplaceAll(haRolloutStack, "pause: 25s", "pause: 30m")
	p := startHAPair(t, "halost", fmt.Sprintf(stackV, "1"))
	stack, a, b := p.stack, p.a, p.b
	p.commit(t, fmt.Sprintf(stackV, "2"))
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		web, st, _ := stackCanary(t, stack)
		return st.Phase == rollout.Progressing && st.Weight == 50 && !st.StepStarted.IsZero(), fmt.Sprintf("web %s, canary %+v", web, st)
	})

	// The leader is cut off from the swarm, so the pass the abort makes
	// due waits on its read of the swarm until the lease is lost.
	a.proxy.cut(true)
	cmd := exec.Command(flotillaBinary(t), "app", "rollout", "abort", stack, "--wait", "2m")
	cmd.Env = append(os.Environ(), "FLOTILLA_SERVER="+a.url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("abort --wait: %v, want exit 1\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "is not aborted (phase Progressing") || !strings.Contains(msg, "its leader changed") {
		t.Fatalf("abort --wait said:\n%s\nwant that the rollout is not aborted and why", msg)
	}
	if stdout.Len() != 0 {
		t.Errorf("abort --wait printed the rollout as if deployed:\n%s", stdout.String())
	}
	b.waitRole(t, "leader", "", 4*haLease)
	if _, st, _ := stackCanary(t, stack); st.Phase != rollout.Progressing {
		t.Fatalf("the canary is %s: the lost abort was deployed after all", st.Phase)
	}
	a.proxy.cut(false)
}
