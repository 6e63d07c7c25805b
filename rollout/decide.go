package rollout

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Command is an operator's instruction. The caller passes each command to
// exactly one Decide and then forgets it: the State it leads to is the
// record.
type Command string

// The commands.
const (
	NoCommand Command = ""
	// CommandPromote skips the remaining steps, pauses and analyses: the
	// stable service is updated to the new spec at once (Promoting), with
	// traffic where it is, and the extra colour is finalised after. From
	// Aborted it ships the aborted revision anyway.
	CommandPromote Command = "promote"
	// CommandAbort sends all traffic to stable and scales the extra colour
	// to zero. Too late once stable is being updated (Promoting).
	CommandAbort Command = "abort"
	// CommandPause freezes the weights: no step is passed, no traffic
	// moves, until resume. A failing analysis still aborts.
	CommandPause Command = "pause"
	// CommandResume lifts a pause; the current step's pause starts again,
	// so the step is watched for its whole length after the operator's
	// look.
	CommandResume Command = "resume"
	// CommandRetry starts an aborted revision again from its first step.
	CommandRetry Command = "retry"
)

// Action names what a Decision asks of the caller that the previous one
// did not.
type Action string

// The actions.
const (
	// ActionStart creates (or updates) the extra colour with the new spec
	// at Replicas; no traffic reaches it until it is ready.
	ActionStart Action = "start"
	// ActionHold changes nothing.
	ActionHold Action = "hold"
	// ActionAdvance moves to the next step: the extra colour is scaled to
	// Replicas first, and the weights follow once it is ready (a later
	// Decision, also ActionAdvance, makes the step's traffic flow).
	ActionAdvance Action = "advance"
	// ActionPromote writes the new spec to the stable service.
	ActionPromote Action = "promote"
	// ActionFinalize sends all traffic to stable and scales the extra
	// colour to zero: the rollout is complete.
	ActionFinalize Action = "finalize"
	// ActionAbort sends all traffic to stable and scales the extra colour
	// to zero: the rollout failed or was stopped.
	ActionAbort Action = "abort"
	// ActionRestart is ActionStart for a revision that superseded an
	// unfinished rollout: the extra colour takes the new spec and starts
	// from the first step.
	ActionRestart Action = "restart"
	// ActionSupersede sends all traffic to stable for a revision that
	// replaced a rollout whose colour had some: the colour keeps the
	// replaced revision's spec and tasks until State.ScaleDownAt, and the
	// new revision restarts after (Superseded).
	ActionSupersede Action = "supersede"
)

// ReadyPoll is how soon to look again while waiting for a colour to become
// ready: the caller has no event for it.
const ReadyPoll = 5 * time.Second

// Input is what the caller read for one decision.
type Input struct {
	// Now is the caller's clock; Decide reads no other.
	Now time.Time
	// Revision identifies the desired spec of the service. It should cover
	// the rollout Spec too: a commit that only changes the steps then
	// starts the rollout again instead of meeting a recorded step the new
	// spec does not have (which Decide refuses, all traffic on stable).
	Revision string
	// StableRevision identifies the spec the stable service runs; empty
	// when unknown. When it equals Revision there is nothing to roll out.
	StableRevision string
	// Replicas is the stable service's declared replica count, at least 1.
	Replicas int
	// ColourReady reports that the extra colour runs Revision at the
	// replicas of the last Decision, every task running.
	ColourReady bool
	// StableReady reports that the stable service runs Revision, every
	// task running; asked for while Promoting.
	StableReady bool
	// Verdict is the newest analysis verdict, or the zero Verdict.
	Verdict Verdict
	// Command is an operator's command, or NoCommand.
	Command Command
	// ColourReplicas is the extra colour's replica count now; it keeps it
	// while traffic drains from it (State.ScaleDownAt).
	ColourReplicas int
}

