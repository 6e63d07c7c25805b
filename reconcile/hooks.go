package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/redact"
)

// A hook job's labels (labels.Hook, labels.HookTarget) are never
// rewritten: any update of a job service makes Swarm run it again, so the
// outcome is read from the job's tasks, not stored beside them.

// hookLogLines is how many of a failed hook's last log lines are reported.
const hookLogLines = 10

// hookTarget identifies what the pass syncs, for the hook labels.
func hookTarget(p *pass) string {
	sum := sha256.Sum256([]byte(p.rendered.Manifest))
	return hex.EncodeToString(sum[:8])
}

// preSync runs the manifest's PreSync hooks to completion before any service
// of the sync is written.
func (c *Controller) preSync(ctx context.Context, p *pass) error {
	return c.runHooks(ctx, p, compose.PreSync)
}

// postSync runs the PostSync hooks once every wave is Healthy (applyWaves
// waits for the last one when there are any).
func (c *Controller) postSync(ctx context.Context, p *pass) error {
	return c.runHooks(ctx, p, compose.PostSync)
}

// syncStep wraps a step of the sync so that its failure runs the SyncFail
// hooks, once per pass, when a sync had begun. Their own failure is logged
// and published; the sync's error stands.
func syncStep(run func(*Controller, context.Context, *pass) error) func(*Controller, context.Context, *pass) error {
	return func(c *Controller, ctx context.Context, p *pass) error {
		err := run(c, ctx, p)
		if err == nil || !p.syncBegun || p.syncFailRan || errors.Is(err, context.Canceled) {
			return err
		}
		p.syncFailRan = true
		if herr := c.runHooks(ctx, p, compose.SyncFail); herr != nil {
			p.log.Error("SyncFail hook did not succeed", "error", redact.Text(herr.Error()))
		}
		return err
	}
}

// runHooks runs the hooks of phase wave by wave, lowest first: each hook of
// a wave is created as a job (through the application's backend, so guards
// and allowlists apply) unless one already ran for this revision, and the
// whole wave is waited for before the next wave's jobs are created. A job
// that carries this revision's target and succeeded is not run again, one
// still running is waited for and never started twice, which is how a
// restarted controller resumes; one that failed fails the sync again, until
// a new revision or an explicit sync, which runs it anew. The first hook
// that fails stops the phase: no job of a later wave is created.
func (c *Controller) runHooks(ctx context.Context, p *pass, phase compose.HookPhase) error {
	if p.action == charts.Unchanged || p.rendered == nil {
		return nil
	}
	step := strings.ToLower(string(phase))
	o, err := p.ordering()
	if err != nil {
		return stalled(step, err)
	}
	waves := o.order.HookWaves(phase)
	if len(waves) == 0 {
		return nil
	}
	if phase != compose.SyncFail {
		if err := c.beginSync(ctx, p); err != nil || p.action == charts.Unchanged {
			return err
		}
	}
	for i, w := range waves {
		var later []string
		for _, lw := range waves[i+1:] {
			later = append(later, lw.Names...)
		}
		run := hookRun{phase: phase, step: step, wave: w.Wave, later: later, target: hookTarget(p),
			deadline: c.now().Add(syncTimeout(p.app))}
		if err := c.runHookWave(ctx, p, run, w.Names); err != nil {
			return err
		}
	}
	return nil
}

// hookRun is one wave of hooks of one phase being run.
type hookRun struct {
	phase    compose.HookPhase
	step     string
	wave     int
	later    []string // hooks of later waves of the phase, not created if this one fails
	target   string
	deadline time.Time
}

// runHookWave starts the hooks of one wave that this revision has not run
// yet and waits for all of them.
func (c *Controller) runHookWave(ctx context.Context, p *pass, run hookRun, names []string) error {
	states, _, err := capability.ReadStack(ctx, p.backend, p.app.Stack)
	if err != nil {
		return transient(run.step, fmt.Errorf("read the stack before the %s hooks: %w", run.phase, err))
	}
	c.judgeHooks(p, states)
	c.publish(p)
	live := map[string]charts.ServiceState{}
	for _, s := range states {
		live[s.Name] = s
	}
	var waiting []string
	for _, name := range names {
		s, exists := live[name]
		if exists && s.Labels[labels.HookTarget] == run.target {
			switch r := judgeHook(s); r.outcome {
			case hookSucceeded:
				p.log.Info("hook already succeeded for this revision; not run again", "service", name, "hook", run.phase)
				continue
			case hookFailed:
				if p.request == nil {
					return c.hookFailed(ctx, p, run, name, s, r)
				}
			default:
				p.log.Info("hook is still running for this revision; waiting for it, not starting it again", "service", name, "hook", run.phase)
				waiting = append(waiting, name)
				continue
			}
		}
		if err := c.startHook(ctx, p, run.phase, name, run.target, s, exists); err != nil {
			return err
		}
		waiting = append(waiting, name)
	}
	return c.waitHooks(ctx, p, run, waiting)
}

