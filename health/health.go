// Package health decides how a service, a stack and an application are
// doing, from what one read of the swarm reported about their tasks.
//
// It is a pure function of charts.ServiceState and the clock: no daemon, no
// state kept between passes. The vocabulary is application.Health, so the
// answer can be published as it is. Every Result carries a sentence a person
// can act on, taken from Swarm's own words where it has any (the task error,
// the scheduler's reason, the update status message).
package health

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

// Defaults used by Service when the matching Options field is zero.
const (
	// DefaultStartGrace is long enough for a small image to be pulled and
	// started, short enough that a task stuck in pending is reported while
	// someone is still looking.
	DefaultStartGrace = 2 * time.Minute
	// DefaultUpdateTimeout bounds a whole rolling update.
	DefaultUpdateTimeout = 10 * time.Minute
	// DefaultFailureWindow is how far back a task failure still says
	// something about the service now.
	DefaultFailureWindow = 5 * time.Minute
)

// Service modes as charts.ServiceState.Mode spells them.
const (
	ModeReplicated    = "replicated"
	ModeGlobal        = "global"
	ModeReplicatedJob = "replicated-job"
	ModeGlobalJob     = "global-job"
)

// Options tune the time limits of Service. The zero value uses the defaults.
type Options struct {
	// StartGrace is how long a task may take from its last state change to
	// running (and healthy, with a healthcheck) before it counts as stuck.
	// Callers should add the healthcheck's start_period to it, since Swarm
	// reports a task as "starting" for that long by design.
	// Default DefaultStartGrace.
	StartGrace time.Duration
	// UpdateTimeout is how long a rolling update may run before it is
	// reported as stuck. Default DefaultUpdateTimeout.
	UpdateTimeout time.Duration
	// UpdateStarted is when the current update began (Swarm's
	// UpdateStatus.StartedAt). Zero means unknown: the update is then
	// judged by its tasks only.
	UpdateStarted time.Time
	// FailureWindow is how old a task failure may be and still make a
	// service that is not fully up Degraded rather than Progressing.
	// Default DefaultFailureWindow.
	FailureWindow time.Duration
}

func (o Options) withDefaults() Options {
	if o.StartGrace <= 0 {
		o.StartGrace = DefaultStartGrace
	}
	if o.UpdateTimeout <= 0 {
		o.UpdateTimeout = DefaultUpdateTimeout
	}
	if o.FailureWindow <= 0 {
		o.FailureWindow = DefaultFailureWindow
	}
	return o
}

// Result is the health of one service, stack or application.
type Result struct {
	Health application.Health `json:"health"`
	// Running counts the tasks that satisfy the service: running (and
	// healthy, where a healthcheck is defined), or for a job, completed.
	Running uint64 `json:"running"`
	// Desired is how many of those the service wants: replicas, eligible
	// nodes of a global service, or completions of a job.
	Desired uint64 `json:"desired"`
	// Message says what is going on, in one sentence; for anything but
	// Healthy it says what to look at.
	Message string `json:"message,omitempty"`
}

// Missing is the Result of a service the repository declares and the swarm
// does not hold. Only a caller that read the swarm successfully can know
// that, which is why it is not inferred from an empty ServiceState.
func Missing(desired uint64) Result {
	return Result{
		Health:  application.Missing,
		Desired: desired,
		Message: "declared in the repository but not present on the swarm",
	}
}

// Unknown is the Result of a service, stack or application whose swarm
// could not be read. The error's text becomes the message, so it must
// already be free of credentials.
func Unknown(err error) Result {
	msg := "the swarm could not be read"
	if err != nil {
		msg += ": " + err.Error()
	}
	return Result{Health: application.HealthUnknown, Message: msg}
}

// Swarm's update states (UpdateStatus.State).
const (
	updateUpdating          = "updating"
	updatePaused            = "paused"
	updateCompleted         = "completed"
	updateRollbackStarted   = "rollback_started"
	updateRollbackPaused    = "rollback_paused"
	updateRollbackCompleted = "rollback_completed"
)

// Service judges one service. The checks run from the most specific signal
// to the least: an update Swarm itself stopped or reverted, then the tasks;
// a node the service lost is named in the answer.
func Service(s charts.ServiceState, now time.Time, opts Options) Result {
	return withNodesDown(s, service(s, now, opts))
}

// withNodesDown adds the nodes s lost to r. The backend counts a lost node
// among a global service's desired tasks, which Swarm itself stops doing,
// so such a service is Degraded until the node is back (or drained or
// removed by an operator). A replicated service whose tasks Swarm moved
// elsewhere keeps its verdict, with the node named.
func withNodesDown(s charts.ServiceState, r Result) Result {
	if len(s.NodesDown) == 0 {
		return r
	}
	down := "node " + s.NodesDown[0] + " is down"
	if len(s.NodesDown) > 1 {
		down = "nodes " + strings.Join(s.NodesDown, ", ") + " are down"
	}
	if s.Mode == ModeGlobal {
		if r.Health == application.Healthy || r.Health == application.Progressing {
			return r.with(application.Degraded, "%d/%d running; %s", r.Running, r.Desired, down)
		}
		r.Message += "; " + down
		return r
	}
	if r.Health == application.Healthy {
		r.Message += "; " + down + " and Swarm moved its tasks"
		return r
	}
	r.Message += "; " + down
	return r
}

