package e2e

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const stackFile = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ":8080"]
    environment:
      APP_MESSAGE: ${GREETING}
    networks: [back]
    configs: [{source: web_conf, target: /etc/web.conf}]
    secrets: [api_token]
    stop_grace_period: 1s
  worker:
    image: flotilla-test/app:1
    environment:
      QUEUE: jobs
    networks: [back]
    secrets: [api_token]
    stop_grace_period: 1s
  cron:
    image: flotilla-test/app:1
    networks: [back]
    stop_grace_period: 1s
networks:
  back:
    driver: overlay
configs:
  web_conf:
    file: ./web.conf
secrets:
  api_token:
    file: ./token.txt
`

func files(compose string) map[string]string {
	return map[string]string{
		"deploy/docker-compose.yml": compose,
		"deploy/.env":               "GREETING=hello\n",
		"deploy/web.conf":           "listen 8080\n",
		"deploy/token.txt":          "s3cr3t-token-value\n",
	}
}

// harness is one application on one stack with a real fetcher and backend.
// Each harness has its own controller id: tests run side by side on one
// swarm, and a controller that prunes orphans would otherwise take the
// stacks of every other test's application as its own.
type harness struct {
	id      string
	t       *testing.T
	repo    *gittest.Repo
	backend *backend.Backend
	app     application.Application
	cache   string
}

func newHarness(t *testing.T, automated bool) *harness {
	t.Helper()
	stack := swarmtest.Name(t, "e2e")
	swarmtest.Cleanup(t, stack)
	b, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	repo := gittest.New(t)
	app := application.Application{
		Name:  stack,
		Stack: stack,
		Source: application.Source{
			RepoURL:  repo.Dir,
			Revision: "main",
			Path:     "deploy",
			Compose:  application.Compose{EnvFiles: []string{".env"}},
		},
		History: 10,
	}
	app.SyncPolicy.Interval.Duration = time.Minute
	if automated {
		app.SyncPolicy.Automated = &application.Automated{}
	}
	return &harness{id: "e2e-" + stack, t: t, repo: repo, backend: b, app: app, cache: t.TempDir()}
}

func (h *harness) controllerFetcher() *source.Fetcher {
	return source.New(source.Options{CacheDir: filepath.Join(h.t.TempDir(), "git"), Logger: quiet})
}

// running returns an automated application whose stack (stackFile) has
// been deployed and runs, with the controller that deployed it.
func running(t *testing.T) (*harness, *reconcile.Controller) {
	t.Helper()
	h := newHarness(t, true)
	h.repo.Commit("initial", files(stackFile))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(3)
	return h, ctl
}

// controller starts a fresh controller, as after a restart: new process
// memory and, when fresh is set, an empty git cache.
func (h *harness) controller(fresh bool) *reconcile.Controller {
	h.t.Helper()
	cache := h.cache
	if fresh {
		cache = h.t.TempDir()
	}
	c, err := reconcile.New(reconcile.Options{
		ControllerID: h.id,
		Backend:      h.backend,
		Fetcher:      source.New(source.Options{CacheDir: filepath.Join(cache, "git"), Logger: quiet}),
		Logger:       quiet,
	}, []application.Application{h.app})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) reconcile(c *reconcile.Controller) reconcile.Result {
	h.t.Helper()
	res, err := c.Reconcile(context.Background(), h.app.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// services returns the stack's live services by unscoped name.
func (h *harness) services() map[string]swarm.Service {
	h.t.Helper()
	live, err := h.backend.LiveServices(context.Background(), h.app.Stack)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]swarm.Service{}
	for name, s := range live {
		out[strings.TrimPrefix(name, h.app.Stack+"_")] = s
	}
	return out
}

func versions(svcs map[string]swarm.Service) map[string]uint64 {
	out := map[string]uint64{}
	for n, s := range svcs {
		out[n] = s.Version.Index
	}
	return out
}

// taskIDs returns the ids of the running tasks of each service.
func (h *harness) taskIDs() map[string][]string {
	h.t.Helper()
	c := swarmtest.Client(h.t)
	tasks, err := c.TaskList(context.Background(), client.TaskListOptions{
		Filters: make(client.Filters).Add("label", "com.docker.stack.namespace="+h.app.Stack).Add("desired-state", "running"),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	byID := map[string]string{}
	for n, s := range h.services() {
		byID[s.ID] = n
	}
	out := map[string][]string{}
	for _, t := range tasks.Items {
		out[byID[t.ServiceID]] = append(out[byID[t.ServiceID]], t.ID)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// waitRunning waits until every declared service runs all its tasks.
func (h *harness) waitRunning(want int) {
	h.t.Helper()
	swarmtest.Eventually(h.t, 90*time.Second, func() (bool, string) {
		states, err := h.backend.ReadStackServices(context.Background(), h.app.Stack)
		if err != nil {
			return false, err.Error()
		}
		if len(states) != want {
			return false, "services: " + strconv.Itoa(len(states))
		}
		return swarmtest.Settled(states)
	})
}

func TestStackFollowsGitCommitByCommit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("initial", files(stackFile))
	ctl := h.controller(false)

	// A stack with three services, an overlay network, a config and a
	// secret deploys from the repository and runs.
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatalf("first pass: %v", res.Err)
	}
	if res.Action != charts.Install || res.Revision != 1 {
		t.Fatalf("first pass: action %s, revision %d", res.Action, res.Revision)
	}
	h.waitRunning(3)
	svcs := h.services()
	for _, n := range []string{"web", "worker", "cron"} {
		s, ok := svcs[n]
		if !ok {
			t.Fatalf("service %s missing", n)
		}
		if got := s.Spec.Labels["io.flotilla.owner"]; got != h.id+"/"+h.app.Name {
			t.Fatalf("%s owner label %q", n, got)
		}
		if _, inTask := s.Spec.TaskTemplate.ContainerSpec.Labels["io.flotilla.owner"]; inTask {
			t.Fatalf("%s: flotilla metadata in the task template", n)
		}
	}

	// A pass over the unchanged repository writes nothing.
	before, beforeStats := versions(h.services()), h.backend.Stats()
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("unchanged pass: %+v", res)
	}
	if d := h.backend.Stats().Sub(beforeStats); d.Writes != 0 {
		t.Fatalf("unchanged pass wrote: %+v", d.Requests)
	}
	if after := versions(h.services()); !maps.Equal(before, after) {
		t.Fatalf("versions moved: %v → %v", before, after)
	}
	if res.Status.Sync != application.Synced {
		t.Fatalf("status: %+v", res.Status)
	}

	// A commit changing one service's environment updates that service only.
	tasksBefore := h.taskIDs()
	h.repo.Commit("worker queue", files(strings.Replace(stackFile, "QUEUE: jobs", "QUEUE: urgent", 1)))
	before = versions(h.services())
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("env change: %+v", res)
	}
	if !slices.Equal(res.Deployed.Updated, []string{"worker"}) {
		t.Fatalf("updated %v, want [worker]", res.Deployed.Updated)
	}
	after := versions(h.services())
	for _, n := range []string{"web", "cron"} {
		if after[n] != before[n] {
			t.Fatalf("%s version moved %d → %d", n, before[n], after[n])
		}
	}
	if after["worker"] == before["worker"] {
		t.Fatal("worker version did not move")
	}

	// Changing the config's content rotates it to a new name; web follows;
	// no task of another service restarts.
	h.waitRunning(3)
	tasksBefore = h.taskIDs()
	oldConf := h.services()["web"].Spec.TaskTemplate.ContainerSpec.Configs[0].ConfigName
	f := files(strings.Replace(stackFile, "QUEUE: jobs", "QUEUE: urgent", 1))
	f["deploy/web.conf"] = "listen 9090\n"
	h.repo.Commit("web conf", f)
	res = h.reconcile(ctl)
	if res.Err != nil || !slices.Equal(res.Deployed.Updated, []string{"web"}) {
		t.Fatalf("config change: %+v (%v)", res.Deployed, res.Err)
	}
	newConf := h.services()["web"].Spec.TaskTemplate.ContainerSpec.Configs[0].ConfigName
	if newConf == oldConf || !strings.HasPrefix(newConf, h.app.Stack+"_web_conf-") || len(newConf) > 64 {
		t.Fatalf("config not rotated: %q → %q", oldConf, newConf)
	}
	confs, err := h.backend.LiveConfigs(context.Background(), h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := confs[oldConf]; !kept {
		t.Fatalf("old config %s removed; the sweep owns that", oldConf)
	}
	h.waitRunning(3)
	tasksAfter := h.taskIDs()
	for _, n := range []string{"worker", "cron"} {
		if !slices.Equal(tasksBefore[n], tasksAfter[n]) {
			t.Fatalf("%s tasks restarted: %v → %v", n, tasksBefore[n], tasksAfter[n])
		}
	}

	// A restarted controller with an empty cache plans from the swarm's
	// records and redeploys nothing.
	beforeStats = h.backend.Stats()
	before = versions(h.services())
	res = h.reconcile(h.controller(true))
	if res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("after restart: %+v", res)
	}
	if d := h.backend.Stats().Sub(beforeStats); d.Writes != 0 {
		t.Fatalf("restart wrote: %+v", d.Requests)
	}
	if !maps.Equal(before, versions(h.services())) {
		t.Fatal("restart moved versions")
	}
}

func TestBrokenInputLeavesTheRunningStackUntouched(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)
	good := versions(h.services())

	broken := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"invalid yaml", map[string]string{"deploy/docker-compose.yml": "services: [oops\n"}, []string{"docker-compose.yml"}},
		{"unknown compose key", map[string]string{"deploy/docker-compose.yml": strings.Replace(stackFile, "    networks: [back]\n    stop_grace_period: 1s\nnetworks", "    networks: [back]\n    stop_grace_period: 1s\n    replicaz: 2\nnetworks", 1)}, []string{"docker-compose.yml", "replicaz"}},
		{"missing config file", map[string]string{"deploy/web.conf": ""}, []string{"docker-compose.yml", "web_conf"}},
		{"config outside the repository", map[string]string{"deploy/docker-compose.yml": strings.Replace(stackFile, "./web.conf", "../../etc/passwd", 1)}, []string{"configs.web_conf.file", "leaves the repository"}},
	}
	for _, b := range broken {
		fs := files(stackFile)
		maps.Copy(fs, b.files)
		h.repo.Commit(b.name, fs)
		stats := h.backend.Stats()
		res := h.reconcile(ctl)
		if res.Err == nil {
			t.Fatalf("%s: pass succeeded", b.name)
		}
		for _, w := range append(b.want, `application "`+h.app.Name+`"`) {
			if !strings.Contains(res.Status.LastError, w) {
				t.Errorf("%s: error %q does not mention %q", b.name, res.Status.LastError, w)
			}
		}
		if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
			t.Fatalf("%s: wrote to the swarm: %v", b.name, d.Requests)
		}
		if !maps.Equal(good, versions(h.services())) {
			t.Fatalf("%s: running services changed", b.name)
		}
	}

	// A revision that does not exist, and a repository that cannot be reached.
	bad := h.app
	bad.Source.Revision = "no-such-branch"
	unreachable := h.app
	unreachable.Source.RepoURL = filepath.Join(t.TempDir(), "gone")
	for _, app := range []application.Application{bad, unreachable} {
		c, err := reconcile.New(reconcile.Options{
			ControllerID: h.id, Backend: h.backend, Logger: quiet,
			Fetcher: source.New(source.Options{CacheDir: t.TempDir(), Logger: quiet}),
		}, []application.Application{app})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Reconcile(context.Background(), app.Name)
		if err != nil {
			t.Fatal(err)
		}
		if res.Err == nil {
			t.Fatalf("%s@%s: pass succeeded", app.Source.RepoURL, app.Source.Revision)
		}
		if !strings.Contains(res.Status.LastError, "no-such-branch") && !strings.Contains(res.Status.LastError, "unreachable") {
			t.Errorf("unclear error: %q", res.Status.LastError)
		}
	}
	if !maps.Equal(good, versions(h.services())) {
		t.Fatal("running services changed")
	}
}

func TestManualApplicationWaitsForAnExplicitSync(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	h.repo.Commit("initial", files(stackFile))
	ctl := h.controller(false)

	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Install || res.Deployed != nil {
		t.Fatalf("manual pass: %+v", res)
	}
	if res.Status.Sync != application.OutOfSync || res.Status.Health != application.Missing {
		t.Fatalf("manual status: sync %s health %s", res.Status.Sync, res.Status.Health)
	}
	if n := len(h.services()); n != 0 {
		t.Fatalf("manual application created %d services", n)
	}
	res, err := ctl.SyncNow(context.Background(), h.app.Name, "tester")
	if err != nil || res.Err != nil || res.Revision != 1 {
		t.Fatalf("sync: %+v %v", res, err)
	}
	h.waitRunning(3)
}