// Verdict is an analysis's judgement of one interval of the current step.
// It counts once, and only when it measured traffic of the current step:
// From no earlier than State.StepStarted, To after the last counted one.
type Verdict struct {
	Result Result
	// Metric and Values say what failed and by how much, for the abort
	// reason: e.g. "error ratio" and "0.31 > 0.05".
	Metric, Values string
	From, To       time.Time
}

// Weights are the traffic shares, in percent, that sum to 100.
type Weights struct {
	Stable, Canary int
}

// Decision is what the caller makes the swarm and the router match. Its
// fields are always the whole desired picture, not a delta, so applying
// one twice is harmless. Order of writes: the router takes Weights first,
// then the extra colour is scaled to Replicas (with Revision's spec when
// Replicas > 0), and while the State is Promoting the stable service gets
// Revision's spec. Weights only grow once a colour reported ready, so that
// order never sends traffic to a colour that is not there.
type Decision struct {
	// State is the next state, to record on the extra colour's labels.
	State   State
	Weights Weights
	// Replicas is the extra colour's replica count.
	Replicas int
	Action   Action
	// NextCheck is when to decide again if nothing else happens first;
	// zero when only a new revision or a command can change anything.
	NextCheck time.Time
	// Reason is a sentence for status, events and logs.
	Reason string
	// Err is set on input Decide cannot trust (a bad spec, an unknown
	// command, a recorded state that does not fit the spec). Then only
	// Weights mean anything: all traffic on stable, nothing else written.
	Err error
}

// Decide takes one step of a rollout: from the recorded state and what the
// caller read now, the next state and what the swarm and router should
// look like. It never moves traffic towards a version that has not passed
// the step before, never passes more than one step at a time, and sends
// traffic back to stable at once when an analysis fails.
func Decide(spec Spec, st State, in Input) Decision {
	if err := checkInput(spec, st, in); err != nil {
		return Decision{State: st, Weights: Weights{Stable: 100}, Action: ActionHold, Err: err,
			Reason: "rollout held with all traffic on stable: " + err.Error()}
	}
	d := decider{spec: spec, in: in, now: in.Now.UTC().Round(0)}
	return d.decide(st)
}

type decider struct {
	spec Spec
	in   Input
	now  time.Time
}

