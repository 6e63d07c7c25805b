package health

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

// task builds a task of slot n in state st, last changed d ago.
func task(n int, st string, d time.Duration) charts.TaskState {
	return charts.TaskState{ID: st + string(rune('a'+n)), Slot: n, State: st, DesiredState: "running", Timestamp: ago(d)}
}

func onNode(node, st string, d time.Duration) charts.TaskState {
	return charts.TaskState{ID: node + st, NodeID: node, State: st, DesiredState: "running", Timestamp: ago(d)}
}

// lostOn is a task whose node is lost: its state is the node's last report.
func lostOn(node, st string, d time.Duration) charts.TaskState {
	t := onNode(node, st, d)
	t.NodeLost = true
	return t
}

func with(t charts.TaskState, f func(*charts.TaskState)) charts.TaskState {
	f(&t)
	return t
}

func shutdown(t charts.TaskState) charts.TaskState {
	t.DesiredState = "shutdown"
	return t
}

func health(h string) func(*charts.TaskState) { return func(t *charts.TaskState) { t.Health = h } }

func failed(err string) func(*charts.TaskState) { return func(t *charts.TaskState) { t.Err = err } }

func TestService(t *testing.T) {
	tests := []struct {
		name    string
		s       charts.ServiceState
		opts    Options
		want    application.Health
		running uint64
		msg     string // substring of the message
	}{
		{
			name:    "replicas all running",
			s:       charts.ServiceState{Mode: ModeReplicated, Desired: 2, Running: 2, Tasks: []charts.TaskState{task(1, "running", time.Hour), task(2, "running", time.Hour)}},
			want:    application.Healthy,
			running: 2,
			msg:     "2/2 running",
		},
		{
			// After a daemon restart, say: the task exited 0 and a restart
			// policy of on-failure leaves the slot empty for good.
			name: "a task that exited 0 and was never replaced",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Tasks: []charts.TaskState{
				shutdown(task(1, "complete", 3*time.Minute)), shutdown(task(1, "failed", time.Hour))}},
			want: application.Degraded,
			msg:  "exited with status 0 3m0s ago and Swarm started none after it",
		},
		{
			// Under restart condition "any" Swarm starts the next task after
			// its restart delay: within the grace that is still waiting.
			name: "a task that exited 0 moments ago",
			s:    charts.ServiceState{Mode: ModeReplicated, Desired: 1, Tasks: []charts.TaskState{shutdown(task(1, "complete", 5*time.Second))}},
			want: application.Progressing,
			msg:  "waiting for Swarm to schedule tasks",
		},
		{
			name: "a completed task whose slot has a new one starting",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Tasks: []charts.TaskState{
				task(1, "preparing", 5*time.Second), shutdown(task(1, "complete", 10*time.Minute))}},
			want: application.Progressing,
			msg:  "1 task(s) starting",
		},
		{
			name: "tasks starting within the grace",
			s:    charts.ServiceState{Mode: ModeReplicated, Desired: 2, Tasks: []charts.TaskState{task(1, "preparing", 10*time.Second), task(2, "pending", 5*time.Second)}},
			want: application.Progressing,
			msg:  "2 task(s) starting",
		},
		{
			name: "task stuck pending past the grace",
			s:    charts.ServiceState{Mode: ModeReplicated, Desired: 1, Tasks: []charts.TaskState{task(1, "pending", 10*time.Minute)}},
			want: application.Degraded,
			msg:  "has been pending for 10m0s",
		},
		{
			name: "healthcheck start period: running but not yet healthy",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, HasHealthcheck: true,
				Tasks: []charts.TaskState{with(task(1, "running", 20*time.Second), health("starting"))}},
			want: application.Progressing,
			msg:  "0/1 running; 1 task(s) starting",
		},
		{
			name: "healthcheck start period longer than the default grace",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, HasHealthcheck: true,
				Tasks: []charts.TaskState{with(task(1, "running", 3*time.Minute), health("starting"))}},
			opts: Options{StartGrace: 5 * time.Minute},
			want: application.Progressing,
		},
		{
			name: "healthcheck never passes",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, HasHealthcheck: true,
				Tasks: []charts.TaskState{with(task(1, "running", 3*time.Minute), health("starting"))}},
			want: application.Degraded,
			msg:  "running without passing its healthcheck",
		},
		{
			name: "healthy with healthcheck",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, HasHealthcheck: true,
				Tasks: []charts.TaskState{with(task(1, "running", time.Minute), health("healthy"))}},
			want:    application.Healthy,
			running: 1,
		},
		{
			name: "unhealthy container",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, HasHealthcheck: true,
				Tasks: []charts.TaskState{with(task(1, "running", time.Minute), health("unhealthy"))}},
			want: application.Degraded,
			msg:  "healthcheck fails",
		},
		{
			name: "rolling update: old task shutting down, new one starting",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 2, Running: 2, UpdateState: "updating",
				Tasks: []charts.TaskState{
					task(1, "running", 10*time.Second),
					shutdown(task(2, "running", time.Hour)),
					task(2, "starting", 2*time.Second),
				}},
			want:    application.Progressing,
			running: 1,
			msg:     "rolling update in progress: 1/2 running",
		},
		{
			name: "start-first update: both tasks of a slot running count once",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 2, UpdateState: "updating",
				Tasks: []charts.TaskState{task(1, "running", time.Hour), task(1, "running", time.Second)}},
			want:    application.Progressing,
			running: 1,
		},
		{
			name: "update past its timeout",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, UpdateState: "updating",
				Tasks: []charts.TaskState{task(1, "starting", time.Minute)}},
			opts: Options{UpdateStarted: ago(20 * time.Minute)},
			want: application.Degraded,
			msg:  "longer than its 10m0s timeout",
		},
		{
			name: "update whose new task is rejected",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, UpdateState: "updating",
				Tasks: []charts.TaskState{with(task(1, "rejected", time.Second), failed("No such image: flotilla-test/app:9"))}},
			want: application.Degraded,
			msg:  "update is failing: a task was rejected: No such image: flotilla-test/app:9",
		},
		{
			name: "paused update",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, UpdateState: "paused",
				UpdateMessage: "update paused due to failure or early termination of task x",
				Tasks:         []charts.TaskState{task(1, "running", time.Hour)}},
			want:    application.Degraded,
			running: 1,
			msg:     "update paused: update paused due to failure",
		},
		{
			name: "rollback completed",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, UpdateState: "rollback_completed",
				UpdateMessage: "rollback completed",
				Tasks:         []charts.TaskState{task(1, "running", time.Minute)}},
			want:    application.Degraded,
			running: 1,
			msg:     "Swarm rolled the update back",
		},
		{
			name: "rollback started",
			s:    charts.ServiceState{Mode: ModeReplicated, Desired: 1, UpdateState: "rollback_started", UpdateMessage: "update rolled back due to failure or early termination of task y"},
			want: application.Degraded,
			msg:  "rolling the update back: update rolled back",
		},
		{
			name:    "completed update judged by its tasks",
			s:       charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1, UpdateState: "completed", Tasks: []charts.TaskState{task(1, "running", time.Minute)}},
			want:    application.Healthy,
			running: 1,
		},
		{
			name: "no suitable node",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1,
				Tasks: []charts.TaskState{with(task(1, "pending", time.Second), failed("no suitable node (scheduling constraints not satisfied on 1 node)"))}},
			want: application.Degraded,
			msg:  "0/1 running; a task is pending: no suitable node (scheduling constraints not satisfied on 1 node)",
		},
		{
			name: "missing image",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1,
				Tasks: []charts.TaskState{
					with(task(1, "rejected", 3*time.Second), failed("No such image: flotilla-test/nope:1")),
					task(1, "new", time.Second),
				}},
			want: application.Degraded,
			msg:  "a task was rejected: No such image: flotilla-test/nope:1",
		},
		{
			name: "crash loop: failed task and its replacement starting",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1,
				Tasks: []charts.TaskState{
					with(task(1, "failed", 4*time.Second), failed("task: non-zero exit (1)")),
					task(1, "pending", time.Second),
				}},
			want: application.Degraded,
			msg:  "a task failed: task: non-zero exit (1)",
		},
		{
			name: "an old failure does not outweigh a replacement starting now",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1,
				Tasks: []charts.TaskState{
					with(task(1, "failed", time.Hour), failed("task: non-zero exit (1)")),
					task(1, "starting", time.Second),
				}},
			want: application.Progressing,
		},
		{
			name: "failure of a slot that is up again is history",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 1, Running: 1,
				Tasks: []charts.TaskState{
					with(task(1, "failed", time.Minute), failed("task: non-zero exit (1)")),
					task(1, "running", 30*time.Second),
				}},
			want:    application.Healthy,
			running: 1,
		},
		{
			name: "scaled to zero on purpose",
			s:    charts.ServiceState{Mode: ModeReplicated},
			want: application.Suspended,
		},
		{
			name: "scaling down to zero",
			s:    charts.ServiceState{Mode: ModeReplicated, Running: 1, Tasks: []charts.TaskState{shutdown(task(1, "running", time.Hour))}},
			want: application.Progressing,
			msg:  "scaling down",
		},
		{
			name: "no task scheduled yet",
			s:    charts.ServiceState{Mode: ModeReplicated, Desired: 1},
			want: application.Progressing,
			msg:  "waiting for Swarm",
		},
		{
			name: "global on every node",
			s: charts.ServiceState{Mode: ModeGlobal, Desired: 2, Running: 2,
				Tasks: []charts.TaskState{onNode("n1", "running", time.Hour), onNode("n2", "running", time.Hour)}},
			want:    application.Healthy,
			running: 2,
		},
		{
			name: "global: a node joined and its task is starting",
			s: charts.ServiceState{Mode: ModeGlobal, Desired: 3, Running: 2,
				Tasks: []charts.TaskState{onNode("n1", "running", time.Hour), onNode("n2", "running", time.Hour), onNode("n3", "assigned", time.Second)}},
			want:    application.Progressing,
			running: 2,
			msg:     "2/3 running; 1 task(s) starting",
		},
		{
			name: "global: a node left and its task lingers",
			s: charts.ServiceState{Mode: ModeGlobal, Desired: 1, Running: 2,
				Tasks: []charts.TaskState{onNode("n1", "running", time.Hour), onNode("gone", "running", time.Hour), shutdown(onNode("gone2", "orphaned", time.Minute))}},
			want:    application.Healthy,
			running: 2,
		},
		{
			name: "global with no eligible node",
			s:    charts.ServiceState{Mode: ModeGlobal},
			want: application.Degraded,
			msg:  "no node is eligible",
		},
		{
			name: "replicated job completed",
			s: charts.ServiceState{Mode: ModeReplicatedJob, Desired: 2, Completed: 2,
				Tasks: []charts.TaskState{with(task(1, "complete", time.Minute), func(t *charts.TaskState) { t.DesiredState = "complete" }), with(task(2, "complete", time.Minute), func(t *charts.TaskState) { t.DesiredState = "complete" })}},
			want:    application.Healthy,
			running: 2,
			msg:     "2/2 completed",
		},
		{
			name: "replicated job still running",
			s: charts.ServiceState{Mode: ModeReplicatedJob, Desired: 2, Running: 1, Completed: 1,
				Tasks: []charts.TaskState{with(task(1, "complete", time.Minute), func(t *charts.TaskState) { t.DesiredState = "complete" }), task(2, "running", 10*time.Second)}},
			want:    application.Progressing,
			running: 1,
			msg:     "1/2 completed; 1 running",
		},
		{
			name: "replicated job whose task failed",
			s: charts.ServiceState{Mode: ModeReplicatedJob, Desired: 1,
				Tasks: []charts.TaskState{with(task(1, "failed", 5*time.Second), failed("task: non-zero exit (2)"))}},
			want: application.Degraded,
			msg:  "0/1 completed; a task failed: task: non-zero exit (2)",
		},
		{
			name: "global job done on every node",
			s: charts.ServiceState{Mode: ModeGlobalJob, Desired: 2, Completed: 2,
				Tasks: []charts.TaskState{onNode("n1", "complete", time.Minute), onNode("n2", "complete", time.Minute)}},
			want:    application.Healthy,
			running: 2,
		},
		{
			name: "global job waiting on a new node",
			s: charts.ServiceState{Mode: ModeGlobalJob, Desired: 2, Completed: 1,
				Tasks: []charts.TaskState{onNode("n1", "complete", time.Minute), onNode("n2", "starting", time.Second)}},
			want:    application.Progressing,
			running: 1,
		},
		{
			name: "replicated job of zero completions",
			s:    charts.ServiceState{Mode: ModeReplicatedJob},
			want: application.Suspended,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Service(tt.s, now, tt.opts)
			if got.Health != tt.want {
				t.Errorf("Health = %s, want %s (message %q)", got.Health, tt.want, got.Message)
			}
			if got.Running != tt.running {
				t.Errorf("Running = %d, want %d", got.Running, tt.running)
			}
			if got.Desired != tt.s.Desired {
				t.Errorf("Desired = %d, want %d", got.Desired, tt.s.Desired)
			}
			if !strings.Contains(got.Message, tt.msg) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.msg)
			}
			if got.Message == "" {
				t.Error("Message is empty")
			}
		})
	}
}

