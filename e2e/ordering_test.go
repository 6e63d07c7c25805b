package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

const threeWaves = `version: "3.8"
services:
  db:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    networks: [back]
    x-flotilla: {wave: 0}
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    networks: [back, front]
    x-flotilla: {wave: 1}
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    networks: [front]
    x-flotilla: {wave: 2}
networks:
  back: {}
  front: {}
`

// orderedHarness is an automated application whose syncs wait at most
// timeout for a wave or a hook.
func orderedHarness(t *testing.T, timeout time.Duration) *harness {
	h := newHarness(t, true)
	h.app.SyncPolicy.Wait = &application.Wait{Timeout: application.Duration{Duration: timeout}}
	return h
}

// tasksOf returns every task of the stack's service (unscoped), newest
// first.
func tasksOf(t *testing.T, stack, service string) []swarm.Task {
	t.Helper()
	tasks, err := tryTasksOf(t, stack, service)
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

func tryTasksOf(t *testing.T, stack, service string) ([]swarm.Task, error) {
	tasks, err := swarmtest.Client(t).TaskList(context.Background(), client.TaskListOptions{
		Filters: make(client.Filters).Add("service", stack+"_"+service),
	})
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(tasks.Items); i++ {
		for j := i; j > 0 && tasks.Items[j].CreatedAt.After(tasks.Items[j-1].CreatedAt); j-- {
			tasks.Items[j], tasks.Items[j-1] = tasks.Items[j-1], tasks.Items[j]
		}
	}
	return tasks.Items, nil
}

// runningSince is when the service's oldest task still running reached
// running: by then the service was Healthy.
func runningSince(t *testing.T, stack, service string) time.Time {
	t.Helper()
	var at time.Time
	for _, task := range tasksOf(t, stack, service) {
		if task.Status.State == swarm.TaskStateRunning && (at.IsZero() || task.Status.Timestamp.Before(at)) {
			at = task.Status.Timestamp
		}
	}
	if at.IsZero() {
		t.Fatalf("%s has no running task", service)
	}
	return at
}

func TestThreeWavesAreCreatedEachAfterTheOneBeforeIsHealthy(t *testing.T) {
	t.Parallel()
	h := orderedHarness(t, 90*time.Second)
	h.repo.Commit("waves", map[string]string{"deploy/docker-compose.yml": threeWaves, "deploy/.env": "# none\n"})
	res := h.reconcile(h.controller(false))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	svcs := h.services()
	for _, pair := range [][2]string{{"db", "api"}, {"api", "web"}} {
		healthy := runningSince(t, h.app.Stack, pair[0])
		created := svcs[pair[1]].CreatedAt
		if created.Before(healthy) {
			t.Errorf("%s was created at %s, before %s ran (%s)", pair[1], created.Format(time.StampMilli), pair[0], healthy.Format(time.StampMilli))
		}
	}
	for _, s := range svcs {
		for k := range s.Spec.Labels {
			if strings.Contains(k, "x-flotilla") || strings.Contains(k, "wave") {
				t.Errorf("%s carries label %s", s.Spec.Name, k)
			}
		}
	}
}

func TestAWaveZeroServiceThatCannotStartStopsTheSyncBeforeWaveOne(t *testing.T) {
	t.Parallel()
	h := orderedHarness(t, 15*time.Second)
	broken := strings.Replace(threeWaves, "  db:\n    image: flotilla-test/app:1", "  db:\n    image: flotilla-test/never-built:1", 1)
	h.repo.Commit("waves", map[string]string{"deploy/docker-compose.yml": broken, "deploy/.env": "# none\n"})
	res := h.reconcile(h.controller(false))
	if res.Err == nil || !strings.Contains(res.Err.Error(), "wave 0, service db") {
		t.Fatalf("sync error %v, want one naming wave 0 and service db", res.Err)
	}
	if !strings.Contains(res.Status.LastError, "wave 0, service db") || !strings.Contains(res.Status.LastError, "wave(s) 1, 2 not written") {
		t.Errorf("status error %q", res.Status.LastError)
	}
	svcs := h.services()
	if _, ok := svcs["db"]; !ok || len(svcs) != 1 {
		t.Errorf("services on the swarm %v, want only db", keys(svcs))
	}
}

const migrations = `version: "3.8"
services:
  migrate:
    image: flotilla-test/app:1
    command: ["exit", "0"]
    environment:
      ZZ_MIGRATION: "MIGRATION_STEP"
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync}
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment:
      APP_MESSAGE: API_VERSION
    x-flotilla: {wave: 0}
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    x-flotilla: {wave: 1}
  smoke:
    image: flotilla-test/app:1
    command: ["exit", "0"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PostSync}
`

func migrationFiles(step, version, code string) map[string]string {
	c := strings.NewReplacer("MIGRATION_STEP", step, "API_VERSION", version).Replace(migrations)
	c = strings.Replace(c, `command: ["exit", "0"]`, `command: ["exit", "`+code+`"]`, 1)
	return map[string]string{"deploy/docker-compose.yml": c, "deploy/.env": "# none\n"}
}

// completedAt is when the job's newest task completed.
func completedAt(t *testing.T, stack, job string) time.Time {
	t.Helper()
	tasks := tasksOf(t, stack, job)
	if len(tasks) == 0 || tasks[0].Status.State != swarm.TaskStateComplete {
		t.Fatalf("%s has not completed: %d tasks", job, len(tasks))
	}
	return tasks[0].Status.Timestamp
}

func TestAPreSyncMigrationRunsBeforeTheAPIOncePerRevisionAndPostSyncAfterEveryWave(t *testing.T) {
	t.Parallel()
	h := orderedHarness(t, 90*time.Second)
	h.repo.Commit("v1", migrationFiles("step 1", "v1", "0"))
	ctl := h.controller(false)
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	svcs := h.services()
	if migrated := completedAt(t, h.app.Stack, "migrate"); svcs["api"].CreatedAt.Before(migrated) {
		t.Errorf("api created at %s, before the migration completed at %s", svcs["api"].CreatedAt, migrated)
	}
	if ran := runningSince(t, h.app.Stack, "web"); svcs["smoke"].CreatedAt.Before(ran) {
		t.Errorf("the PostSync job was created at %s, before the last wave ran (%s)", svcs["smoke"].CreatedAt, ran)
	}
	for _, s := range res.Status.Services {
		if s.Name == "migrate" || s.Name == "smoke" {
			t.Errorf("hook %s is reported as a service of the stack", s.Name)
		}
	}

	// Unchanged passes, and a restarted controller, run no hook again and
	// report no drift for the finished jobs.
	before := h.services()["migrate"]
	for _, c := range []*reconcile.Controller{ctl, h.controller(true)} {
		res = h.reconcile(c)
		if res.Err != nil || res.Deployed != nil || len(res.Status.Drift) != 0 {
			t.Fatalf("unchanged pass: err %v, deployed %+v, drift %v", res.Err, res.Deployed, res.Status.Drift)
		}
	}
	if after := h.services()["migrate"]; after.ID != before.ID || after.Version.Index != before.Version.Index || len(tasksOf(t, h.app.Stack, "migrate")) != 1 {
		t.Fatalf("the migration ran again on an unchanged pass")
	}

	// A new revision runs its migration before the API is updated.
	h.repo.Commit("v2", migrationFiles("step 2", "v2", "0"))
	if res = h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	api := h.services()["api"]
	if migrated := completedAt(t, h.app.Stack, "migrate"); api.UpdatedAt.Before(migrated) {
		t.Errorf("api updated at %s, before the v2 migration completed at %s", api.UpdatedAt, migrated)
	}

	// A failing migration leaves the API as it was and says why.
	h.repo.Commit("v3", migrationFiles("step 3 refused: column exists", "v3", "3"))
	res = h.reconcile(ctl)
	if res.Err == nil {
		t.Fatal("the sync succeeded with a failing PreSync hook")
	}
	for _, want := range []string{"PreSync hook migrate failed", "step 3 refused: column exists"} {
		if !strings.Contains(res.Status.LastError, want) {
			t.Errorf("status error does not show %q:\n%s", want, res.Status.LastError)
		}
	}
	if now := h.services()["api"]; now.Version.Index != api.Version.Index || !strings.Contains(strings.Join(now.Spec.TaskTemplate.ContainerSpec.Env, " "), "APP_MESSAGE=v2") {
		t.Errorf("the API was written after its migration failed: %v", now.Spec.TaskTemplate.ContainerSpec.Env)
	}
}

// hookThatWaits is a PreSync job that runs until it is sent SIGTERM (the
// test image's default command), so a test decides when it completes.
const hookThatWaits = `version: "3.8"
services:
  migrate:
    image: flotilla-test/app:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync}
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
`

func TestAControllerKilledWhileAHookRunsDoesNotRunItAgainAndFinishesTheSync(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "hookkill")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": hookThatWaits})
	apps := shutdownApps(t, stack, repo.Dir, "      wait: {timeout: 3m}\n")
	c := startController(t, apps, stack, nil, "--listen", "")
	var job swarm.Task
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		tasks, err := tryTasksOf(t, stack, "migrate")
		if err != nil || len(tasks) == 0 || tasks[0].Status.State != swarm.TaskStateRunning {
			return false, fmt.Sprint("no running migrate task: ", err)
		}
		job = tasks[0]
		return true, ""
	})
	// However the test ends, the job is let go so its stack can be removed.
	t.Cleanup(func() {
		_, _ = swarmtest.Client(t).ContainerKill(context.Background(), job.Status.ContainerStatus.ContainerID, client.ContainerKillOptions{Signal: "TERM"})
	})
	c.stop(syscall.SIGKILL, 10*time.Second)
	if _, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_api", client.ServiceInspectOptions{}); err == nil {
		t.Fatal("api was written while its PreSync hook ran")
	}

	c2 := startController(t, apps, stack, nil, "--listen", "")
	c2.waitLog("hook is still running for this revision; waiting for it", 60*time.Second)
	if _, err := swarmtest.Client(t).ContainerKill(context.Background(), job.Status.ContainerStatus.ContainerID, client.ContainerKillOptions{Signal: "TERM"}); err != nil {
		t.Fatal(err)
	}
	c2.waitLog("deployed revision", 90*time.Second)
	tasks := tasksOf(t, stack, "migrate")
	if len(tasks) != 1 || tasks[0].ID != job.ID || tasks[0].Status.State != swarm.TaskStateComplete {
		t.Fatalf("migrate tasks after the restart: %d (first %s %s), want the one task that ran before, completed", len(tasks), tasks[0].ID, tasks[0].Status.State)
	}
	if strings.Contains(c2.logs.String(), "hook started") {
		t.Error("the restarted controller started the hook again")
	}
	if _, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_api", client.ServiceInspectOptions{}); err != nil {
		t.Errorf("api after the sync finished: %v", err)
	}
}