func (d decider) decide(st State) Decision {
	nothingToDo := d.in.StableRevision != "" && d.in.StableRevision == d.in.Revision
	if st.Revision != d.in.Revision {
		// The colour runs st's revision. While a router may still send
		// it requests, it keeps that spec and its tasks: the new
		// revision takes the colour only once it has drained.
		unfinished := st.Phase.active() || st.Phase == Superseded
		switch {
		case st.Phase.active() && st.Weight > 0 && d.spec.ScaleDownDelay > 0:
			return d.supersede(st)
		case d.draining(st):
			return d.drain(st, fmt.Sprintf("a new revision replaced %s; its colour, with no traffic, stops at %s, once the router has let go of it, and the new revision starts then", st.Revision, st.ScaleDownAt.Format(time.RFC3339)))
		case nothingToDo && unfinished:
			return d.finalize(st, "the stable service already runs this revision: rollout of "+st.Revision+" ended, all traffic on stable")
		case nothingToDo:
			return d.hold(st, "the stable service already runs this revision: nothing to roll out")
		case unfinished:
			return d.start(st, ActionRestart, "a new revision superseded the unfinished rollout of "+st.Revision+": traffic back on stable, starting again from the first step")
		}
		return d.start(State{}, ActionStart, "")
	}
	cmd := d.in.Command
	switch st.Phase {
	case Completed:
		if d.draining(st) {
			return d.drain(st, "the rollout of this revision is complete; the new revision's colour stops at "+st.ScaleDownAt.Format(time.RFC3339)+", once the router has let go of it"+ignored(cmd))
		}
		st.ScaleDownAt = time.Time{}
		return d.hold(st, "the rollout of this revision is complete"+ignored(cmd))
	case Aborted:
		if cmd == NoCommand && d.draining(st) {
			return d.drain(st, "aborted: "+st.Reason+"; the colour stops at "+st.ScaleDownAt.Format(time.RFC3339)+", once the router has let go of it")
		}
		st.ScaleDownAt = time.Time{}
		switch cmd {
		case CommandPromote:
			return d.promote(st, "promoted by an operator after the abort")
		case CommandRetry:
			return d.start(State{}, ActionStart, "retried by an operator")
		}
		return d.hold(st, "aborted: "+st.Reason+"; waiting for a new revision, a promote or a retry"+ignored(cmd))
	case Promoting:
		if d.in.StableReady {
			return d.finalize(st, "the stable service runs the new revision: all traffic on stable")
		}
		return d.wait(st, ActionHold, "waiting for the stable service to run the new revision"+ignored(cmd))
	}
	if nothingToDo {
		return d.finalize(st, "the stable service already runs this revision: rollout of "+st.Revision+" ended, all traffic on stable")
	}

	switch cmd {
	case CommandAbort:
		return d.abort(st, "aborted by an operator", "", "")
	case CommandPromote:
		return d.promote(st, "promoted by an operator")
	}
	st = d.count(st)
	if a := d.spec.Analysis; a != nil && st.Failures >= a.FailureLimit {
		v := d.in.Verdict
		if v.Result != Fail {
			v.Metric, v.Values = "", fmt.Sprintf("%d consecutive failures", st.Failures)
		}
		what := strings.TrimSpace(v.Metric + " " + v.Values)
		return d.abort(st, fmt.Sprintf("analysis failed at %s: %s", d.where(st), what), v.Metric, v.Values)
	}
	note := ignored(cmd)
	switch cmd {
	case CommandPause:
		st.Paused, note = true, ""
	case CommandResume:
		if st.Paused {
			st.Paused, note = false, ""
			if !st.StepStarted.IsZero() {
				st.StepStarted, st.Verdict = d.now, ""
			}
		}
	}
	if st.Paused {
		return d.idle(st, "paused by an operator at "+d.where(st)+"; weights frozen until resume")
	}
	if st.StepStarted.IsZero() {
		if !d.in.ColourReady {
			return d.wait(st, ActionHold, fmt.Sprintf("waiting for %d replicas of the new revision to be ready at %s%s", d.replicas(st), d.where(st), note))
		}
		st.StepStarted, st.Verdict = d.now, ""
		st.Weight = d.stepWeight(st)
		msg := fmt.Sprintf("%s: %d%% of traffic on the new revision", d.where(st), st.Weight)
		if st.Phase == Previewing {
			msg = "preview ready; it runs with no traffic until the switch"
		}
		return d.decision(st, ActionAdvance, d.next(st), msg)
	}
	if !d.in.ColourReady {
		return d.wait(st, ActionHold, "the new revision's colour is not ready; "+d.where(st)+" held"+note)
	}
	pause := d.pause(st)
	if pause == 0 && st.Phase != Switched {
		return d.idle(st, d.where(st)+": waiting for an operator's promote"+note)
	}
	if d.now.Sub(st.StepStarted) < pause {
		return d.decision(st, ActionHold, d.next(st), fmt.Sprintf("%s: held until %s%s", d.where(st), st.StepStarted.Add(pause).Format(time.RFC3339), note))
	}
	if d.needsVerdict(st) && st.Verdict != Pass {
		last := string(st.Verdict)
		if last == "" {
			last = "none yet"
		}
		return d.decision(st, ActionHold, d.now.Add(d.spec.Analysis.Interval),
			fmt.Sprintf("%s: pause over, waiting for a passing analysis (last: %s)%s", d.where(st), last, note))
	}
	switch {
	case st.Phase == Progressing && st.Step < len(d.spec.Steps)-1:
		st.Step++
		st.StepStarted, st.Verdict = time.Time{}, ""
		return d.wait(st, ActionAdvance, fmt.Sprintf("step %d passed; scaling the new revision to %d replicas for step %d", st.Step-1, d.replicas(st), st.Step))
	case st.Phase == Previewing:
		st.Phase, st.Weight = Switched, 100
		st.StepStarted, st.Verdict = d.now, ""
		return d.decision(st, ActionAdvance, d.next(st), "preview passed: all traffic switched to the new revision; the old one kept for the rollback window")
	}
	return d.promote(st, d.where(st)+" passed: updating the stable service")
}