func service(s charts.ServiceState, now time.Time, opts Options) Result {
	opts = opts.withDefaults()
	job := s.Mode == ModeReplicatedJob || s.Mode == ModeGlobalJob
	t := judgeTasks(s, now, opts, job)
	r := Result{Running: t.up, Desired: s.Desired}

	switch s.UpdateState {
	case updatePaused:
		return r.with(application.Degraded, "update paused: %s", orDefault(s.UpdateMessage, "Swarm stopped the rolling update"))
	case updateRollbackStarted:
		return r.with(application.Degraded, "Swarm is rolling the update back: %s", orDefault(s.UpdateMessage, "the new tasks failed"))
	case updateRollbackPaused:
		return r.with(application.Degraded, "rollback paused: %s", orDefault(s.UpdateMessage, "Swarm stopped rolling the update back"))
	case updateRollbackCompleted:
		return r.with(application.Degraded, "Swarm rolled the update back; the previous spec is running: %s", orDefault(s.UpdateMessage, "the new tasks failed"))
	}

	if s.Desired == 0 && (s.Mode == ModeReplicated || s.Mode == ModeReplicatedJob) {
		if s.Running > 0 {
			return r.with(application.Progressing, "scaling down to 0: %d task(s) still running", s.Running)
		}
		return r.with(application.Suspended, "scaled to 0 replicas")
	}

	if s.UpdateState == updateUpdating {
		if !opts.UpdateStarted.IsZero() && now.Sub(opts.UpdateStarted) > opts.UpdateTimeout {
			return r.with(application.Degraded, "update has been running for %s, longer than its %s timeout; %s",
				now.Sub(opts.UpdateStarted).Round(time.Second), opts.UpdateTimeout, t.counts(job))
		}
		if t.failure != "" {
			return r.with(application.Degraded, "update is failing: %s", t.failure)
		}
		return r.with(application.Progressing, "rolling update in progress: %s", t.counts(job))
	}

	switch {
	case s.Desired == 0:
		// A global service or global job with no eligible node.
		return r.with(application.Degraded, "no node is eligible to run it (check its placement constraints)")
	case t.up >= s.Desired:
		return r.with(application.Healthy, "%s", t.counts(job))
	case t.failure != "":
		return r.with(application.Degraded, "%s; %s", t.counts(job), t.failure)
	case t.stuck != "":
		return r.with(application.Degraded, "%s; %s", t.counts(job), t.stuck)
	case t.starting > 0:
		return r.with(application.Progressing, "%s; %d task(s) starting", t.counts(job), t.starting)
	case job && t.up+t.running >= s.Desired:
		return r.with(application.Progressing, "%s; %d running", t.counts(job), t.running)
	default:
		return r.with(application.Progressing, "%s; waiting for Swarm to schedule tasks", t.counts(job))
	}
}

