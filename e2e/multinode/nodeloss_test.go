package multinode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/swarmnodes"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

const nodeLossStack = `version: "3.8"
services:
  agent:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy:
      mode: global
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy:
      replicas: 3
      placement:
        preferences: [{spread: node.id}]
`

func TestAWorkerLostAndBackIsReportedByNameWhileSwarmReschedulesAndFlotillaWritesNothing(t *testing.T) {
	c := swarmnodes.Need(t)
	fastHeartbeat(t, c)
	a := newApp(t, c)
	a.repo.Commit("global agent and spread web", map[string]string{"deploy/docker-compose.yml": nodeLossStack})
	a.controller()
	if res := a.reconcile(); res.Err != nil {
		t.Fatalf("first sync: %v", res.Err)
	}
	waitHealth(t, a, 90*time.Second, func(st application.Status) bool { return st.Health == application.Healthy })

	victim := c.Workers()[len(c.Workers())-1]
	nodeIDs := nodeIDsByName(t, a.client)
	if got := tasksOn(t, a.client, a.app.Stack+"_web")[nodeIDs[victim.Name]]; got != 1 {
		t.Fatalf("web does not run one task on %s before the loss (%d): spread failed", victim.Name, got)
	}

	// From here on nothing may write: not the backend (its request count)
	// and nobody at all (the manager's service events).
	before := a.backend.Stats()
	writes := watchServiceWrites(t, a.client, a.app.Stack)

	killed := time.Now()
	c.Kill(t, victim)
	restored := false
	t.Cleanup(func() {
		if !restored {
			c.Restore(t)
		}
	})
	st := waitHealth(t, a, 90*time.Second, func(st application.Status) bool {
		return st.Health == application.Degraded && strings.Contains(st.HealthMessage, victim.Name)
	})
	t.Logf("%s after the kill, with %s down: %s: %s", time.Since(killed).Round(time.Second), victim.Name, st.Health, st.HealthMessage)
	agent := service(st, "agent")
	if agent.Health != application.Degraded || agent.Running != 2 || agent.Desired != 3 || !strings.Contains(agent.Message, "node "+victim.Name+" is down") {
		t.Errorf("agent with a node down: %+v", agent)
	}

	// Swarm moves web's task off the lost node by itself.
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		on := tasksOn(t, a.client, a.app.Stack+"_web")
		total := 0
		for _, n := range on {
			total += n
		}
		return on[nodeIDs[victim.Name]] == 0 && total == 3, fmt.Sprintf("running web tasks by node: %v", on)
	})
	st = waitHealth(t, a, 30*time.Second, func(st application.Status) bool {
		return service(st, "web").Health == application.Healthy
	})
	if web := service(st, "web"); !strings.Contains(web.Message, victim.Name) {
		t.Errorf("web after Swarm moved its task does not name the lost node: %+v", web)
	}
	if d := a.backend.Stats().Sub(before); d.Writes != 0 {
		t.Fatalf("Flotilla wrote while the node was down: %v", d.Requests)
	}

	back := time.Now()
	c.Restore(t)
	restored = true
	st = waitHealth(t, a, 90*time.Second, func(st application.Status) bool {
		return st.Health == application.Healthy && !strings.Contains(st.HealthMessage, victim.Name) &&
			service(st, "agent").Running == 3
	})
	t.Logf("%s after the restart, with %s back: %s: %s", time.Since(back).Round(time.Second), victim.Name, st.Health, st.HealthMessage)
	if d := a.backend.Stats().Sub(before); d.Writes != 0 {
		t.Fatalf("Flotilla wrote while the node came back: %v", d.Requests)
	}
	if w := writes(); len(w) != 0 {
		t.Fatalf("services of the stack were written during the loss: %v", w)
	}
}

// fastHeartbeat makes the cluster's manager notice a lost node within a few
// seconds instead of Swarm's default of about fifteen.
func fastHeartbeat(t *testing.T, c *swarmnodes.Cluster) {
	t.Helper()
	cl := c.Client(t, c.Manager())
	ctx := context.Background()
	sw, err := cl.SwarmInspect(ctx, client.SwarmInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sw.Swarm.Spec.Dispatcher.HeartbeatPeriod == time.Second {
		return
	}
	sw.Swarm.Spec.Dispatcher.HeartbeatPeriod = time.Second
	if _, err := cl.SwarmUpdate(ctx, client.SwarmUpdateOptions{Version: sw.Swarm.Version, Spec: sw.Swarm.Spec}); err != nil {
		t.Fatalf("swarm update of the heartbeat: %v", err)
	}
}

// waitHealth reconciles until the application's status satisfies ok.
func waitHealth(t *testing.T, a *app, timeout time.Duration, ok func(application.Status) bool) application.Status {
	t.Helper()
	var st application.Status
	swarmtest.Eventually(t, timeout, func() (bool, string) {
		res := a.reconcile()
		st = res.Status
		return ok(st), fmt.Sprintf("%s: %s (err %v) %+v", st.Health, st.HealthMessage, res.Err, st.Services)
	})
	return st
}

func service(st application.Status, name string) application.ServiceStatus {
	for _, s := range st.Services {
		if s.Name == name {
			return s
		}
	}
	return application.ServiceStatus{}
}

func nodeIDsByName(t *testing.T, cl *client.Client) map[string]string {
	t.Helper()
	nodes, err := cl.NodeList(context.Background(), client.NodeListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Description.Hostname] = n.ID
	}
	return out
}

// tasksOn counts the running tasks of a service Swarm wants running, by
// node id.
func tasksOn(t *testing.T, cl *client.Client, service string) map[string]int {
	t.Helper()
	tasks, err := cl.TaskList(context.Background(), client.TaskListOptions{Filters: make(client.Filters).Add("service", service).Add("desired-state", "running")})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, task := range tasks.Items {
		if task.Status.State == swarm.TaskStateRunning {
			out[task.NodeID]++
		}
	}
	return out
}

// watchServiceWrites follows the manager's service events and returns a
// function that lists the client writes seen so far on the stack's
// services. Swarm's own progress records (updates carrying updatestate.*
// attributes) are not client writes.
func watchServiceWrites(t *testing.T, cl *client.Client, stack string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ev := cl.Events(ctx, client.EventsListOptions{Filters: make(client.Filters).Add("type", "service")})
	msgs, errs := ev.Messages, ev.Err
	var (
		mu   sync.Mutex
		seen []string
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case m := <-msgs:
				if !strings.HasPrefix(m.Actor.Attributes["name"], stack+"_") {
					continue
				}
				if _, progress := m.Actor.Attributes["updatestate.new"]; progress {
					continue
				}
				mu.Lock()
				seen = append(seen, string(m.Action)+" "+m.Actor.Attributes["name"])
				mu.Unlock()
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}