// startHook replaces an earlier job of the hook (its policy kept it until
// now) and creates this revision's.
func (c *Controller) startHook(ctx context.Context, p *pass, phase compose.HookPhase, name, target string, old charts.ServiceState, exists bool) error {
	step := strings.ToLower(string(phase))
	wctx := context.WithoutCancel(ctx)
	var heal []string
	if exists {
		// A removed job leaves room for a fresh one with its own tasks and
		// logs. Without a remover, rewriting it runs it again too.
		if rm, ok := capability.As[capability.ResourceRemover](p.backend); ok {
			if err := rm.RemoveService(wctx, old.ID); err != nil {
				return transient(step, fmt.Errorf("%s hook %s: remove the job of an earlier run: %w", phase, name, err))
			}
		} else {
			heal = []string{p.app.Stack + "_" + name}
		}
	}
	sub, err := compose.Subset(p.rendered.Manifest, []string{name})
	if err != nil {
		return stalled(step, fmt.Errorf("%s hook %s: %w", phase, name, err))
	}
	stamp := p.deployLabels(p.latestRevision() + 1)
	stamp[labels.Hook] = string(phase)
	stamp[labels.HookTarget] = target
	if _, err := p.backend.DeployStack(wctx, charts.DeployRequest{
		Stack:    p.app.Stack,
		Manifest: sub,
		Secrets:  p.rendered.Secrets,
		Sealed:   p.rendered.Sealed,
		Labels:   stamp,
		Adopt:    p.app.Adopt,
		Heal:     heal,
	}); err != nil {
		return deployError(step, fmt.Errorf("%s hook %s: %w", phase, name, err))
	}
	p.log.Info("hook started", "service", name, "hook", phase)
	c.emit(p, events.HookRan, name, fmt.Sprintf("%s hook started", phase), map[string]any{"hook": string(phase), "outcome": "started"})
	return nil
}

// waitHooks waits until every named hook job of this revision has
// completed; the first that fails, or the deadline, fails the sync.
func (c *Controller) waitHooks(ctx context.Context, p *pass, run hookRun, names []string) error {
	left := slices.Clone(names)
	last := map[string]hookResult{}
	for len(left) > 0 {
		states, _, err := capability.ReadStack(ctx, p.backend, p.app.Stack)
		if err == nil {
			// Published as it goes, so the API shows a hook Running.
			c.judgeHooks(p, states)
			c.publish(p)
			for _, s := range states {
				if !slices.Contains(left, s.Name) || s.Labels[labels.HookTarget] != run.target {
					continue
				}
				r := judgeHook(s)
				last[s.Name] = r
				switch r.outcome {
				case hookSucceeded:
					left = slices.DeleteFunc(left, func(n string) bool { return n == s.Name })
					p.log.Info("hook succeeded", "service", s.Name, "hook", run.phase)
					c.emit(p, events.HookRan, s.Name, fmt.Sprintf("%s hook succeeded", run.phase), map[string]any{"hook": string(run.phase), "outcome": "succeeded"})
				case hookFailed:
					return c.hookFailed(ctx, p, run, s.Name, s, r)
				}
			}
		}
		if len(left) == 0 {
			break
		}
		if !c.now().Before(run.deadline) {
			msg := "its job was not found"
			if r, ok := last[left[0]]; ok {
				msg = r.message
			}
			return stalled(run.step, fmt.Errorf("%s hook %s did not complete within %s: %s; nothing after it was written%s",
				run.phase, left[0], syncTimeout(p.app), msg, notCreated(run)))
		}
		select {
		case <-ctx.Done():
			return transient(run.step, ctx.Err())
		case <-time.After(waitPoll):
		}
	}
	return nil
}

// notCreated names the hooks of later waves a failed wave keeps from
// being created, for the failure's message.
func notCreated(run hookRun) string {
	if len(run.later) == 0 {
		return ""
	}
	return fmt.Sprintf("; later %s hook(s) %s not created", run.phase, strings.Join(run.later, ", "))
}

// hookFailed reports a failed hook with its last log lines, and removes its
// job when its policy says HookFailed.
func (c *Controller) hookFailed(ctx context.Context, p *pass, run hookRun, name string, s charts.ServiceState, r hookResult) error {
	phase := run.phase
	lines, lerr := capability.LogTail(ctx, p.backend, s.ID, hookLogLines)
	lines = redactLines(p, lines)
	msg := fmt.Sprintf("%s hook %s failed: %s; nothing after it was written%s", phase, name, r.message, notCreated(run))
	switch {
	case lerr != nil:
		msg += fmt.Sprintf("; its logs could not be read: %v", redact.Error(lerr))
	case len(lines) > 0:
		msg += application.HookLogsMarker + strings.Join(lines, "\n")
	}
	c.emit(p, events.HookRan, name, msg, map[string]any{"hook": string(phase), "outcome": "failed", "logs": lines})
	p.noteHookFailed(name, s, r, lines)
	o, _ := p.ordering()
	if o != nil && o.order.Of(name).DeletePolicy == compose.HookFailed {
		if rm, ok := capability.As[capability.ResourceRemover](p.backend); ok {
			if err := rm.RemoveService(context.WithoutCancel(ctx), s.ID); err != nil {
				p.log.Warn("could not remove the failed hook job", "service", name, "error", err)
			}
		}
	}
	return stalled(run.step, errors.New(msg))
}