// count takes in the input's verdict if it is new and measured the
// current step's traffic.
func (d decider) count(st State) State {
	v := d.in.Verdict
	if d.spec.Analysis == nil || v.Result == "" || st.StepStarted.IsZero() ||
		v.From.Before(st.StepStarted) || !v.To.After(v.From) || !v.To.After(st.AnalysedAt) || v.To.After(d.now) {
		return st
	}
	st.AnalysedAt, st.Verdict = v.To.UTC().Round(0), v.Result
	switch v.Result {
	case Pass:
		st.Failures = 0
	case Fail:
		st.Failures = min(st.Failures+1, maxFailureLimit)
	}
	return st
}

// needsVerdict reports whether passing the current step takes a Pass. A
// blue/green preview gets no traffic, so an analysis of the router's
// metrics alone cannot judge it; it judges the switched traffic instead.
func (d decider) needsVerdict(st State) bool {
	a := d.spec.Analysis
	if st.Phase == Previewing {
		return a.measuresPreview()
	}
	return a != nil
}

// pause is how long the current step is held once its traffic flows.
func (d decider) pause(st State) time.Duration {
	switch st.Phase {
	case Previewing:
		return d.spec.Preview.Pause
	case Switched:
		return d.spec.RollbackWindow
	}
	return d.spec.Steps[st.Step].Pause
}

// stepWeight is the extra colour's weight once the current step flows.
func (d decider) stepWeight(st State) int {
	switch st.Phase {
	case Progressing:
		return d.spec.Steps[st.Step].Weight
	case Switched:
		return 100
	}
	return 0
}

// next is when a serving step should be looked at again: its pause's end,
// or the next analysis interval if sooner.
func (d decider) next(st State) time.Time {
	var t time.Time
	if p := d.pause(st); p > 0 || st.Phase == Switched {
		t = st.StepStarted.Add(p)
	}
	if a := d.spec.Analysis; a != nil {
		if n := d.now.Add(a.Interval); t.IsZero() || n.Before(t) {
			t = n
		}
	}
	if !t.IsZero() && t.Before(d.now) {
		t = d.now
	}
	return t
}

func (d decider) where(st State) string {
	switch {
	case st.Phase == Previewing:
		return "preview"
	case st.Phase == Switched:
		return "rollback window"
	case st.Step < len(d.spec.Steps):
		return fmt.Sprintf("step %d (weight %d%%)", st.Step, d.spec.Steps[st.Step].Weight)
	}
	return string(st.Phase)
}

// replicas is the extra colour's replica count in st. A canary gets the
// share of the stable count its step's weight names, rounded up and at
// least one; a blue/green preview runs at full size, since it takes all
// traffic at the switch.
func (d decider) replicas(st State) int {
	full := d.in.Replicas
	switch st.Phase {
	case Progressing:
		return Replicas(full, d.spec.Steps[st.Step].Weight)
	case Previewing, Switched:
		return full
	case Promoting:
		if st.Weight == 0 {
			return 0
		}
		if d.spec.Strategy == Canary {
			return Replicas(full, d.spec.Steps[st.Step].Weight)
		}
		return full
	case Completed, Aborted, Superseded:
		if d.draining(st) {
			// Traffic has left the colour; its tasks stay until the
			// router has polled that.
			return d.in.ColourReplicas
		}
	}
	return 0
}

