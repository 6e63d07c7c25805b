package multinode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/swarmnodes"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// volumesStack puts a named volume on every node (a global service) and
// another on one worker only; the manager, whose listing the sweep reads,
// never holds the second.
const volumesStack = `version: "3.8"
services:
  agent:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    volumes: [data:/data]
    deploy:
      mode: global
  edge:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    volumes: [cache:/cache]
    deploy:
      placement:
        constraints: [node.hostname == %s]
volumes:
  data: {}
  cache: {}
`

const volumesDropped = `version: "3.8"
services:
  rest:
    image: flotilla-test/app:1
    stop_grace_period: 1s
`

func TestTheSweepKeepsNodeLocalVolumesOfSeveralNodesAndSaysHowToRemoveThemOnEach(t *testing.T) {
	c := swarmnodes.Need(t)
	a := newApp(t, c)
	worker := c.Workers()[0]
	t.Cleanup(func() { removeVolumes(t, c, a.app.Stack) })
	a.app.SyncPolicy.Automated.Prune = true
	a.app.SyncPolicy.Automated.PruneVolumes = true
	a.repo.Commit("volumes", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(volumesStack, worker.Name)})
	a.controller()
	if res := a.reconcile(); res.Err != nil {
		t.Fatalf("first sync: %v", res.Err)
	}
	waitHealth(t, a, 90*time.Second, func(st application.Status) bool { return st.Health == application.Healthy })
	data, cache := a.app.Stack+"_data", a.app.Stack+"_cache"
	everywhere := map[string][]string{}
	for _, n := range c.Nodes {
		everywhere[n.Name] = volumesOn(t, c, n, a.app.Stack)
	}
	for _, n := range c.Nodes {
		want := []string{data}
		if n.Name == worker.Name {
			want = []string{cache, data}
		}
		if fmt.Sprint(everywhere[n.Name]) != fmt.Sprint(want) {
			t.Fatalf("volumes by node after the deploy: %v (want %v on %s)", everywhere, want, n.Name)
		}
	}

	// The repository drops both services and both volumes.
	a.repo.Commit("drop the volumes", map[string]string{"deploy/docker-compose.yml": volumesDropped})
	res := a.reconcile()
	if res.Err != nil {
		t.Fatalf("sync dropping the volumes: %v", res.Err)
	}
	sw := res.Status.Sweep
	if sw == nil {
		t.Fatal("no sweep report")
	}
	nodes := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = n.Name
	}
	onEach := "run on each node (" + strings.Join(nodes, ", ") + "): docker volume rm "
	msgs := strings.Join(sw.Messages, "\n")
	t.Logf("sweep report:\n%s", msgs)
	for _, want := range []string{"kept volume " + data + ": ", onEach + data, "kept volume " + cache + ": ", onEach + cache} {
		if !strings.Contains(msgs, want) {
			t.Errorf("sweep report lacks %q", want)
		}
	}
	for _, s := range []string{"service " + a.app.Stack + "_agent", "service " + a.app.Stack + "_edge"} {
		if !strings.Contains(fmt.Sprint(sw.Removed), s) {
			t.Errorf("sweep did not remove %s: removed %v", s, sw.Removed)
		}
	}

	// Nothing of either volume was removed anywhere.
	for _, n := range c.Nodes {
		if got := volumesOn(t, c, n, a.app.Stack); fmt.Sprint(got) != fmt.Sprint(everywhere[n.Name]) {
			t.Errorf("volumes on %s after the sweep: %v, want %v", n.Name, got, everywhere[n.Name])
		}
	}

	// The command the report gives, run on each node, is all it takes.
	for _, n := range c.Nodes {
		cl := c.Client(t, n)
		for _, v := range []string{data, cache} {
			swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
				_, err := cl.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{})
				// 20.10 says "no such volume", a current engine "not found".
				return err == nil || cerrdefs.IsNotFound(err), fmt.Sprintf("docker volume rm %s on %s: %v", v, n.Name, err)
			})
		}
		if got := volumesOn(t, c, n, a.app.Stack); len(got) != 0 {
			t.Errorf("volumes left on %s: %v", n.Name, got)
		}
	}
}

// volumesOn lists the stack's volumes on one node, sorted.
func volumesOn(t *testing.T, c *swarmnodes.Cluster, n swarmnodes.Node, stack string) []string {
	t.Helper()
	resp, err := c.Client(t, n).VolumeList(context.Background(), client.VolumeListOptions{
		Filters: make(client.Filters).Add("label", "com.docker.stack.namespace="+stack)})
	if err != nil {
		t.Fatalf("volumes on %s: %v", n.Name, err)
	}
	var out []string
	for _, v := range resp.Items {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

// removeVolumes removes whatever of the stack's volumes a failed run left
// on any node, once its services are gone.
func removeVolumes(t *testing.T, c *swarmnodes.Cluster, stack string) {
	for _, n := range c.Nodes {
		cl := c.Client(t, n)
		resp, err := cl.VolumeList(context.Background(), client.VolumeListOptions{
			Filters: make(client.Filters).Add("label", "com.docker.stack.namespace="+stack)})
		if err != nil {
			continue
		}
		for _, v := range resp.Items {
			_, _ = cl.VolumeRemove(context.Background(), v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
}