// redactLines keeps what the pass knows to be secret (decrypted values,
// secret plaintext) and URL credentials out of log lines that are about to
// be published.
func redactLines(p *pass, lines []string) []string {
	var secrets []string
	if p.rendered != nil {
		for _, v := range p.rendered.Sealed {
			secrets = append(secrets, v)
		}
		for _, v := range p.rendered.Secrets {
			secrets = append(secrets, strings.TrimSpace(string(v)))
		}
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		l = redact.Values(l, secrets, 4)
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		out = append(out, redact.Text(l))
	}
	return out
}

// cleanHooks removes the jobs of hooks whose policy is HookSucceeded once
// the revision they succeeded for is recorded: until then a restarted
// controller needs them to know not to run them again. A pass that finds
// one left behind (a controller stopped between the record and the removal)
// removes it too. Failures are retried by the next pass.
func (c *Controller) cleanHooks(ctx context.Context, p *pass) error {
	if p.rendered == nil || (p.recorded == nil && p.action != charts.Unchanged) {
		return nil
	}
	o, err := p.ordering()
	if err != nil || !o.order.HasHooks() {
		return nil
	}
	var succeeded []string
	for name, ord := range o.order {
		if ord.Hook != "" && ord.DeletePolicy == compose.HookSucceeded {
			succeeded = append(succeeded, name)
		}
	}
	if len(succeeded) == 0 {
		return nil
	}
	rm, ok := capability.As[capability.ResourceRemover](p.backend)
	if !ok {
		return nil
	}
	var states []charts.ServiceState
	if s := p.snapshot; p.recorded == nil && s != nil && s.err == nil {
		states = s.stacks[p.app.Stack]
	} else if states, _, err = capability.ReadStack(ctx, p.backend, p.app.Stack); err != nil {
		p.log.Warn("could not read the stack to remove succeeded hook jobs", "error", err)
		return nil
	}
	target := hookTarget(p)
	for _, s := range states {
		if !slices.Contains(succeeded, s.Name) || s.Labels[labels.HookTarget] != target {
			continue
		}
		if judgeHook(s).outcome != hookSucceeded {
			continue
		}
		if err := rm.RemoveService(ctx, s.ID); err != nil {
			p.log.Warn("could not remove a succeeded hook job; retrying next pass", "service", s.Name, "error", err)
			continue
		}
		p.log.Info("removed succeeded hook job (deletePolicy HookSucceeded)", "service", s.Name)
	}
	return nil
}

// The outcomes of a hook job.
const (
	hookRunning   = "running"
	hookSucceeded = "succeeded"
	hookFailed    = "failed"
)

type hookResult struct {
	outcome string
	message string
	// task is the task that decided a finished outcome: the newest
	// completed one, or the failure; nil while running.
	task *charts.TaskState
}

// judgeHook reads a hook job's outcome from its tasks. It is not the health
// rollup: that forgets a failure after a while (a service's past failures
// stop counting against it), while a hook that failed has failed for good.
// A job with every completion done succeeded; one whose task failed with no
// other task still on its way failed (hooks run with restart condition none
// unless they ask for retries, see compose.Subset).
func judgeHook(s charts.ServiceState) hookResult {
	if s.Desired > 0 && s.Completed >= s.Desired {
		var done *charts.TaskState
		for i, t := range s.Tasks {
			if t.State == "complete" && (done == nil || t.Timestamp.After(done.Timestamp)) {
				done = &s.Tasks[i]
			}
		}
		return hookResult{hookSucceeded, fmt.Sprintf("%d/%d completed", s.Completed, s.Desired), done}
	}
	var failed *charts.TaskState
	active := false
	for i, t := range s.Tasks {
		switch t.State {
		case "failed", "rejected", "orphaned":
			if failed == nil || t.Timestamp.After(failed.Timestamp) {
				failed = &s.Tasks[i]
			}
		case "complete", "shutdown", "remove":
		default:
			active = true
		}
	}
	if failed != nil && !active {
		why := failed.Err
		if why == "" {
			why = failed.Message
		}
		return hookResult{hookFailed, fmt.Sprintf("task %s: %s", failed.State, why), failed}
	}
	return hookResult{hookRunning, fmt.Sprintf("%d/%d completed", s.Completed, s.Desired), nil}
}
