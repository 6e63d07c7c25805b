package reconcile

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/labels"
)

// judgeHooks publishes where each hook of the pass's manifest stands, from
// one read of its stack: the job services and their tasks, with the labels
// they were created with. Nothing of it is kept between passes, so a
// restarted controller shows the same; only the log tail of a failed hook
// comes from the pass, which reads it whenever it finds the failure.
func (c *Controller) judgeHooks(p *pass, states []charts.ServiceState) {
	if p.rendered == nil {
		return
	}
	o, err := p.ordering()
	if err != nil || !o.order.HasHooks() {
		p.status.Hooks = nil
		return
	}
	view := hookView{
		order:   o.order,
		target:  hookTarget(p),
		logs:    p.hookLogs,
		removed: p.hooks,
	}
	switch {
	case p.recorded != nil:
		view.recorded, view.revision = true, p.recorded.Revision
	case p.action == charts.Unchanged && p.latest != nil:
		view.recorded, view.revision = true, p.latest.Revision
	}
	p.status.Hooks = view.statuses(states)
}

// noteHookFailed keeps what the pass learnt of a failed hook: its log tail,
// and its state in case the job is removed next (deletePolicy HookFailed),
// so the status still shows the failure the pass ended with.
func (p *pass) noteHookFailed(name string, s charts.ServiceState, r hookResult, lines []string) {
	if p.hookLogs == nil {
		p.hookLogs = map[string][]string{}
	}
	if p.hooks == nil {
		p.hooks = map[string]application.HookStatus{}
	}
	p.hookLogs[s.ID] = lines
	h := jobStatus(s, r)
	h.Name, h.LogTail = name, lines
	p.hooks[name] = h
	// The published status may share the slice: change a copy.
	p.status.Hooks = slices.Clone(p.status.Hooks)
	for i := range p.status.Hooks {
		if p.status.Hooks[i].Name == name {
			h.Phase, h.Wave = p.status.Hooks[i].Phase, p.status.Hooks[i].Wave
			p.status.Hooks[i] = h
		}
	}
}

// hookView is what the hook states are judged against.
type hookView struct {
	order  compose.Ordering
	target string // digest of the manifest being synced
	// recorded is set when that manifest is the newest record's: every
	// PreSync and PostSync hook of it succeeded, whether or not its job is
	// still there (deletePolicy HookSucceeded removes it).
	recorded bool
	revision int
	logs     map[string][]string               // by job id
	removed  map[string]application.HookStatus // failed jobs this pass may have removed
}

// statuses lists the hooks phase by phase (PreSync, PostSync, SyncFail),
// each phase by wave and name, as they run. A hook whose job this manifest
// has not created is Pending, or Skipped once a hook of an earlier wave of
// the sync failed: a failed PreSync hook leaves every later PreSync hook and
// every PostSync hook uncreated.
func (v hookView) statuses(states []charts.ServiceState) []application.HookStatus {
	live := make(map[string]charts.ServiceState, len(states))
	for _, s := range states {
		live[s.Name] = s
	}
	var out []application.HookStatus
	var failed string // the first failed hook of the sync, "phase name"
	for _, phase := range []compose.HookPhase{compose.PreSync, compose.PostSync, compose.SyncFail} {
		if phase == compose.SyncFail {
			failed = ""
		}
		for _, w := range v.order.HookWaves(phase) {
			waveFailed := ""
			for _, name := range w.Names {
				h := v.one(name, phase, live)
				h.Name, h.Phase, h.Wave = name, string(phase), w.Wave
				if h.State == application.HookPending && failed != "" {
					h.State, h.Message = application.HookSkipped, "not created: "+failed+" failed"
				}
				if h.State == application.HookFailed && waveFailed == "" {
					waveFailed = fmt.Sprintf("%s hook %s", phase, name)
				}
				out = append(out, h)
			}
			if failed == "" {
				failed = waveFailed
			}
		}
	}
	return out
}

// one is a hook's state without its place in the order.
func (v hookView) one(name string, phase compose.HookPhase, live map[string]charts.ServiceState) application.HookStatus {
	s, exists := live[name]
	switch {
	case exists && s.Labels[labels.HookTarget] == v.target:
		h := jobStatus(s, judgeHook(s))
		if h.State == application.HookFailed {
			h.LogTail = v.logs[s.ID]
		}
		return h
	case v.removed[name].State != "":
		return v.removed[name]
	case v.recorded && phase != compose.SyncFail:
		return application.HookStatus{State: application.HookSucceeded, Revision: v.revision,
			Message: "succeeded when this revision was synced; its job is gone (deletePolicy " + string(v.order.Of(name).DeletePolicy) + ")"}
	case v.recorded:
		return application.HookStatus{State: application.HookSkipped, Message: "not run: the sync of this revision did not fail"}
	case exists:
		rev, _ := strconv.Atoi(s.Labels[labels.Revision])
		return application.HookStatus{State: application.HookPending,
			Message: fmt.Sprintf("not run for this manifest yet; its job of revision %d is kept until it runs again", rev)}
	case phase == compose.SyncFail:
		return application.HookStatus{State: application.HookPending, Message: "runs only if the sync fails"}
	}
	return application.HookStatus{State: application.HookPending, Message: "not run for this manifest yet"}
}

// jobStatus is the state of a hook job created for the manifest being
// synced, from its tasks.
func jobStatus(s charts.ServiceState, r hookResult) application.HookStatus {
	h := application.HookStatus{StartedAt: s.CreatedAt, Message: r.message}
	h.Revision, _ = strconv.Atoi(s.Labels[labels.Revision])
	switch r.outcome {
	case hookSucceeded:
		h.State = application.HookSucceeded
	case hookFailed:
		h.State = application.HookFailed
	default:
		h.State = application.HookRunning
	}
	if t := r.task; t != nil {
		h.FinishedAt = t.Timestamp
		h.ExitCode = exitCode(*t)
	}
	return h
}

// exitStatus finds the exit status in Swarm's words for a failed task.
var exitStatus = regexp.MustCompile(`non-zero exit \((-?\d+)\)`)

// exitCode is a finished task's exit status when Swarm says what it was:
// 0 for a completed task, the number in its error for a failed one.
func exitCode(t charts.TaskState) *int {
	if t.State == "complete" {
		return new(int)
	}
	m := exitStatus.FindStringSubmatch(t.Err)
	if m == nil {
		return nil
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return nil
	}
	return &n
}