func TestMissingAndUnknown(t *testing.T) {
	if r := Missing(3); r.Health != application.Missing || r.Desired != 3 || r.Message == "" {
		t.Errorf("Missing(3) = %+v", r)
	}
	r := Unknown(errors.New("Cannot connect to the Docker daemon"))
	if r.Health != application.HealthUnknown || !strings.Contains(r.Message, "Cannot connect") {
		t.Errorf("Unknown = %+v", r)
	}
}

func TestStack(t *testing.T) {
	tests := []struct {
		name  string
		parts map[string]Result
		want  application.Health
		msg   string
	}{
		{
			name: "empty",
			want: application.Healthy,
			msg:  "0/0 running",
		},
		{
			name: "all healthy",
			parts: map[string]Result{
				"web": {Health: application.Healthy, Running: 2, Desired: 2, Message: "2/2 running"},
				"db":  {Health: application.Healthy, Running: 1, Desired: 1, Message: "1/1 running"},
			},
			want: application.Healthy,
			msg:  "3/3 running",
		},
		{
			name: "worst part's reason",
			parts: map[string]Result{
				"web":    {Health: application.Healthy, Running: 5, Desired: 5},
				"db":     {Health: application.Progressing, Running: 1, Desired: 2, Message: "1/2 running; 1 task(s) starting"},
				"worker": {Health: application.Degraded, Running: 1, Desired: 2, Message: "1/2 running; a task failed: task: non-zero exit (1)"},
			},
			want: application.Degraded,
			msg:  "7/9 running; worker: 1/2 running; a task failed",
		},
		{
			name: "ties broken by name",
			parts: map[string]Result{
				"b": {Health: application.Degraded, Message: "b broke"},
				"a": {Health: application.Degraded, Message: "a broke"},
			},
			want: application.Degraded,
			msg:  "a: a broke",
		},
		{
			name: "suspended part of a healthy stack",
			parts: map[string]Result{
				"web":   {Health: application.Healthy, Running: 1, Desired: 1},
				"debug": {Health: application.Suspended, Message: "scaled to 0 replicas"},
			},
			want: application.Suspended,
			msg:  "debug: scaled to 0 replicas",
		},
		{
			name: "missing beats progressing, degraded beats missing",
			parts: map[string]Result{
				"a": Missing(1),
				"b": {Health: application.Progressing},
				"c": {Health: application.Degraded, Message: "c broke"},
			},
			want: application.Degraded,
			msg:  "c: c broke",
		},
		{
			name: "unknown is worst",
			parts: map[string]Result{
				"a": {Health: application.Degraded},
				"b": Unknown(errors.New("timeout")),
			},
			want: application.HealthUnknown,
			msg:  "b: the swarm could not be read: timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Stack(tt.parts)
			if got.Health != tt.want {
				t.Errorf("Health = %s, want %s", got.Health, tt.want)
			}
			if !strings.Contains(got.Message, tt.msg) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.msg)
			}
		})
	}
}

