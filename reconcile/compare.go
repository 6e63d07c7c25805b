package reconcile

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/drift"
)

// verdict is what comparing one declared service with the swarm concluded.
// The status (detectDrift) and `app diff` (Diff) are both written from it,
// so the two cannot tell a different story about the same service.
type verdict string

const (
	verdictSynced     verdict = "synced"
	verdictDrifted    verdict = "drift"
	verdictMissing    verdict = "missing"
	verdictUpdating   verdict = "updating"
	verdictRolledBack verdict = "rolledBack"
)

// serviceVerdict is one declared service's comparison.
type serviceVerdict struct {
	scoped, short string
	verdict       verdict
	// changes are the fields that differ: drift to report and heal for
	// verdictDrifted, the difference Swarm's rollback left for
	// verdictRolledBack (shown, never healed).
	changes []drift.Change
	// notKept are differences on fields a write of this controller could
	// not make stick: reported (notKeptNotes says so in words), and not
	// healed until the desired value changes.
	notKept      []drift.Change
	notKeptNotes []string
	// inMotionSince is when the service was first seen updating or rolling
	// back without a pause; zero when it is at rest.
	inMotionSince time.Time
	// notSettling says a service has been moving longer than its update
	// (or rollback) config allows: an update is then compared anyway, a
	// rollback only named.
	notSettling string
}

// driftMemory is what the comparison remembers about one application
// between passes. Motion lives in the controller only: losing it on a
// restart costs one allowance. What was not kept is also kept in the swarm
// where the backend can (capability.NotKeptMemory), so a restart does not
// write those fields again.
type driftMemory struct {
	// motionSince holds, per scoped service, when it was first seen in
	// motion; a service seen at rest is forgotten.
	motionSince map[string]time.Time
	// notKept holds, per scoped service and field, what the controller
	// wrote and what the daemon kept instead: digests (keptSum) of the
	// desired and live renderings right after the write, and the API
	// version it used. Digests, because the memory is also kept in the
	// swarm, and a rendering may be a stack's configuration.
	notKept map[string]map[string]capability.NotKeptField
	// notKeptRestored is set once the swarm's copy of notKept was read
	// (restoreNotKept), which a controller does once per application.
	notKeptRestored bool
}

// clone copies m so a comparison can read it outside the controller's lock.
func (m driftMemory) clone() driftMemory {
	out := driftMemory{motionSince: maps.Clone(m.motionSince), notKept: make(map[string]map[string]capability.NotKeptField, len(m.notKept)),
		notKeptRestored: m.notKeptRestored}
	for k, v := range m.notKept {
		out.notKept[k] = maps.Clone(v)
	}
	return out
}

// compareInput is everything compareServices decides from.
type compareInput struct {
	stack string
	cmp   comparison
	// rolledBack are services seen rolled back under the current manifest.
	rolledBack map[string]bool
	mem        driftMemory
	// tasks is each scoped service's desired task count as last observed;
	// a global service's count is only known from there.
	tasks map[string]uint64
	now   time.Time
}

// compareServices judges every declared service against the live swarm:
// missing, rolled back by Swarm (left alone until git changes), in motion
// (judged by health and compared once settled, unless it has been moving
// longer than its update config allows), drifted, or in sync. Differences on
// fields a write could not make stick are set apart from drift.
func compareServices(in compareInput) []serviceVerdict {
	desired, live := in.cmp.desired, in.cmp.live
	out := make([]serviceVerdict, 0, len(desired.Services))
	for _, scoped := range sortedKeys(desired.Services) {
		v := serviceVerdict{scoped: scoped, short: strings.TrimPrefix(scoped, in.stack+"_")}
		l, ok := live[scoped]
		if !ok {
			v.verdict = verdictMissing
			out = append(out, v)
			continue
		}
		changes := drift.Diff(desired.Services[scoped], l.Spec, in.cmp.options(scoped))
		st := updateState(l)
		if st == updateRollbackCompleted || st == updateRollbackPaused || in.rolledBack[scoped] {
			// Swarm reverted an update it could not complete. The live
			// spec is the previous one on purpose; pushing the failing
			// spec again would fail again. It waits for git to change.
			v.verdict, v.changes = verdictRolledBack, changes
			out = append(out, v)
			continue
		}
		if st == updateUpdating || st == updateRollbackStarted {
			v.inMotionSince = motionStart(in.mem.motionSince[scoped], l.UpdateStatus, in.now)
			allowed := settleAllowance(l.Spec, in.tasks[scoped], st == updateRollbackStarted)
			moving := in.now.Sub(v.inMotionSince)
			// A rollback is Swarm's own undoing of a failed update:
			// comparing it would push the failing spec back, so it is
			// always waited for, and only named when it lasts.
			if moving <= allowed || st == updateRollbackStarted {
				if moving > allowed {
					v.notSettling = fmt.Sprintf("service %s has been rolling back for %s, longer than its rollback config allows (%s)",
						v.short, moving.Round(time.Second), allowed.Round(time.Second))
				}
				v.verdict = verdictUpdating
				out = append(out, v)
				continue
			}
			// Another writer that keeps changing the service would
			// otherwise hide its changes for as long as it writes.
			v.notSettling = fmt.Sprintf("service %s has been updating for %s, longer than its update config allows (%s); compared anyway",
				v.short, moving.Round(time.Second), allowed.Round(time.Second))
		}
		v.changes, v.notKept = splitNotKept(changes, in.mem.notKept[scoped])
		for _, ch := range v.notKept {
			v.notKeptNotes = append(v.notKeptNotes, notKeptMessage(v.short, ch, in.mem.notKept[scoped][ch.Field].APIVersion))
		}
		v.verdict = verdictSynced
		if len(v.changes) > 0 {
			v.verdict = verdictDrifted
		}
		out = append(out, v)
	}
	return out
}

