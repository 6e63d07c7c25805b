package backend

import (
	"slices"
	"testing"

	"github.com/docker/docker/api/types/swarm"
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