const degradable = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment:
      APP_MESSAGE: VERSION
`

func TestADegradedSyncIsRolledBackToThePreviousRevisionAndPinned(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Interval.Duration = application.MinInterval
	h.app.SyncPolicy.Rollback = &application.Rollback{OnDegraded: application.Duration{Duration: 3 * time.Second}}
	files := func(version, command string) map[string]string {
		c := strings.Replace(degradable, "VERSION", version, 1)
		if command != "" {
			c = strings.Replace(c, "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    command: "+command+"\n", 1)
		}
		return map[string]string{"deploy/docker-compose.yml": c, "deploy/.env": "# none\n"}
	}
	h.repo.Commit("v1", files("v1", ""))
	ctl := h.controller(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		st, _ := ctl.Status(h.app.Name)
		return st.LastAppliedRevision == 1 && st.Health == application.Healthy, fmt.Sprintf("%+v", st.Health)
	})

	bad := h.repo.Commit("v2 crashes", files("v2", `["exit", "3"]`))
	if err := ctl.Refresh(h.app.Name); err != nil {
		t.Fatal(err)
	}
	var st application.Status
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		st, _ = ctl.Status(h.app.Name)
		return st.LastAppliedRevision == 3 && st.Pinned != "", fmt.Sprintf("revision %d health %s pinned %q error %q", st.LastAppliedRevision, st.Health, st.Pinned, st.LastError)
	})
	if !strings.Contains(st.Pinned, "automatically: Degraded for 3s after revision 2") {
		t.Errorf("pinned %q does not say why", st.Pinned)
	}
	rs, err := h.backend.Releases(context.Background(), h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].PinnedCommit != bad || !strings.Contains(rs[0].Manifest, "v1") || strings.Contains(rs[0].Manifest, "exit") {
		t.Errorf("newest record %d pins %s: want revision 1's manifest pinned to the bad commit", rs[0].Revision, rs[0].PinnedCommit)
	}
	env := strings.Join(h.services()["api"].Spec.TaskTemplate.ContainerSpec.Env, " ")
	if !strings.Contains(env, "APP_MESSAGE=v1") {
		t.Errorf("api runs %s, want v1 back", env)
	}
	// Pinned until the next commit: the controller stays there.
	time.Sleep(2 * application.MinInterval)
	if st, _ = ctl.Status(h.app.Name); st.LastAppliedRevision != 3 || st.Pinned == "" {
		t.Errorf("after the rollback: revision %d, pinned %q", st.LastAppliedRevision, st.Pinned)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestAHookJobIsRefusedByTheGuardsLikeAnyOtherService(t *testing.T) {
	t.Parallel()
	h := orderedHarness(t, 30*time.Second)
	withSocket := strings.Replace(migrations, "    deploy: {mode: replicated-job}\n    x-flotilla: {hook: PreSync}\n",
		"    volumes: [\"/var/run/docker.sock:/var/run/docker.sock\"]\n    deploy: {mode: replicated-job}\n    x-flotilla: {hook: PreSync}\n", 1)
	h.repo.Commit("socket", map[string]string{"deploy/docker-compose.yml": withSocket, "deploy/.env": "# none\n"})
	res := h.reconcile(h.controller(false))
	if res.Err == nil || !strings.Contains(res.Err.Error(), "PreSync hook migrate") || !strings.Contains(res.Err.Error(), "docker.sock") {
		t.Fatalf("sync error %v, want the hook refused for binding the docker socket", res.Err)
	}
	if svcs := h.services(); len(svcs) != 0 {
		t.Errorf("services written after the hook was refused: %v", keys(svcs))
	}
}

const deletePolicies = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
  smoke:
    image: flotilla-test/app:1
    command: ["exit", "0"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PostSync, deletePolicy: HookSucceeded}
`

