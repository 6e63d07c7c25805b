package backend

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
)

// maxTaskFilterIDs is how many services a task listing names in its filter
// before it lists every task instead: past that, the query string costs more
// than the tasks it leaves out.
const maxTaskFilterIDs = 100

// StackServices reports one stack's services, or nil when the swarm could
// not be read: for a poller that is "not converged yet".
func (b *Backend) StackServices(ctx context.Context, stack string) []charts.ServiceState {
	states, err := b.ReadStackServices(ctx, stack)
	if err != nil {
		b.log.Warn("stack services unread; reporting none", "stack", stack, "error", err)
		return nil
	}
	return states
}

// ReadStackServices reports one stack's services, sorted by name, or an
// error when the swarm could not be read. A stack with no services is an
// empty, non-nil slice.
func (b *Backend) ReadStackServices(ctx context.Context, stack string) ([]charts.ServiceState, error) {
	m, err := b.ReadStacks(ctx, []string{stack})
	if err != nil {
		return nil, err
	}
	return m[stack], nil
}

// ReadStacks reports the services of several stacks from one snapshot: one
// service listing and one task listing for all of them, plus a node listing
// only when a global service needs its desired count worked out. Every
// requested stack is in the map (empty when it has no services), or the
// error says none could be read.
func (b *Backend) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	states, _, err := b.ReadLiveStacks(ctx, stacks)
	return states, err
}