// Replicas is a canary's replica count at weight percent of a stable
// service of stable replicas: ceil(stable*weight/100), at least 1. With no
// router, Swarm's VIP spreads requests over all tasks of both services, so
// the canary's real share is about c/(stable+c), below weight: 1 of 11
// tasks (9%) at 10%, 5 of 15 (33%) at 50%, half at 100%.
func Replicas(stable, weight int) int {
	if stable < 1 || weight < 1 {
		return 0
	}
	return max(1, int(math.Ceil(float64(stable)*float64(weight)/100)))
}

func (d decider) decision(st State, a Action, next time.Time, reason string) Decision {
	return Decision{State: st, Weights: Weights{Stable: 100 - st.Weight, Canary: st.Weight},
		Replicas: d.replicas(st), Action: a, NextCheck: next, Reason: reason}
}

// hold changes nothing and needs no timed look.
func (d decider) hold(st State, reason string) Decision {
	return d.decision(st, ActionHold, time.Time{}, reason)
}

// idle waits for an operator; an analysis keeps running meanwhile, so a
// failure still aborts.
func (d decider) idle(st State, reason string) Decision {
	var next time.Time
	if a := d.spec.Analysis; a != nil && !st.StepStarted.IsZero() {
		next = d.now.Add(a.Interval)
	}
	return d.decision(st, ActionHold, next, reason)
}

// wait polls for readiness.
func (d decider) wait(st State, a Action, reason string) Decision {
	return d.decision(st, a, d.now.Add(ReadyPoll), reason)
}

func (d decider) start(prev State, a Action, reason string) Decision {
	st := State{Revision: d.in.Revision, Phase: Progressing, Paused: prev.Paused && a == ActionRestart}
	if d.spec.Strategy == BlueGreen {
		st.Phase = Previewing
	}
	if reason == "" {
		reason = "rollout started"
	}
	return d.wait(st, a, fmt.Sprintf("%s: %d replicas of the new revision starting with no traffic", reason, d.replicas(st)))
}

func (d decider) promote(st State, reason string) Decision {
	if st.Phase == Previewing && !st.StepStarted.IsZero() && d.in.ColourReady {
		st.Weight = 100 // the preview is ready: switch with the promote
	}
	st.Phase, st.Paused = Promoting, false
	st.Reason, st.Metric, st.Values = "", "", ""
	return d.wait(st, ActionPromote, reason)
}

func (d decider) finalize(st State, reason string) Decision {
	step, scaleDown := 0, time.Time{}
	if st.Revision == d.in.Revision {
		step, scaleDown = st.Step, d.scaleDownAt(st)
	}
	st = State{Revision: d.in.Revision, Phase: Completed, Step: step, ScaleDownAt: scaleDown}
	return d.decision(st, ActionFinalize, st.ScaleDownAt, reason)
}

// supersede takes all traffic from a colour that a new revision replaced,
// keeping its spec and tasks until the router has polled that (see
// Superseded).
func (d decider) supersede(st State) Decision {
	st.ScaleDownAt = d.scaleDownAt(st)
	st.Phase, st.Weight = Superseded, 0
	st.StepStarted, st.Verdict, st.Failures, st.AnalysedAt = time.Time{}, "", 0, time.Time{}
	st.Reason, st.Metric, st.Values = "", "", ""
	reason := fmt.Sprintf("a new revision superseded the unfinished rollout of %s: all traffic back on stable; its colour, with no traffic, stops at %s, and the new revision starts from the first step then",
		st.Revision, st.ScaleDownAt.Format(time.RFC3339))
	return d.decision(st, ActionSupersede, st.ScaleDownAt, reason)
}

func (d decider) abort(st State, reason, metric, values string) Decision {
	st.ScaleDownAt = d.scaleDownAt(st)
	st.Phase, st.Weight, st.Paused = Aborted, 0, false
	st.Reason, st.Metric, st.Values = reason, metric, values
	return d.decision(st, ActionAbort, st.ScaleDownAt, reason)
}

