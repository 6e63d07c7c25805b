package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

const sweepFile = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    networks: [front, back]
    configs: [{source: web_conf, target: /etc/web.conf}]
    secrets: [token]
    stop_grace_period: 1s
  worker:
    image: flotilla-test/app:1
    networks: [back]
    configs: [{source: worker_conf, target: /etc/worker.conf}]
    secrets: [worker_token]
    stop_grace_period: 1s
networks:
  front: {driver: overlay}
  back: {driver: overlay}
configs:
  web_conf: {file: ./web.conf}
  worker_conf: {file: ./worker.conf}
secrets:
  token: {file: ./token.txt}
  worker_token: {file: ./worker_token.txt}
`

// The same stack without the worker and without what only the worker used.
const sweepFileSmaller = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    networks: [front]
    configs: [{source: web_conf, target: /etc/web.conf}]
    secrets: [token]
    stop_grace_period: 1s
networks:
  front: {driver: overlay}
configs:
  web_conf: {file: ./web.conf}
secrets:
  token: {file: ./token.txt}
`

func sweepFiles(compose, webConf string) map[string]string {
	return map[string]string{
		"deploy/docker-compose.yml": compose,
		"deploy/web.conf":           webConf,
		"deploy/worker.conf":        "worker\n",
		"deploy/token.txt":          "t1\n",
		"deploy/worker_token.txt":   "t2\n",
		"deploy/.env":               "# no variables\n",
	}
}

func names(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestSweepRemovesExactlyWhatTheRepositoryStoppedDeclaring(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Automated.Prune = true
	zero := 0
	h.app.SyncPolicy.RetainRotated = &zero
	ctx := context.Background()
	c := swarmtest.Client(t)

	h.repo.Commit("initial", sweepFiles(sweepFile, "v1\n"))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}

	// Someone creates a config inside the application's namespace by hand.
	handMade, err := c.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: h.app.Stack + "_by_hand", Labels: map[string]string{"com.docker.stack.namespace": h.app.Stack}},
		Data:        []byte("mine"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// And a neighbouring stack lives next to it, deployed by someone else.
	neighbour := swarmtest.Name(t, "nb")
	swarmtest.Cleanup(t, neighbour)
	if _, err := c.NetworkCreate(ctx, neighbour+"_net", client.NetworkCreateOptions{Driver: "overlay", Labels: map[string]string{"com.docker.stack.namespace": neighbour}}); err != nil {
		t.Fatal(err)
	}

	before := map[string][]string{}
	nets, _ := h.backend.LiveNetworks(ctx, h.app.Stack)
	confs, _ := h.backend.LiveConfigs(ctx, h.app.Stack)
	secs, _ := h.backend.LiveSecrets(ctx, h.app.Stack)
	before["networks"], before["configs"], before["secrets"] = names(nets), names(confs), names(secs)

	// The repository drops the worker, its network, its config and its secret.
	h.repo.Commit("drop worker", sweepFiles(sweepFileSmaller, "v1\n"))
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st := res.Status.Sweep
	if st == nil || st.DryRun {
		t.Fatalf("sweep status: %+v", st)
	}
	removedKinds := map[string]int{}
	for _, r := range st.Removed {
		removedKinds[strings.Fields(r)[0]]++
	}
	if len(st.Removed) != 4 || removedKinds["service"] != 1 || removedKinds["network"] != 1 || removedKinds["config"] != 1 || removedKinds["secret"] != 1 {
		t.Fatalf("removed %v, want one service, network, config and secret\n%s", st.Removed, strings.Join(st.Messages, "\n"))
	}
	if !slices.ContainsFunc(st.Unmanaged, func(s string) bool { return strings.Contains(s, h.app.Stack+"_by_hand") }) {
		t.Fatalf("hand-made config not reported as unmanaged: %v", st.Unmanaged)
	}
	if _, err := c.ConfigInspect(ctx, handMade.ID, client.ConfigInspectOptions{}); err != nil {
		t.Fatalf("hand-made config touched: %v", err)
	}
	if _, err := c.NetworkInspect(ctx, neighbour+"_net", client.NetworkInspectOptions{}); err != nil {
		t.Fatalf("neighbour's network touched: %v", err)
	}
	svcs := h.services()
	if _, ok := svcs["worker"]; ok || len(svcs) != 1 {
		t.Fatalf("services after sweep: %v", slices.Collect(func(yield func(string) bool) {
			for n := range svcs {
				if !yield(n) {
					return
				}
			}
		}))
	}
	// The manager removes a swarm network at once, but the node's own
	// listing shows it until the removed worker's container has stopped
	// and left it, which took over 10 s in CI on a loaded machine.
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		nets, _ = h.backend.LiveNetworks(ctx, h.app.Stack)
		_, ok := nets[h.app.Stack+"_back"]
		return !ok && len(nets) == len(before["networks"])-1, fmt.Sprintf("networks %v → %v", before["networks"], names(nets))
	})

	// A rotated config with no retention goes once the service moved on;
	// the one the service now uses stays.
	h.repo.Commit("rotate", sweepFiles(sweepFileSmaller, "v2\n"))
	res = h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	confs, _ = h.backend.LiveConfigs(ctx, h.app.Stack)
	inUse := h.services()["web"].Spec.TaskTemplate.ContainerSpec.Configs[0].ConfigName
	if _, ok := confs[inUse]; !ok {
		t.Fatalf("config in use %s removed", inUse)
	}
	var webConfs []string
	for n := range confs {
		if strings.HasPrefix(n, h.app.Stack+"_web_conf-") {
			webConfs = append(webConfs, n)
		}
	}
	if len(webConfs) != 1 {
		// A Swarm rollback keeps PreviousSpec's config in use, so the old
		// one may legitimately stay while the service's previous spec
		// mounts it; anything beyond that is a leak.
		prev := h.services()["web"].PreviousSpec
		if prev == nil || len(webConfs) != 2 {
			t.Fatalf("web configs after rotation: %v", webConfs)
		}
	}
}

