package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// outdatedCompose is one service of two replicas whose rolling update
// replaces one task and then waits an hour before the next: the second
// task keeps running the earlier spec, deterministically.
const outdatedCompose = `version: "3.8"
services:
  web:
    image: %s
    command: ["serve", ":8080"]
    stop_grace_period: 1s
    environment:
      APP_MESSAGE: %s
    deploy:
      replicas: 2
      update_config: {parallelism: 1, delay: 1h, order: stop-first}
%s`

func deployOutdatedFixture(t *testing.T, b *Backend, stack, message, placement string) {
	t.Helper()
	dir := t.TempDir()
	text := fmt.Sprintf(outdatedCompose, swarmtest.Image, message, placement)
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if _, err := b.DeployStack(context.Background(), charts.DeployRequest{Stack: stack, Manifest: r.Manifest}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
}

func runningTasks(s charts.ServiceState) (current, outdated []string) {
	for _, task := range s.Tasks {
		if task.State != "running" || task.DesiredState != "running" {
			continue
		}
		if task.Outdated {
			outdated = append(outdated, task.ID)
		} else {
			current = append(current, task.ID)
		}
	}
	return current, outdated
}

// A task still running an earlier spec of its service is marked outdated,
// and one of the current spec is not; a change of placement alone, which
// Swarm does not replace tasks for while their node still fits, marks none.
// Health relies on it to tell a service just written, whose update Swarm
// has not yet begun, from one that runs what was written.
func TestATaskOfAnEarlierSpecIsMarkedOutdated(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "outdated")
	swarmtest.Cleanup(t, stack)

	deployOutdatedFixture(t, b, stack, "one", "")
	states := waitRunning(t, b, stack)
	if cur, old := runningTasks(states[0]); len(cur) != 2 || len(old) != 0 {
		t.Fatalf("after the first deploy: current %v, outdated %v; want 2 current", cur, old)
	}

	// Placement alone: Swarm keeps the tasks, and they are not outdated.
	deployOutdatedFixture(t, b, stack, "one", "      placement: {constraints: [node.role == manager]}\n")
	var before []string
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		st, err := b.ReadStackServices(context.Background(), stack)
		if err != nil || len(st) != 1 {
			return false, fmt.Sprint(st, err)
		}
		cur, old := runningTasks(st[0])
		before = cur
		return len(cur) == 2 && len(old) == 0, fmt.Sprintf("current %v, outdated %v", cur, old)
	})

	// A new environment: one task is replaced, the other waits an hour.
	deployOutdatedFixture(t, b, stack, "two", "      placement: {constraints: [node.role == manager]}\n")
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		st, err := b.ReadStackServices(context.Background(), stack)
		if err != nil || len(st) != 1 {
			return false, fmt.Sprint(st, err)
		}
		cur, old := runningTasks(st[0])
		ok := len(cur) == 1 && len(old) == 1 && !slices.Contains(before, cur[0]) && slices.Contains(before, old[0])
		return ok, fmt.Sprintf("update %q, current %v, outdated %v (tasks before: %v)", st[0].UpdateState, cur, old, before)
	})
}
