package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// orderedApps writes an applications file with one automated application
// on stack that checks git every 10s, with extra lines for its syncPolicy.
func orderedApps(t *testing.T, stack, repoDir, syncPolicyExtra string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "applications.yaml")
	body := fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source:
      repoURL: %[2]s
      revision: main
      path: deploy
    stack: %[1]s
    syncPolicy:
      automated: {}
      interval: 10s
%[3]s`, stack, repoDir, syncPolicyExtra)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// apiController starts the built controller with its API on a loopback
// port and returns a CLI that talks to it.
func apiController(t *testing.T, appsFile, id string) (*stoppable, cli) {
	t.Helper()
	addr := freeAddr(t)
	const token = "e2e-hooks-admin-token-0123456789"
	c := startController(t, appsFile, id, []string{"FLOTILLA_ADMIN_TOKEN=" + token}, "--listen", addr)
	server := "http://" + addr
	return c, cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + token}}
}

// tryStatus is `flotilla app get NAME -o json`, or false while the API is
// not up yet.
func (c cli) tryStatus(name string) (application.Status, bool) {
	var st application.Status
	out, code := c.run("app", "get", name, "-o", "json")
	if code != 0 {
		return st, false
	}
	if err := jsonUnmarshal(out, &st); err != nil {
		c.t.Fatalf("app get: %v\n%s", err, out)
	}
	return st, true
}

func hookByName(st application.Status, name string) (application.HookStatus, bool) {
	for _, h := range st.Hooks {
		if h.Name == name {
			return h, true
		}
	}
	return application.HookStatus{}, false
}

const hookWavesStack = `version: "3.8"
services:
  migrate:
    image: flotilla-test/app:1
    command: ["exit", "MIGRATE_EXIT"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync, wave: 0}
  seed:
    image: flotilla-test/app:1
    command: ["exit", "0"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync, wave: 1}
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
`

func TestPreSyncHooksRunWaveByWaveAndAFailedWaveZeroKeepsWaveOneUncreated(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "hookwaves")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	commit := func(msg, exit string) {
		repo.Commit(msg, map[string]string{"deploy/docker-compose.yml": strings.Replace(hookWavesStack, "MIGRATE_EXIT", exit, 1)})
	}
	commit("migration fails", "3")
	_, c := apiController(t, orderedApps(t, stack, repo.Dir, "      wait: {timeout: 90s}\n"), "e2e-"+stack)
	docker := swarmtest.Client(t)
	exists := func(service string) bool {
		_, err := docker.ServiceInspect(context.Background(), stack+"_"+service, client.ServiceInspectOptions{})
		return err == nil
	}

	// The wave-0 hook fails: wave 1's job is never created, nor the API,
	// and the status says so hook by hook.
	var st application.Status
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		var ok bool
		st, ok = c.tryStatus(stack)
		h, _ := hookByName(st, "migrate")
		// LastError is set once the pass that ran it has ended.
		return ok && h.State == application.HookFailed && st.LastError != "", fmt.Sprintf("hooks %+v, error %q", st.Hooks, st.LastError)
	})
	migrate, _ := hookByName(st, "migrate")
	seed, ok := hookByName(st, "seed")
	if !ok || seed.State != application.HookSkipped || seed.Wave != 1 || !strings.Contains(seed.Message, "PreSync hook migrate failed") {
		t.Errorf("seed %+v, want Skipped in wave 1 because migrate failed", seed)
	}
	if migrate.Phase != "PreSync" || migrate.Wave != 0 || migrate.Revision != 1 || migrate.ExitCode == nil || *migrate.ExitCode != 3 ||
		migrate.StartedAt.IsZero() || migrate.FinishedAt.Before(migrate.StartedAt) {
		t.Errorf("migrate %+v, want PreSync wave 0 revision 1, exit code 3, started before it finished", migrate)
	}
	if !strings.Contains(strings.Join(migrate.LogTail, "\n"), `"exit" "3"`) {
		t.Errorf("migrate's log tail %q lacks its own output", migrate.LogTail)
	}
	if !strings.Contains(st.LastError, "later PreSync hook(s) seed not created") {
		t.Errorf("last error %q", st.LastError)
	}
	if exists("seed") || exists("api") {
		t.Fatalf("seed exists %v, api exists %v after the wave-0 hook failed; want neither", exists("seed"), exists("api"))
	}
	table, code := c.run("app", "get", stack)
	if code != 0 || !strings.Contains(table, "HOOK") || !regexpMatch(`(?m)^migrate\s+PreSync\s+0\s+Failed\s+1\s+3\s`, table) ||
		!regexpMatch(`(?m)^seed\s+PreSync\s+1\s+Skipped\s`, table) {
		t.Errorf("app get does not show the hooks:\n%s", table)
	}

	// Fixed: the next commit runs wave 0, and only once it has completed
	// is wave 1's job created.
	commit("migration fixed", "0")
	swarmtest.Eventually(t, 5*time.Minute, func() (bool, string) {
		st, _ = c.tryStatus(stack)
		s, _ := hookByName(st, "seed")
		return st.LastAppliedRevision == 1 && s.State == application.HookSucceeded, fmt.Sprintf("revision %d hooks %+v error %q", st.LastAppliedRevision, st.Hooks, st.LastError)
	})
	migrated := completedAt(t, stack, "migrate")
	seedSvc, err := docker.ServiceInspect(context.Background(), stack+"_seed", client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if seedSvc.Service.CreatedAt.Before(migrated) {
		t.Errorf("seed's job was created at %s, before migrate completed at %s", seedSvc.Service.CreatedAt.Format(time.StampMilli), migrated.Format(time.StampMilli))
	}
	if apiSvc, err := docker.ServiceInspect(context.Background(), stack+"_api", client.ServiceInspectOptions{}); err != nil || apiSvc.Service.CreatedAt.Before(completedAt(t, stack, "seed")) {
		t.Errorf("api created before the wave-1 hook completed (%v)", err)
	}
	for _, name := range []string{"migrate", "seed"} {
		h, _ := hookByName(st, name)
		if h.State != application.HookSucceeded || h.ExitCode == nil || *h.ExitCode != 0 || h.Revision != 1 || len(h.LogTail) != 0 {
			t.Errorf("%s %+v, want Succeeded with exit code 0 for revision 1 and no log tail", name, h)
		}
	}
}

const crashesOnUpdate = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy:
      restart_policy: {delay: 2s}
      update_config: {monitor: 2m}
    environment:
      APP_MESSAGE: VERSION
`