// ReadLiveStacks is ReadStacks that also returns the services it listed,
// by stack and scoped name, specs and all: the same listing answers live
// drift, so a batch lists its services once.
func (b *Backend) ReadLiveStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, map[string]map[string]swarm.Service, error) {
	out := make(map[string][]charts.ServiceState, len(stacks))
	live := make(map[string]map[string]swarm.Service, len(stacks))
	if len(stacks) == 0 {
		return out, live, nil
	}
	f := make(client.Filters)
	if len(stacks) == 1 {
		f.Add("label", LabelNamespace+"="+stacks[0])
	} else {
		f.Add("label", LabelNamespace)
	}
	// The listing is every stack's on the swarm (the daemon cannot filter
	// by several values of one label); services of other stacks are
	// dropped as they are decoded (see withListBody), so a batch holds its
	// own stacks' specs, not the whole swarm's.
	want := setOf(stacks)
	var services []swarm.Service
	decode := func(r io.Reader) error {
		return eachListed(r, func(s listedService) {
			if want[s.Spec.Labels[LabelNamespace]] {
				services = append(services, s.Service)
			}
		})
	}
	undecoded, err := b.api.ServiceList(withListBody(ctx, decode), client.ServiceListOptions{Filters: f, Status: true})
	if err != nil {
		return nil, nil, fmt.Errorf("read stacks: list services: %w", err)
	}
	for _, s := range undecoded.Items { // empty unless the answer reached the client undecoded
		if want[s.Spec.Labels[LabelNamespace]] {
			services = append(services, s)
		}
	}

	tasks, err := b.tasksOf(ctx, services)
	if err != nil {
		return nil, nil, fmt.Errorf("read stacks: %w", err)
	}
	// Nodes are listed only when an answer needs them, so a steady-state
	// read stays two requests: a global service whose desired count the
	// daemon did not report, or a task Swarm gave up on that never reported
	// stopping (what a lost node leaves behind).
	var (
		eligible *uint64
		nodes    map[string]swarm.Node
		list     []swarm.Node
	)
	if needNodes(services, tasks) {
		listed, err := b.api.NodeList(ctx, client.NodeListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("read stacks: list nodes: %w", err)
		}
		list = listed.Items
		n := readyCount(list)
		eligible = &n
		nodes = make(map[string]swarm.Node, len(list))
		for _, node := range list {
			nodes[node.ID] = node
		}
	}
	b.refreshNodeNames(ctx, list, tasks)
	retention := b.nodes.retentionLimit()

	for _, st := range stacks {
		out[st] = []charts.ServiceState{}
		live[st] = map[string]swarm.Service{}
	}
	for _, s := range services {
		st := s.Spec.Labels[LabelNamespace]
		state := project(st, s, tasks[s.ID], eligible)
		state.NodesDown = nodesDown(tasks[s.ID], nodes)
		if len(state.NodesDown) > 0 {
			countLostNodes(&state, tasks[s.ID], nodes)
		}
		b.annotateTasks(state.Tasks, tasks[s.ID], retention)
		out[st] = append(out[st], state)
		live[st][s.Spec.Name] = s
	}
	for _, states := range out {
		slices.SortFunc(states, func(a, b charts.ServiceState) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out, live, nil
}

// tasksOf lists the tasks of services in one request, grouped by service id.
func (b *Backend) tasksOf(ctx context.Context, services []swarm.Service) (map[string][]swarm.Task, error) {
	byService := make(map[string][]swarm.Task, len(services))
	if len(services) == 0 {
		return byService, nil
	}
	f := make(client.Filters)
	if len(services) <= maxTaskFilterIDs {
		for _, s := range services {
			f.Add("service", s.ID)
		}
	}
	tasks, err := b.api.TaskList(ctx, client.TaskListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	for _, t := range tasks.Items {
		byService[t.ServiceID] = append(byService[t.ServiceID], t)
	}
	return byService, nil
}

// readyCount counts nodes that can take tasks: ready and not paused or
// drained.
func readyCount(nodes []swarm.Node) uint64 {
	var n uint64
	for _, node := range nodes {
		if node.Status.State == swarm.NodeStateReady && node.Spec.Availability == swarm.NodeAvailabilityActive {
			n++
		}
	}
	return n
}

// needNodes says whether a read must list nodes to answer: a global service
// without the daemon's desired count, or a stranded task.
func needNodes(services []swarm.Service, tasks map[string][]swarm.Task) bool {
	for _, s := range services {
		if (s.Spec.Mode.Global != nil || s.Spec.Mode.GlobalJob != nil) && s.ServiceStatus == nil {
			return true
		}
		for _, t := range tasks[s.ID] {
			if stranded(t) {
				return true
			}
		}
	}
	return false
}

// stranded reports a task Swarm wants gone that still last said it was on
// its way up or running. A node that is lost cannot report its tasks
// stopping, so its tasks stay like this until it comes back; on a healthy
// node the state catches up within the stop grace period.
func stranded(t swarm.Task) bool {
	if t.NodeID == "" || (t.DesiredState != swarm.TaskStateShutdown && t.DesiredState != swarm.TaskStateRemove) {
		return false
	}
	switch t.Status.State {
	case swarm.TaskStateAssigned, swarm.TaskStateAccepted, swarm.TaskStatePreparing,
		swarm.TaskStateReady, swarm.TaskStateStarting, swarm.TaskStateRunning:
		return true
	}
	return false
}

// nodesDown names, sorted, the nodes that are not ready and not drained
// while one of tasks is stranded or meant to run there: nodes the service
// lost rather than ones an operator took out. nodes nil (not listed) is none.
func nodesDown(tasks []swarm.Task, nodes map[string]swarm.Node) []string {
	if nodes == nil {
		return nil
	}
	var out []string
	for _, t := range tasks {
		if !stranded(t) && t.DesiredState != swarm.TaskStateRunning {
			continue
		}
		if !lostNode(nodes, t.NodeID) {
			continue
		}
		n := nodes[t.NodeID]
		name := cmp.Or(n.Description.Hostname, n.ID)
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// lostNode reports whether node id is listed and neither ready nor drained:
// a node the swarm lost rather than one an operator took out.
func lostNode(nodes map[string]swarm.Node, id string) bool {
	n, ok := nodes[id]
	return ok && n.Status.State != swarm.NodeStateReady && n.Spec.Availability != swarm.NodeAvailabilityDrain
}

// countLostNodes marks the tasks of st that sit on a lost node, whose last
// report is all Swarm has of them, and makes a global service's desired
// count include each lost node. The daemon drops a node from its own count
// only once it has marked the node down, and services and nodes are read in
// two requests, so adding the lost nodes to the daemon's figure counted a
// node twice in the seconds one goes down (4 desired on 3 nodes). The count
// is taken from the tasks instead, as the daemon does, keeping lost nodes.
func countLostNodes(st *charts.ServiceState, tasks []swarm.Task, nodes map[string]swarm.Node) {
	for i := range st.Tasks {
		if lostNode(nodes, st.Tasks[i].NodeID) {
			st.Tasks[i].NodeLost = true
		}
	}
	for _, t := range tasks {
		if t.Status.State == swarm.TaskStateRunning && t.DesiredState == swarm.TaskStateRunning && lostNode(nodes, t.NodeID) && st.Running > 0 {
			st.Running--
		}
	}
	if st.Mode != "global" {
		return
	}
	on := map[string]bool{}
	for _, t := range tasks {
		if t.NodeID == "" {
			continue
		}
		wanted := t.DesiredState != swarm.TaskStateShutdown && t.DesiredState != swarm.TaskStateRemove
		if n, ok := nodes[t.NodeID]; wanted && ok && n.Spec.Availability == swarm.NodeAvailabilityDrain {
			wanted = false
		}
		if wanted || (stranded(t) && lostNode(nodes, t.NodeID)) {
			on[t.NodeID] = true
		}
	}
	st.Desired = uint64(len(on))
}

// project turns a service and its tasks into the display projection.
// eligible is the count of nodes a global service runs on when the daemon
// did not report its desired count itself.
func project(stack string, s swarm.Service, tasks []swarm.Task, eligible *uint64) charts.ServiceState {
	st := charts.ServiceState{
		Name:      unscoped(stack, s.Spec.Name),
		ID:        s.ID,
		Version:   s.Version.Index,
		Labels:    s.Spec.Labels,
		CreatedAt: s.CreatedAt,
		UpdatedAt: s.UpdatedAt,
	}
	if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
		st.Image = cs.Image
		st.HasHealthcheck = cs.Healthcheck != nil && len(cs.Healthcheck.Test) > 0 && cs.Healthcheck.Test[0] != "NONE"
	}
	if u := s.UpdateStatus; u != nil {
		st.UpdateState = string(u.State)
		st.UpdateMessage = u.Message
	}

	// A job's tasks from earlier runs are not this run's completions.
	var iteration *uint64
	if s.JobStatus != nil {
		iteration = &s.JobStatus.JobIteration.Index
	}
	for _, t := range tasks {
		if iteration != nil && (t.JobIteration == nil || t.JobIteration.Index != *iteration) {
			continue
		}
		switch {
		case t.Status.State == swarm.TaskStateRunning && t.DesiredState == swarm.TaskStateRunning:
			st.Running++
		case t.Status.State == swarm.TaskStateComplete:
			st.Completed++
		}
	}

	m := s.Spec.Mode
	switch {
	case m.Replicated != nil:
		st.Mode = "replicated"
		if m.Replicated.Replicas != nil {
			st.Desired = *m.Replicated.Replicas
		}
	case m.Global != nil:
		st.Mode = "global"
		st.Desired = globalDesired(s, eligible)
	case m.ReplicatedJob != nil:
		st.Mode = "replicated-job"
		switch {
		case m.ReplicatedJob.TotalCompletions != nil:
			st.Desired = *m.ReplicatedJob.TotalCompletions
		case m.ReplicatedJob.MaxConcurrent != nil:
			st.Desired = *m.ReplicatedJob.MaxConcurrent
		default:
			st.Desired = 1
		}
	case m.GlobalJob != nil:
		st.Mode = "global-job"
		st.Desired = globalDesired(s, eligible)
	}

	st.Tasks = currentTasks(tasks, st.HasHealthcheck, s.Spec.TaskTemplate)
	st.Networks, st.Configs, st.Secrets = references(s, tasks)
	st.Volumes = volumes(s)
	return st
}

func globalDesired(s swarm.Service, eligible *uint64) uint64 {
	if s.ServiceStatus != nil {
		return s.ServiceStatus.DesiredTasks
	}
	if eligible != nil {
		return *eligible
	}
	return 0
}

// currentTasks keeps the tasks that matter for health: those not being shut
// down, and the most recent failure of each slot (or node, for global
// services), newest first.
func currentTasks(tasks []swarm.Task, healthcheck bool, template swarm.TaskSpec) []charts.TaskState {
	var out []charts.TaskState
	lastFailure := make(map[string]swarm.Task)
	for _, t := range tasks {
		if t.DesiredState != swarm.TaskStateShutdown && t.DesiredState != swarm.TaskStateRemove {
			out = append(out, taskState(t, healthcheck, template))
		}
		if t.Status.State == swarm.TaskStateFailed || t.Status.State == swarm.TaskStateRejected {
			key := fmt.Sprintf("slot %d", t.Slot)
			if t.Slot == 0 {
				key = "node " + t.NodeID
			}
			if prev, ok := lastFailure[key]; !ok || t.Status.Timestamp.After(prev.Status.Timestamp) {
				lastFailure[key] = t
			}
		}
	}
	for _, t := range lastFailure {
		if t.DesiredState == swarm.TaskStateShutdown || t.DesiredState == swarm.TaskStateRemove {
			out = append(out, taskState(t, healthcheck, template))
		}
	}
	slices.SortFunc(out, func(a, b charts.TaskState) int {
		if c := b.Timestamp.Compare(a.Timestamp); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

func taskState(t swarm.Task, healthcheck bool, template swarm.TaskSpec) charts.TaskState {
	ts := charts.TaskState{
		Outdated:     outdated(t.Spec, template),
		ID:           t.ID,
		Slot:         t.Slot,
		NodeID:       t.NodeID,
		State:        string(t.Status.State),
		DesiredState: string(t.DesiredState),
		Message:      t.Status.Message,
		Err:          t.Status.Err,
		Timestamp:    t.Status.Timestamp,
	}
	if healthcheck {
		ts.Health = taskHealth(t)
	}
	return ts
}

// outdated reports whether a task's spec differs from its service's task
// template. Swarm copies the template into each task it creates and
// replaces a task whose copy differs, except when only the placement
// changed and the node still satisfies it; placement is left out here for
// that reason, so such a task is never taken for one awaiting replacement.
//
// The daemon fills defaults into the template it returns (restart policy,
// stop grace period, runtime) but not into tasks, so a field the task
// leaves empty is not compared. A change from nothing to something (a
// first environment variable) is then not seen here, and the service is
// judged as before, by its tasks' states.
func outdated(task, template swarm.TaskSpec) bool {
	task.Placement, template.Placement = nil, nil
	return !setFieldsMatch(reflect.ValueOf(task), reflect.ValueOf(template))
}

// setFieldsMatch reports whether every field set in a (recursively, through
// structs and pointers) holds the same value in b.
func setFieldsMatch(a, b reflect.Value) bool {
	if a.IsZero() {
		return true
	}
	switch a.Kind() {
	case reflect.Pointer:
		if b.IsNil() {
			return false
		}
		return setFieldsMatch(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				// A struct of its own making (time.Time): whole.
				return reflect.DeepEqual(a.Interface(), b.Interface())
			}
			if !setFieldsMatch(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// taskHealth reads container health from the task's state. A swarm task
// with a healthcheck stays "starting" until its container first reports
// healthy, and fails with an "unhealthy container" error when it turns
// unhealthy; reading it this way needs no request to the task's node.
func taskHealth(t swarm.Task) string {
	switch t.Status.State {
	case swarm.TaskStateStarting:
		return "starting"
	case swarm.TaskStateRunning:
		return "healthy"
	case swarm.TaskStateFailed:
		if strings.Contains(t.Status.Err, "unhealthy") {
			return "unhealthy"
		}
	}
	return ""
}

// references names what a service uses besides its image. A spec names its
// networks by id only, so their names come from the tasks' attachments.
func references(s swarm.Service, tasks []swarm.Task) (networks, configs, secrets []string) {
	if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
		for _, c := range cs.Configs {
			configs = append(configs, c.ConfigName)
		}
		for _, c := range cs.Secrets {
			secrets = append(secrets, c.SecretName)
		}
	}
	for _, t := range tasks {
		for _, a := range t.NetworksAttachments {
			if n := a.Network.Spec.Name; n != "" && !slices.Contains(networks, n) {
				networks = append(networks, n)
			}
		}
	}
	slices.Sort(networks)
	slices.Sort(configs)
	slices.Sort(secrets)
	return slices.Compact(networks), slices.Compact(configs), slices.Compact(secrets)
}

// volumes names the service's mounts: a named volume by its name, a bind
// mount or an anonymous volume by the path it is mounted at (a source path
// on the host is the node's business, not the console's). tmpfs and other
// mounts that hold nothing across tasks are left out.
func volumes(s swarm.Service) []string {
	cs := s.Spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return nil
	}
	var out []string
	for _, m := range cs.Mounts {
		switch {
		case m.Type == mount.TypeVolume && m.Source != "":
			out = append(out, m.Source)
		case m.Type == mount.TypeVolume || m.Type == mount.TypeBind:
			out = append(out, m.Target)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// annotateTasks names each task's node by hostname where the cache knows
// it and counts the earlier tasks of each running task's slot.
func (b *Backend) annotateTasks(states []charts.TaskState, tasks []swarm.Task, retention int64) {
	byID := make(map[string]swarm.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	for i := range states {
		ts := &states[i]
		ts.NodeName = b.nodes.lookup(ts.NodeID)
		if t, ok := byID[ts.ID]; ok {
			ts.Restarts, ts.RestartsFull = restarts(t, tasks, retention)
		}
	}
}
