package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// A service's read names the volumes it mounts (a bind mount by where it is
// mounted), a task's node by hostname, and counts the earlier tasks of a
// slot whose task keeps exiting, from the listings a read makes anyway.
func TestReadStacks_namesVolumesAndNodesAndCountsTheEarlierTasksOfASlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := swarmtest.Name(t, "tree")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	file := `version: "3.8"
services:
  store:
    image: ` + swarmtest.Image + `
    volumes:
      - data:/data
      - type: bind
        source: /srv/flotilla-test-tree
        target: /mnt/host
      - type: tmpfs
        target: /scratch
    deploy:
      replicas: 0
  crash:
    image: ` + swarmtest.Image + `
    command: ["exit", "3"]
    deploy:
      restart_policy: {condition: on-failure, delay: 1s}
volumes:
  data: {}
`
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir, Files: []string{"compose.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	g := b.WithAllowedReferences(application.Allow{HostPaths: []string{"/srv/flotilla-test-tree"}})
	if _, err := g.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets}); err != nil {
		t.Fatalf("deploy: %v", err)
	}

	host, err := swarmtest.Client(t).Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var crash charts.TaskState
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		states, err := b.ReadStackServices(ctx, stack)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range states {
			if s.Name == "store" && !slices.Equal(s.Volumes, []string{"/mnt/host", stack + "_data"}) {
				return false, fmt.Sprintf("store volumes %q", s.Volumes)
			}
			if s.Name != "crash" {
				continue
			}
			for _, ts := range s.Tasks {
				if ts.DesiredState == string(swarm.TaskStateRunning) && ts.Restarts >= 2 {
					crash = ts
					return true, ""
				}
			}
			return false, fmt.Sprintf("crash tasks %+v", s.Tasks)
		}
		return false, fmt.Sprintf("services %+v", states)
	})
	if crash.NodeName != host.Info.Name || crash.NodeName == "" {
		t.Errorf("crash task node %q (id %s), want hostname %q", crash.NodeName, crash.NodeID, host.Info.Name)
	}

	// The names are remembered: a read after the first lists no nodes.
	before := b.Stats()
	if _, err := b.ReadStackServices(ctx, stack); err != nil {
		t.Fatal(err)
	}
	if d := b.Stats().Sub(before); d.Requests["node.list"] != 0 || d.Requests["swarm.list"] != 0 {
		t.Errorf("a read of known nodes made requests %v", d.Requests)
	}
}

func TestRestarts_countsEarlierTasksOfTheSlotAndSaysWhenAtTheRetentionLimit(t *testing.T) {
	mk := func(id string, slot int, desired swarm.TaskState) swarm.Task {
		return swarm.Task{ID: id, Slot: slot, NodeID: "n1", DesiredState: desired}
	}
	tasks := []swarm.Task{
		mk("now", 1, swarm.TaskStateRunning), mk("a", 1, swarm.TaskStateShutdown), mk("b", 1, swarm.TaskStateShutdown),
		mk("c", 1, swarm.TaskStateShutdown), mk("d", 1, swarm.TaskStateShutdown), mk("other", 2, swarm.TaskStateShutdown),
	}
	if n, full := restarts(tasks[0], tasks, 5); n != 4 || !full {
		t.Errorf("restarts = %d, full %v; want 4, at the limit", n, full)
	}
	if n, full := restarts(tasks[0], tasks, 10); n != 4 || full {
		t.Errorf("restarts with a limit of 10 = %d, full %v; want 4, not full", n, full)
	}
	if n, full := restarts(tasks[0], tasks, 0); n != 4 || full {
		t.Errorf("restarts with no known limit = %d, full %v; want 4, not full", n, full)
	}
	if n, _ := restarts(tasks[1], tasks, 5); n != 0 {
		t.Errorf("a shut down task counts %d restarts", n)
	}
}