func TestARestartedControllerRollsBackAtTheOriginalDeadlineNotAFullPeriodAfterItsStart(t *testing.T) {
	t.Parallel()
	const onDegraded = time.Minute
	stack := swarmtest.Name(t, "rbrestart")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	files := func(version string) map[string]string {
		return map[string]string{"deploy/docker-compose.yml": strings.Replace(crashesOnUpdate, "VERSION", version, 1)}
	}
	repo.Commit("v1", files("v1"))
	apps := orderedApps(t, stack, repo.Dir, "      rollback: {onDegraded: 1m}\n")
	id := "e2e-" + stack
	c1 := startController(t, apps, id, nil, "--listen", "")
	c1.waitLog("deployed revision", 3*time.Minute)
	b, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	docker := swarmtest.Client(t)

	// Revision 2's task crashes once it runs, within the update's monitor:
	// Swarm pauses the update of api, and the swarm keeps since when. (A
	// task that exits at once can fail before Swarm's updater has marked it
	// as its own, and the update then completes; the kill makes the crash
	// come after.)
	repo.Commit("v2 crashes", files("v2"))
	var task swarm.Task
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		tasks, err := tryTasksOf(t, stack, "api")
		if err != nil {
			return false, err.Error()
		}
		for _, tk := range tasks {
			if tk.Status.State == swarm.TaskStateRunning && tk.Status.ContainerStatus != nil &&
				slices.Contains(tk.Spec.ContainerSpec.Env, "APP_MESSAGE=v2") {
				task = tk
				return true, ""
			}
		}
		return false, fmt.Sprintf("no running v2 task among %d", len(tasks))
	})
	if _, err := docker.ContainerKill(context.Background(), task.Status.ContainerStatus.ContainerID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	var paused swarm.Service
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		s, err := docker.ServiceInspect(context.Background(), stack+"_api", client.ServiceInspectOptions{})
		if err != nil {
			return false, err.Error()
		}
		paused = s.Service
		return s.Service.Spec.Labels["io.flotilla.revision"] == "2" && s.Service.UpdateStatus != nil && s.Service.UpdateStatus.State == swarm.UpdateStatePaused,
			fmt.Sprintf("revision %s update %+v", s.Service.Spec.Labels["io.flotilla.revision"], s.Service.UpdateStatus)
	})
	pausedAt := paused.UpdatedAt

	// Part-way through the period the controller is killed and started
	// again, with no memory of the clock.
	time.Sleep(time.Until(pausedAt.Add(onDegraded / 2)))
	c1.stop(syscall.SIGKILL, 10*time.Second)
	if rs, err := b.Releases(context.Background(), stack); err != nil || len(rs) == 0 || rs[0].Revision != 2 {
		t.Fatalf("before the restart the newest record is %+v (%v), want revision 2", rs, err)
	}
	restarted := time.Now()
	c2 := startController(t, apps, id, nil, "--listen", "")
	c2.waitLog("rolling back", 4*time.Minute)
	c2.waitLog("deployed revision", 2*time.Minute)
	rs, err := b.Releases(context.Background(), stack)
	if err != nil || len(rs) == 0 || rs[0].Revision != 3 || !strings.Contains(rs[0].Trigger, "automatically") {
		t.Fatalf("records %+v (%v), want revision 3, the automatic rollback", rs, err)
	}
	rolledBack := rs[0].Time
	t.Logf("update paused at %s, controller restarted at %s, rollback recorded at %s (deadline %s)", pausedAt.Format(time.StampMilli),
		restarted.Format(time.StampMilli), rolledBack.Format(time.StampMilli), pausedAt.Add(onDegraded).Format(time.StampMilli))
	// Never before the deadline (a second for the daemon's clock against
	// ours), and well before a full period after the restart, which is where
	// a clock kept in memory only puts it.
	if rolledBack.Before(pausedAt.Add(onDegraded - time.Second)) {
		t.Errorf("rolled back at %s, before the deadline %s", rolledBack, pausedAt.Add(onDegraded))
	}
	if late := restarted.Add(onDegraded); !rolledBack.Before(late) {
		t.Errorf("rolled back at %s, not before %s: the restarted controller counted the period again from its start", rolledBack, late)
	}
	// The restarted controller counted from the moment Swarm paused the
	// update, which it read from the swarm.
	m := regexp.MustCompile(`rolling back.* degradedSince=(\S+)`).FindStringSubmatch(c2.logs.String())
	if m == nil {
		t.Fatal("the rollback's log line does not say since when the application was Degraded")
	}
	since, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil || since.Before(pausedAt.Add(-time.Second)) || since.After(pausedAt.Add(5*time.Second)) {
		t.Errorf("the restarted controller counted from %s (%v), want the pause at %s", m[1], err, pausedAt.Format(time.StampMilli))
	}
	if env := strings.Join(mustService(t, stack, "api").Spec.TaskTemplate.ContainerSpec.Env, " "); !strings.Contains(env, "APP_MESSAGE=v1") {
		t.Errorf("api runs %s after the rollback, want v1", env)
	}
}

func mustService(t *testing.T, stack, name string) swarm.Service {
	t.Helper()
	s, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_"+name, client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Service
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