func TestManualApplicationShowsPendingRemovalsWithoutDeleting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	ctx := context.Background()
	h.repo.Commit("initial", sweepFiles(sweepFile, "v1\n"))
	ctl := h.controller(false)
	if res, err := ctl.SyncNow(ctx, h.app.Name, "tester"); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	h.repo.Commit("drop worker", sweepFiles(sweepFileSmaller, "v1\n"))
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st := res.Status.Sweep
	// The worker and what only it used are pending. The back network is
	// not: the web service that runs now (the old spec, since nothing was
	// applied) still uses it.
	if st == nil || !st.DryRun || len(st.Pending) != 3 {
		t.Fatalf("pending removals: %+v", st)
	}
	if len(h.services()) != 2 {
		t.Fatal("manual application deleted or deployed something")
	}
	if res.Status.Sync != application.OutOfSync {
		t.Fatalf("sync %s", res.Status.Sync)
	}
}

func TestRemovedApplicationsStackIsPrunedOnlyWithPrune(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	ctx := context.Background()
	h.repo.Commit("initial", sweepFiles(sweepFile, "v1\n"))
	if res := h.reconcile(h.controller(false)); res.Err != nil {
		t.Fatal(res.Err)
	}
	// Someone's own config in the namespace is not the application's.
	if _, err := swarmtest.Client(t).ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: h.app.Stack + "_mine", Labels: map[string]string{"com.docker.stack.namespace": h.app.Stack}},
		Data:        []byte("x"),
	}}); err != nil {
		t.Fatal(err)
	}

	// The application leaves the file: a controller started without it,
	// with no prune, reports the stack and keeps it.
	other := testController(t, h, h.id, false)
	orphans, err := other.SweepOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := findOrphan(orphans, h.app.Stack)
	if o == nil || !o.Sweep.DryRun || len(o.Sweep.Pending) == 0 {
		t.Fatalf("orphan report: %+v", o)
	}
	if len(h.services()) != 2 {
		t.Fatal("stack touched without --prune")
	}

	// A controller with another id never touches it, even with prune.
	foreign := testController(t, h, "someone-else", true)
	orphans, err = foreign.SweepOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if findOrphan(orphans, h.app.Stack) != nil || len(h.services()) != 2 {
		t.Fatal("another controller's prune touched the stack")
	}

	// Restarted with --prune: the records in the swarm prove what to remove.
	pruner := testController(t, h, h.id, true)
	orphans, err = pruner.SweepOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o = findOrphan(orphans, h.app.Stack)
	if o == nil || o.Sweep.DryRun || len(o.Sweep.Removed) != 8 {
		t.Fatalf("prune report: %+v", o)
	}
	if n := len(h.services()); n != 0 {
		t.Fatalf("%d services left", n)
	}
	confs, _ := h.backend.LiveConfigs(ctx, h.app.Stack)
	if _, ok := confs[h.app.Stack+"_mine"]; !ok || len(confs) != 1 {
		t.Fatalf("configs left: %v (want only the unmanaged one)", names(confs))
	}
}