func TestWorst(t *testing.T) {
	got := Worst(
		Result{Health: application.Healthy, Running: 2, Desired: 2},
		Result{Health: application.Missing, Desired: 1, Message: "declared in the repository but not present on the swarm"},
	)
	if got.Health != application.Missing || got.Running != 2 || got.Desired != 3 {
		t.Errorf("Worst = %+v", got)
	}
	if got.Message != "2/3 running; declared in the repository but not present on the swarm" {
		t.Errorf("Message = %q", got.Message)
	}
}

func TestAServiceThatLostANodeNamesItAndAGlobalOneIsDegradedUntilItIsBack(t *testing.T) {
	tests := []struct {
		name    string
		s       charts.ServiceState
		want    application.Health
		desired uint64
		msg     string
	}{
		{
			// The backend counts the lost node among the desired; its
			// task's last report (running) does not count.
			name: "global service, one of three nodes down",
			s: charts.ServiceState{Mode: ModeGlobal, Desired: 3, Running: 2, NodesDown: []string{"edge-3"},
				Tasks: []charts.TaskState{onNode("n1", "running", time.Hour), onNode("n2", "running", time.Hour), lostOn("n3", "running", time.Hour)}},
			want:    application.Degraded,
			desired: 3,
			msg:     "2/3 running; node edge-3 is down",
		},
		{
			name: "global service, two nodes down",
			s: charts.ServiceState{Mode: ModeGlobal, Desired: 3, Running: 1, NodesDown: []string{"a", "b"},
				Tasks: []charts.TaskState{onNode("n1", "running", time.Hour)}},
			want:    application.Degraded,
			desired: 3,
			msg:     "1/3 running; nodes a, b are down",
		},
		{
			name: "replicated service whose task Swarm moved",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 2, Running: 2, NodesDown: []string{"edge-3"},
				Tasks: []charts.TaskState{task(1, "running", time.Hour), task(2, "running", time.Second)}},
			want:    application.Healthy,
			desired: 2,
			msg:     "2/2 running; node edge-3 is down and Swarm moved its tasks",
		},
		{
			// Swarm has not moved it yet: the lost node's task is not
			// known to run.
			name: "replicated service whose task is still on the lost node",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 2, Running: 1, NodesDown: []string{"edge-3"},
				Tasks: []charts.TaskState{task(1, "running", time.Hour), with(task(2, "running", time.Hour), func(t *charts.TaskState) { t.NodeLost = true })}},
			want:    application.Progressing,
			desired: 2,
			msg:     "node edge-3 is down",
		},
		{
			name: "replicated service whose replacement is starting",
			s: charts.ServiceState{Mode: ModeReplicated, Desired: 2, Running: 1, NodesDown: []string{"edge-3"},
				Tasks: []charts.TaskState{task(1, "running", time.Hour), task(2, "preparing", time.Second)}},
			want:    application.Progressing,
			desired: 2,
			msg:     "1 task(s) starting; node edge-3 is down",
		},
		{
			name: "global service with every node up",
			s: charts.ServiceState{Mode: ModeGlobal, Desired: 2, Running: 2,
				Tasks: []charts.TaskState{onNode("n1", "running", time.Hour), onNode("n2", "running", time.Hour)}},
			want:    application.Healthy,
			desired: 2,
			msg:     "2/2 running",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Service(tt.s, now, Options{})
			if got.Health != tt.want || got.Desired != tt.desired || !strings.Contains(got.Message, tt.msg) {
				t.Errorf("got %s %d/%d %q, want %s desired %d with %q", got.Health, got.Running, got.Desired, got.Message, tt.want, tt.desired, tt.msg)
			}
		})
	}
}