func TestHookJobsAreRemovedAsTheirDeletePolicySays(t *testing.T) {
	t.Parallel()
	h := orderedHarness(t, 60*time.Second)
	h.repo.Commit("v1", map[string]string{"deploy/docker-compose.yml": deletePolicies, "deploy/.env": "# none\n"})
	ctl := h.controller(false)
	res := h.reconcile(ctl)
	if res.Err != nil || res.Revision != 1 {
		t.Fatalf("sync: %v, revision %d", res.Err, res.Revision)
	}
	if _, ok := h.services()["smoke"]; ok {
		t.Error("the HookSucceeded job is still there after its sync was recorded")
	}
	if res = h.reconcile(ctl); res.Err != nil || res.Deployed != nil {
		t.Fatalf("unchanged pass: %v, %+v", res.Err, res.Deployed)
	}
	if _, ok := h.services()["smoke"]; ok {
		t.Error("an unchanged pass ran the removed hook again")
	}

	failing := strings.Replace(deletePolicies, `command: ["exit", "0"]`, `command: ["exit", "4"]`, 1)
	failing = strings.Replace(failing, "hook: PostSync, deletePolicy: HookSucceeded", "hook: PreSync, deletePolicy: HookFailed", 1)
	h.repo.Commit("v2", map[string]string{"deploy/docker-compose.yml": failing, "deploy/.env": "# none\n"})
	res = h.reconcile(ctl)
	if res.Err == nil || !strings.Contains(res.Status.LastError, "non-zero exit (4)") || !strings.Contains(res.Status.LastError, `app: args ["exit" "4"]`) {
		t.Fatalf("sync of a failing hook: %v", res.Status.LastError)
	}
	if _, ok := h.services()["smoke"]; ok {
		t.Error("the HookFailed job is still there after it failed")
	}
}