// testController starts a controller whose file no longer lists h's
// application.
func testController(t *testing.T, h *harness, id string, prune bool) *reconcile.Controller {
	t.Helper()
	// Another application stays in the file: a file with none is refused
	// as a reason to prune everything.
	other := h.app
	other.Name, other.Stack = h.app.Name+"-other", h.app.Stack+"-other"
	c, err := reconcile.New(reconcile.Options{
		ControllerID: id, Backend: h.backend, Fetcher: h.controllerFetcher(), Logger: quiet, PruneOrphans: prune,
	}, []application.Application{other})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func findOrphan(os []reconcile.Orphan, stack string) *reconcile.Orphan {
	for i := range os {
		if os[i].Stack == stack {
			return &os[i]
		}
	}
	return nil
}

const volumeFile = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
  db:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    volumes: [data:/var/lib/data]
volumes:
  data: {}
`

const volumeFileWithoutDB = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
`

func TestVolumesStayUnlessPruneVolumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Automated.Prune = true
	ctx := context.Background()
	env := "# none\n"
	h.repo.Commit("with db", map[string]string{"deploy/docker-compose.yml": volumeFile, "deploy/.env": env})
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(2) // the volume exists once db's task has started
	vol := h.app.Stack + "_data"
	t.Cleanup(func() {
		_, _ = swarmtest.Client(t).VolumeRemove(context.Background(), vol, client.VolumeRemoveOptions{Force: true})
	})
	if _, err := swarmtest.Client(t).VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); err != nil {
		t.Fatalf("volume %s not created: %v", vol, err)
	}

	h.repo.Commit("drop db", map[string]string{"deploy/docker-compose.yml": volumeFileWithoutDB, "deploy/.env": env})
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, err := swarmtest.Client(t).VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); err != nil {
		t.Fatalf("volume removed without pruneVolumes: %v", err)
	}
	if !slices.ContainsFunc(res.Status.Sweep.Messages, func(m string) bool {
		return strings.Contains(m, vol) && strings.Contains(m, "docker volume rm")
	}) {
		t.Fatalf("kept volume not reported with the command to remove it: %v", res.Status.Sweep.Messages)
	}

	// With pruneVolumes on a one-node swarm, the next sweep removes it once
	// db's container, which held it, is gone.
	h.app.SyncPolicy.Automated.PruneVolumes = true
	ctl = h.controller(false)
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		res := h.reconcile(ctl)
		_, err := swarmtest.Client(t).VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
		msgs := ""
		if res.Status.Sweep != nil {
			msgs = strings.Join(res.Status.Sweep.Messages, "; ")
		}
		return err != nil, msgs
	})
}

const provedV1 = `version: "3.8"
services:
  a:
    image: flotilla-test/app:1
    configs: [{source: x, target: /etc/x.conf}]
    deploy: {replicas: 0}
  b:
    image: flotilla-test/app:1
    networks: [n]
    deploy: {replicas: 0}
  c:
    image: flotilla-test/app:1
    deploy: {replicas: 0}
networks:
  n: {driver: overlay}
configs:
  x: {file: ./x.conf}
`

const provedV2 = `version: "3.8"
services:
  c:
    image: flotilla-test/app:1
    deploy: {replicas: 0}
`

func TestARevisionWhoseConfigWasDeletedStillProvesItsOtherClaims(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true) // automated, prune off for now
	ctx := context.Background()
	c := swarmtest.Client(t)
	base := map[string]string{"deploy/x.conf": "x\n", "deploy/.env": "# none\n"}
	commit := func(msg, compose string) {
		fs := maps.Clone(base)
		fs["deploy/docker-compose.yml"] = compose
		h.repo.Commit(msg, fs)
	}
	commit("v1", provedV1)
	if res := h.reconcile(h.controller(false)); res.Err != nil {
		t.Fatal(res.Err)
	}
	// v2 drops a, b, their config and network; without prune they stay.
	commit("v2", provedV2)
	if res := h.reconcile(h.controller(false)); res.Err != nil || len(h.services()) != 3 {
		t.Fatalf("v2 without prune: %v, %d services", res.Err, len(h.services()))
	}
	// Someone removes a and its config by hand: revision 1 now mounts a
	// config that no longer exists anywhere.
	svcs := h.services()
	if _, err := c.ServiceRemove(ctx, svcs["a"].ID, client.ServiceRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	confs, _ := h.backend.LiveConfigs(ctx, h.app.Stack)
	for name, id := range confs {
		if strings.Contains(name, "_x-") {
			if _, err := c.ConfigRemove(ctx, id, client.ConfigRemoveOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// With prune on, revision 1 still proves b and n, which only it declared.
	h.app.SyncPolicy.Automated.Prune = true
	res := h.reconcile(h.controller(false))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	removed := strings.Join(res.Status.Sweep.Removed, ",")
	if !strings.Contains(removed, h.app.Stack+"_b") || !strings.Contains(removed, h.app.Stack+"_n") {
		t.Fatalf("removed %v; messages %v", res.Status.Sweep.Removed, res.Status.Sweep.Messages)
	}
	if _, ok := h.services()["c"]; !ok || len(h.services()) != 1 {
		t.Fatal("the declared service went too")
	}
}