func TestStackSortedRollsUpLikeStackForPartsInNameOrder(t *testing.T) {
	results := map[string]Result{
		"web":    {Health: application.Healthy, Running: 2, Desired: 2},
		"api":    {Health: application.Degraded, Running: 1, Desired: 3, Message: "1/3 running"},
		"worker": {Health: application.Degraded, Running: 0, Desired: 1, Message: "0/1 running"},
		"db":     Missing(1),
	}
	names := []string{"api", "db", "web", "worker"}
	parts := make([]Result, len(names))
	for i, n := range names {
		parts[i] = results[n]
	}
	if got, want := StackSorted(names, parts), Stack(results); got != want {
		t.Fatalf("StackSorted = %+v, Stack = %+v", got, want)
	}
}

// Right after a write, before Swarm marks the update as begun, the running
// tasks are the previous spec's: the service is not yet what was written,
// so it is Progressing, not Healthy (a wave gate would otherwise write the
// next wave at once). A task Swarm chose to keep (placement changed, node
// still fits) does not hold the service back once the write is old.
func TestATaskOfAnEarlierSpecRightAfterAWriteIsNotHealthy(t *testing.T) {
	outdated := func(t *charts.TaskState) { t.Outdated = true }
	svc := func(written time.Duration, tasks ...charts.TaskState) charts.ServiceState {
		return charts.ServiceState{Mode: ModeReplicated, Desired: 2, Running: 2, UpdateState: "completed", UpdatedAt: ago(written), Tasks: tasks}
	}
	for _, tc := range []struct {
		name string
		s    charts.ServiceState
		want application.Health
	}{
		{"written a moment ago, no task replaced yet", svc(time.Second, with(task(1, "running", time.Hour), outdated), with(task(2, "running", time.Hour), outdated)), application.Progressing},
		{"written a moment ago, one slot replaced", svc(time.Second, task(1, "running", time.Second), with(task(2, "running", time.Hour), outdated)), application.Progressing},
		{"written a moment ago, every slot replaced", svc(time.Second, task(1, "running", time.Second), task(2, "running", time.Second)), application.Healthy},
		{"start-first: the new task runs beside the old in its slot", svc(time.Second, task(1, "running", time.Second), with(task(1, "running", time.Hour), outdated), task(2, "running", time.Second)), application.Healthy},
		{"written long ago, a task Swarm kept", svc(time.Hour, with(task(1, "running", time.Hour), outdated), task(2, "running", time.Hour)), application.Healthy},
		{"write time unknown", svc(0, with(task(1, "running", time.Hour), outdated), task(2, "running", time.Hour)), application.Healthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			if tc.name == "write time unknown" {
				s.UpdatedAt = time.Time{}
			}
			if got := Service(s, now, Options{}); got.Health != tc.want {
				t.Errorf("Service() = %s (%s), want %s", got.Health, got.Message, tc.want)
			}
		})
	}
}