// splitNotKept sets apart the changes that are exactly what a write of this
// controller left behind: same desired value, same live value. Anything
// else on that field (the repository changed it, or someone else did) is
// drift again.
func splitNotKept(changes []drift.Change, kept map[string]capability.NotKeptField) (drifted, notKept []drift.Change) {
	for _, ch := range changes {
		if nk, ok := kept[ch.Field]; ok && nk.Desired == keptSum(ch.Desired) && nk.Live == keptSum(ch.Live) {
			notKept = append(notKept, ch)
			continue
		}
		drifted = append(drifted, ch)
	}
	return drifted, notKept
}

// motionStart is when a service in motion started moving: the earlier of
// when this controller first saw it moving and when Swarm says the current
// update started. A writer that keeps writing restarts Swarm's clock every
// time, which is why the controller keeps its own.
func motionStart(seen time.Time, us *swarm.UpdateStatus, now time.Time) time.Time {
	since := now
	if !seen.IsZero() && seen.Before(since) {
		since = seen
	}
	if us != nil && us.StartedAt != nil && !us.StartedAt.IsZero() && us.StartedAt.Before(since) {
		since = *us.StartedAt
	}
	return since
}

// Allowances for what an update config does not say: how long a new task
// takes to start, and slack for the whole update.
const (
	taskStartAllowance = 2 * time.Second
	settleSlack        = 5 * time.Second
)

// settleAllowance is how long one update of a service with spec and tasks
// desired tasks may take by its own update (or rollback) config: one batch
// per parallelism tasks, each stopping old tasks (stop grace period),
// starting new ones (and waiting for their healthcheck), monitoring and
// waiting out the delay; plus slack.
func settleAllowance(spec swarm.ServiceSpec, tasks uint64, rollingBack bool) time.Duration {
	uc := spec.UpdateConfig
	if rollingBack {
		uc = spec.RollbackConfig
	}
	parallelism, delay, monitor := uint64(1), time.Duration(0), 5*time.Second
	if uc != nil {
		parallelism, delay = uc.Parallelism, uc.Delay
		if uc.Monitor > 0 {
			monitor = uc.Monitor
		}
	}
	if tasks == 0 {
		tasks = 1
		if m := spec.Mode.Replicated; m != nil && m.Replicas != nil && *m.Replicas > 0 {
			tasks = *m.Replicas
		}
	}
	batches := uint64(1)
	if parallelism > 0 {
		batches = (tasks + parallelism - 1) / parallelism
	}
	grace := 10 * time.Second // the daemon's default stop grace period
	cs := spec.TaskTemplate.ContainerSpec
	if cs != nil && cs.StopGracePeriod != nil {
		grace = *cs.StopGracePeriod
	}
	perBatch := delay + monitor + taskStartAllowance + grace
	if cs != nil {
		if hc := cs.Healthcheck; hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
			interval := hc.Interval
			if interval <= 0 {
				interval = 30 * time.Second
			}
			perBatch += hc.StartPeriod + interval
		}
	}
	return time.Duration(batches)*perBatch + settleSlack
}

// notKeptMessage words one field a daemon did not keep, for the status.
func notKeptMessage(short string, ch drift.Change, apiVersion string) string {
	api := ""
	if apiVersion != "" {
		api = " (API " + apiVersion + ")"
	}
	return fmt.Sprintf("service %s: field %s not kept by the daemon%s: wrote %s, it reads back %s; not rewritten until the repository changes it",
		short, ch.Field, api, ch.Desired, ch.Live)
}