func (r Result) with(h application.Health, format string, args ...any) Result {
	r.Health = h
	r.Message = fmt.Sprintf(format, args...)
	return r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// taskVerdict is what the tasks of one service add up to.
type taskVerdict struct {
	desired uint64
	// up counts tasks that satisfy the service (see Result.Running).
	up uint64
	// running counts job tasks still running (a job is up when complete).
	running uint64
	// starting counts slots on their way up within the grace.
	starting int
	// failure is the reason of the newest recent failure of a slot that is
	// not up, empty if none.
	failure string
	// stuck is the reason of a slot starting for longer than the grace.
	stuck string
}

func (t taskVerdict) counts(job bool) string {
	if job {
		return fmt.Sprintf("%d/%d completed", t.up, t.desired)
	}
	return fmt.Sprintf("%d/%d running", t.up, t.desired)
}

// Task states as Swarm spells them, grouped by what they mean here.
var (
	startingStates = map[string]bool{
		"new": true, "allocated": true, "pending": true, "assigned": true,
		"accepted": true, "ready": true, "preparing": true, "starting": true,
	}
	failedStates = map[string]bool{"failed": true, "rejected": true}
)

// updateBeginGrace bounds how long after a service's last write a running
// task of an earlier spec is taken as awaiting its replacement. Swarm
// begins an update within a moment of the write; the bound keeps a task
// Swarm chose not to replace from holding the service Progressing.
const updateBeginGrace = 30 * time.Second

// awaitsReplacement reports whether s was written recently enough that an
// outdated task of it is still to be replaced (see updateBeginGrace). A
// service whose write time is unknown is judged by its tasks' states only.
func awaitsReplacement(s charts.ServiceState, now time.Time) bool {
	return !s.UpdatedAt.IsZero() && now.Sub(s.UpdatedAt) < updateBeginGrace
}

// judgeTasks groups tasks by slot (replicated) or node (global), looks at the
// newest task of each group, and remembers the newest recent failure of a
// group that is not up. Counting running tasks per group rather than in
// total keeps a start-first update, which briefly runs two tasks in a slot,
// from looking like more capacity than there is.
func judgeTasks(s charts.ServiceState, now time.Time, opts Options, job bool) taskVerdict {
	v := taskVerdict{desired: s.Desired}
	groups := map[string][]charts.TaskState{}
	var keys []string
	for _, t := range s.Tasks {
		k := groupKey(t)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	sort.Strings(keys)

	var failureAt, stuckAt time.Time
	for _, k := range keys {
		tasks := groups[k]
		sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].Timestamp.After(tasks[j].Timestamp) })

		up, starting := false, false
		for _, t := range tasks {
			if t.DesiredState == "shutdown" || t.DesiredState == "remove" || t.NodeLost {
				continue
			}
			switch {
			case job && t.State == "complete":
				up = true
			case job && t.State == "running":
				v.running++
			case !job && t.State == "running" && t.Outdated && awaitsReplacement(s, now):
				// Written, but Swarm has not begun replacing it.
				starting = true
			case t.State == "running" && (!s.HasHealthcheck || t.Health == "healthy") && t.Health != "unhealthy":
				up = true
			case t.State == "running" && t.Health == "unhealthy":
				// Swarm replaces it; until then it is a failure.
			case startingStates[t.State] || (t.State == "running" && t.Health == "starting") ||
				(t.State == "running" && s.HasHealthcheck && t.Health == ""):
				if t.Err != "" {
					// The scheduler explains why it cannot place the
					// task ("no suitable node ..."); waiting won't help.
					if v.stuck == "" || t.Timestamp.After(stuckAt) {
						stuckAt, v.stuck = t.Timestamp, reason(t)
					}
					continue
				}
				if now.Sub(t.Timestamp) > opts.StartGrace {
					if v.stuck == "" || t.Timestamp.After(stuckAt) {
						stuckAt = t.Timestamp
						v.stuck = fmt.Sprintf("a task has been %s for %s", describeState(t), now.Sub(t.Timestamp).Round(time.Second))
					}
					continue
				}
				starting = true
			}
		}
		if up {
			v.up++
			continue
		}
		if starting {
			v.starting++
		}
		if !job && !starting && exitedForGood(tasks, now, opts) {
			// Swarm keeps such a slot empty for good: nothing will be
			// scheduled, so waiting is not the answer.
			if t := tasks[0]; v.stuck == "" || t.Timestamp.After(stuckAt) {
				stuckAt = t.Timestamp
				v.stuck = fmt.Sprintf("a task exited with status 0 %s ago and Swarm started none after it (a restart policy of on-failure or none does not restart a task that exits 0); a new commit or `docker service update --force` starts it again",
					now.Sub(t.Timestamp).Round(time.Second))
			}
		}
		for _, t := range tasks {
			if !isFailure(t) || now.Sub(t.Timestamp) > opts.FailureWindow {
				continue
			}
			if v.failure == "" || t.Timestamp.After(failureAt) {
				failureAt, v.failure = t.Timestamp, reason(t)
			}
			break
		}
	}
	// Job completions and global tasks are reported by the backend too;
	// trust the larger of the two so a task list cut short cannot make a
	// finished job look unfinished.
	if job && s.Completed > v.up {
		v.up = s.Completed
	}
	return v
}

// exitedForGood reports whether a slot (or node) of a service that is not
// a job holds no task Swarm means to run and its newest task completed
// (exited 0) longer than the start grace ago. Swarm replaces such a task
// only under restart condition "any", within its restart delay; after the
// grace it will not. tasks is newest first.
func exitedForGood(tasks []charts.TaskState, now time.Time, opts Options) bool {
	if len(tasks) == 0 || tasks[0].State != "complete" || now.Sub(tasks[0].Timestamp) <= opts.StartGrace {
		return false
	}
	for _, t := range tasks {
		if t.DesiredState != "shutdown" && t.DesiredState != "remove" {
			return false
		}
	}
	return true
}

func groupKey(t charts.TaskState) string {
	if t.Slot > 0 {
		return fmt.Sprintf("slot/%d", t.Slot)
	}
	if t.NodeID != "" {
		return "node/" + t.NodeID
	}
	return "task/" + t.ID
}

func isFailure(t charts.TaskState) bool {
	return failedStates[t.State] || (t.State == "running" && t.Health == "unhealthy")
}

func describeState(t charts.TaskState) string {
	if t.State == "running" {
		return "running without passing its healthcheck"
	}
	return t.State
}

// reason turns a task into the sentence a person needs: Swarm's error if it
// gave one, otherwise its status message, with the state for context.
func reason(t charts.TaskState) string {
	switch {
	case t.State == "running" && t.Health == "unhealthy":
		return "a task is running but its healthcheck fails"
	case t.State == "rejected" && t.Err != "":
		return "a task was rejected: " + t.Err
	case t.State == "failed" && t.Err != "":
		return "a task failed: " + t.Err
	case t.Err != "":
		return fmt.Sprintf("a task is %s: %s", t.State, t.Err)
	case t.Message != "":
		return fmt.Sprintf("a task is %s: %s", t.State, t.Message)
	}
	return "a task is " + t.State
}