// slowWaves has a wave-0 service whose first healthcheck passes only after
// about fifteen seconds, so a controller can be killed while it waits.
const slowWaves = `version: "3.8"
services:
  db:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    healthcheck:
      test: ["CMD", "/app", "healthcheck"]
      interval: 15s
      timeout: 2s
    x-flotilla: {wave: 0}
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    x-flotilla: {wave: 1}
`

func TestAControllerKilledWhileAWaveWaitsResumesWithoutRewritingIt(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "wavekill")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": slowWaves})
	apps := shutdownApps(t, stack, repo.Dir, "      wait: {timeout: 3m}\n")
	c := startController(t, apps, stack, nil, "--listen", "")
	c.waitLog("wave applied", 60*time.Second)
	c.stop(syscall.SIGKILL, 10*time.Second)
	api := swarmtest.Client(t)
	db, err := api.ServiceInspect(context.Background(), stack+"_db", client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.ServiceInspect(context.Background(), stack+"_api", client.ServiceInspectOptions{}); err == nil {
		t.Fatal("wave 1 was written before wave 0 was Healthy")
	}

	c2 := startController(t, apps, stack, nil, "--listen", "")
	c2.waitLog("deployed revision", 120*time.Second)
	after, err := api.ServiceInspect(context.Background(), stack+"_db", client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Not UpdatedAt: Swarm's allocator updates a new service itself (its
	// endpoint) moments after the create, so a read right after the kill
	// can see the time before that. A write of the spec by the restarted
	// controller would change the spec or leave a PreviousSpec.
	if after.Service.ID != db.Service.ID || after.Service.PreviousSpec != nil || !reflect.DeepEqual(after.Service.Spec, db.Service.Spec) || after.Service.Spec.Labels["io.flotilla.revision"] != "1" {
		t.Errorf("db was rewritten after the restart: version %d (was %d), previous spec %v", after.Service.Version.Index, db.Service.Version.Index, after.Service.PreviousSpec != nil)
	}
	if tasks := tasksOf(t, stack, "db"); len(tasks) != 1 {
		var seen []string
		for _, task := range tasks {
			seen = append(seen, fmt.Sprintf("%s %s (%s%s) v%d", task.ID, task.Status.State, task.Status.Message, task.Status.Err, task.Version.Index))
		}
		t.Errorf("db has %d tasks, want the one that was starting when the controller was killed: %v (service version %d, was %d)", len(tasks), seen, after.Service.Version.Index, db.Service.Version.Index)
	}
	apiSvc, err := api.ServiceInspect(context.Background(), stack+"_api", client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if healthy := runningSince(t, stack, "db"); apiSvc.Service.CreatedAt.Before(healthy) {
		t.Errorf("api created at %s, before db ran (%s)", apiSvc.Service.CreatedAt, healthy)
	}
}