// scaleDownAt is when a colour that st sends traffic to may stop once the
// traffic has been taken from it; zero when none reaches it, or when
// nothing polls the weights.
func (d decider) scaleDownAt(st State) time.Time {
	if st.Weight == 0 || d.spec.ScaleDownDelay == 0 {
		return time.Time{}
	}
	return d.now.Add(d.spec.ScaleDownDelay)
}

// draining reports that st's colour still keeps its tasks for the router
// to let go of.
func (d decider) draining(st State) bool {
	return !st.ScaleDownAt.IsZero() && d.now.Before(st.ScaleDownAt)
}

// drain keeps the colour's tasks, with no traffic, until the scale-down.
func (d decider) drain(st State, reason string) Decision {
	return d.decision(st, ActionHold, st.ScaleDownAt, reason)
}

func ignored(c Command) string {
	if c == NoCommand {
		return ""
	}
	return fmt.Sprintf(" (command %s ignored)", c)
}

// checkInput refuses what Decide cannot decide on.
func checkInput(spec Spec, st State, in Input) error {
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	switch {
	case in.Now.IsZero():
		return errors.New("input: no time")
	case in.Revision == "":
		return errors.New("input: no revision")
	case len(in.Revision) > maxLabelValue:
		return errors.New("input: revision too long")
	case in.Replicas < 1:
		return fmt.Errorf("input: a rollout needs at least 1 stable replica, not %d", in.Replicas)
	}
	switch in.Command {
	case NoCommand, CommandPromote, CommandAbort, CommandPause, CommandResume, CommandRetry:
	default:
		return fmt.Errorf("input: unknown command %q", in.Command)
	}
	switch in.Verdict.Result {
	case "", Pass, Fail, Inconclusive:
	default:
		return fmt.Errorf("input: unknown verdict %q", in.Verdict.Result)
	}
	if err := st.check(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if st.Revision != in.Revision || st.Phase == "" {
		return nil // a new revision starts afresh; the old state only says whether to restart
	}
	if err := fits(spec, st); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// fits refuses a recorded state of the input's revision that this spec
// could not have produced.
func fits(spec Spec, st State) error {
	serving := !st.StepStarted.IsZero()
	if spec.Strategy == Canary {
		if st.Step >= len(spec.Steps) {
			return fmt.Errorf("step %d, but the canary has %d steps", st.Step, len(spec.Steps))
		}
		want := spec.Steps[st.Step].Weight
		switch st.Phase {
		case Progressing:
			if !serving && st.Step > 0 {
				want = spec.Steps[st.Step-1].Weight
			} else if !serving {
				want = 0
			}
			if st.Weight != want {
				return fmt.Errorf("weight %d at step %d, want %d", st.Weight, st.Step, want)
			}
		case Promoting:
			if st.Weight > want {
				return fmt.Errorf("weight %d above step %d's %d", st.Weight, st.Step, want)
			}
		case Completed, Aborted:
		default:
			return fmt.Errorf("phase %s in a canary", st.Phase)
		}
		return nil
	}
	if st.Step != 0 {
		return fmt.Errorf("step %d in blueGreen", st.Step)
	}
	switch st.Phase {
	case Previewing:
		if st.Weight != 0 {
			return fmt.Errorf("weight %d in preview", st.Weight)
		}
	case Switched:
		if st.Weight != 100 || !serving {
			return fmt.Errorf("switched with weight %d", st.Weight)
		}
	case Promoting:
		if st.Weight != 0 && st.Weight != 100 {
			return fmt.Errorf("weight %d in blueGreen", st.Weight)
		}
	case Completed, Aborted:
	default:
		return fmt.Errorf("phase %s in blueGreen", st.Phase)
	}
	return nil
}
