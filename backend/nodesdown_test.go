package backend

import (
	"slices"
	"testing"

	"github.com/moby/moby/api/types/swarm"
)

func TestATaskStrandedOnALostNodeNamesTheNodeButNotOneDrainedOrReady(t *testing.T) {
	node := func(id, host string, st swarm.NodeState, av swarm.NodeAvailability) swarm.Node {
		return swarm.Node{ID: id, Description: swarm.NodeDescription{Hostname: host},
			Status: swarm.NodeStatus{State: st}, Spec: swarm.NodeSpec{Availability: av}}
	}
	nodes := map[string]swarm.Node{
		"up":      node("up", "edge-1", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		"lost":    node("lost", "edge-2", swarm.NodeStateDown, swarm.NodeAvailabilityActive),
		"drained": node("drained", "edge-3", swarm.NodeStateDown, swarm.NodeAvailabilityDrain),
		"unnamed": node("unnamed", "", swarm.NodeStateUnknown, swarm.NodeAvailabilityActive),
	}
	task := func(nodeID string, desired, state swarm.TaskState) swarm.Task {
		return swarm.Task{NodeID: nodeID, DesiredState: desired, Status: swarm.TaskStatus{State: state}}
	}
	tasks := []swarm.Task{
		task("up", swarm.TaskStateRunning, swarm.TaskStateRunning),
		task("lost", swarm.TaskStateShutdown, swarm.TaskStateRunning),
		task("lost", swarm.TaskStateShutdown, swarm.TaskStateRunning),
		task("drained", swarm.TaskStateShutdown, swarm.TaskStateRunning),
		task("unnamed", swarm.TaskStateRunning, swarm.TaskStateRunning),
		task("up", swarm.TaskStateShutdown, swarm.TaskStateShutdown),
	}
	if got, want := nodesDown(tasks, nodes), []string{"edge-2", "unnamed"}; !slices.Equal(got, want) {
		t.Errorf("nodesDown = %v, want %v", got, want)
	}
	if got := nodesDown(tasks, nil); got != nil {
		t.Errorf("nodesDown without a node listing = %v, want none", got)
	}

	// A steady read needs no node listing; a stranded task makes one.
	svc := []swarm.Service{{ID: "s", Spec: swarm.ServiceSpec{Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{}}}}}
	steady := map[string][]swarm.Task{"s": {task("up", swarm.TaskStateRunning, swarm.TaskStateRunning), task("up", swarm.TaskStateShutdown, swarm.TaskStateComplete)}}
	if needNodes(svc, steady) {
		t.Error("a steady read lists nodes")
	}
	lost := map[string][]swarm.Task{"s": {task("lost", swarm.TaskStateShutdown, swarm.TaskStateRunning)}}
	if !needNodes(svc, lost) {
		t.Error("a read with a stranded task does not list nodes")
	}
}

// The daemon's desired count of a global service and the node listing come
// from two requests; whichever side of a node's loss each was taken on, the
// service wants one task per node, the lost one included, and the lost
// node's last report does not count as running.
func TestAGlobalServiceCountsItsLostNodeOnceWhicheverSideOfTheLossTheDaemonCounted(t *testing.T) {
	nodes := map[string]swarm.Node{}
	for _, n := range []struct {
		id string
		st swarm.NodeState
		av swarm.NodeAvailability
	}{
		{"n1", swarm.NodeStateReady, swarm.NodeAvailabilityActive},
		{"n2", swarm.NodeStateReady, swarm.NodeAvailabilityActive},
		{"n3", swarm.NodeStateDown, swarm.NodeAvailabilityActive},
		{"n4", swarm.NodeStateDown, swarm.NodeAvailabilityDrain},
	} {
		nodes[n.id] = swarm.Node{ID: n.id, Description: swarm.NodeDescription{Hostname: "edge-" + n.id},
			Status: swarm.NodeStatus{State: n.st}, Spec: swarm.NodeSpec{Availability: n.av}}
	}
	running := func(id, node string) swarm.Task {
		return swarm.Task{ID: id, NodeID: node, DesiredState: swarm.TaskStateRunning, Status: swarm.TaskStatus{State: swarm.TaskStateRunning}}
	}
	tasks := []swarm.Task{running("t1", "n1"), running("t2", "n2"), running("t3", "n3"),
		{ID: "t4", NodeID: "n4", DesiredState: swarm.TaskStateShutdown, Status: swarm.TaskStatus{State: swarm.TaskStateRunning}}}
	global := swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "s_agent"}, Mode: swarm.ServiceMode{Global: &swarm.GlobalService{}}}

	for _, daemonCount := range []uint64{3, 2} {
		svc := swarm.Service{ID: "s", Spec: global, ServiceStatus: &swarm.ServiceStatus{DesiredTasks: daemonCount}}
		st := project("s", svc, tasks, nil)
		st.NodesDown = nodesDown(tasks, nodes)
		countLostNodes(&st, tasks, nodes)
		if !slices.Equal(st.NodesDown, []string{"edge-n3"}) || st.Desired != 3 || st.Running != 2 {
			t.Errorf("daemon counted %d: nodes down %v, %d/%d running; want [edge-n3], 2/3", daemonCount, st.NodesDown, st.Running, st.Desired)
		}
		for _, ts := range st.Tasks {
			if ts.NodeLost != (ts.NodeID == "n3") {
				t.Errorf("daemon counted %d: task on %s lost = %v", daemonCount, ts.NodeID, ts.NodeLost)
			}
		}
	}
}
