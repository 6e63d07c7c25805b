package rollout

import (
	"strings"
	"testing"
	"time"
)

func router() Router {
	return Router{Provider: Traefik, Rule: "Host(`shop.example`)", Port: 8080}
}

func canary(a *Analysis) Spec {
	s := Spec{Strategy: Canary, Steps: []Step{{10, 2 * time.Minute}, {50, 5 * time.Minute}}, Router: router(), Analysis: a}
	s.setDefaults()
	return s
}

func blueGreen(a *Analysis, window time.Duration) Spec {
	s := Spec{Strategy: BlueGreen, Preview: Preview{Pause: 5 * time.Minute}, RollbackWindow: window, Router: router(), Analysis: a}
	s.setDefaults()
	return s
}

func ratioCheck(limit int) *Analysis {
	r := 0.05
	return &Analysis{MaxErrorRatio: &r, FailureLimit: limit, Traefik: &TraefikMetrics{Metrics: "http://traefik:8082/metrics"}}
}

func webhookCheck() *Analysis {
	return &Analysis{Webhook: &WebhookCheck{URL: "http://smoke:8080/"}}
}

// at is an input at t0+d for revision r2 of a service of 10 replicas.
func at(d time.Duration) Input {
	return Input{Now: t0.Add(d), Revision: "r2", StableRevision: "r1", Replicas: 10}
}

func (in Input) ready() Input             { in.ColourReady = true; return in }
func (in Input) stableReady() Input       { in.StableReady = true; return in }
func (in Input) cmd(c Command) Input      { in.Command = c; return in }
func (in Input) rev(r string) Input       { in.Revision = r; return in }
func (in Input) verdict(v Verdict) Input  { in.Verdict = v; return in }
func (in Input) replicas(n int) Input     { in.Replicas = n; return in }
func (in Input) stableRev(r string) Input { in.StableRevision = r; return in }
func pass(from, to time.Duration) Verdict {
	return Verdict{Result: Pass, From: t0.Add(from), To: t0.Add(to)}
}
func inconc(from, to time.Duration) Verdict {
	return Verdict{Result: Inconclusive, From: t0.Add(from), To: t0.Add(to)}
}
func fail(from, to time.Duration) Verdict {
	return Verdict{Result: Fail, Metric: "error ratio", Values: "0.31 > 0.05", From: t0.Add(from), To: t0.Add(to)}
}

// serving is a canary state of r2 at step whose traffic has flowed since
// t0+started.
func serving(spec Spec, step int, started time.Duration) State {
	return State{Revision: "r2", Phase: Progressing, Step: step, Weight: spec.Steps[step].Weight, StepStarted: t0.Add(started)}
}

type want struct {
	action   Action
	phase    Phase
	step     int
	weight   int // canary weight; stable is 100 minus it
	replicas int
	next     time.Duration // from t0; -1 for none
	paused   bool
	err      bool
	reason   string // a substring of the reason
}

func check(t *testing.T, d Decision, w want) {
	t.Helper()
	if w.err {
		if d.Err == nil || d.Weights != (Weights{Stable: 100}) {
			t.Errorf("decision %+v, want an error with all traffic on stable", d)
		}
		return
	}
	if d.Err != nil {
		t.Fatalf("Decide: %v", d.Err)
	}
	if d.Action != w.action || d.State.Phase != w.phase || d.State.Step != w.step || d.State.Paused != w.paused {
		t.Errorf("action %s phase %s step %d paused %v, want %s %s %d %v (%s)", d.Action, d.State.Phase, d.State.Step, d.State.Paused,
			w.action, w.phase, w.step, w.paused, d.Reason)
	}
	if d.Weights != (Weights{Stable: 100 - w.weight, Canary: w.weight}) || d.State.Weight != w.weight {
		t.Errorf("weights %+v (state %d), want canary %d", d.Weights, d.State.Weight, w.weight)
	}
	if d.Replicas != w.replicas {
		t.Errorf("replicas %d, want %d", d.Replicas, w.replicas)
	}
	wantNext := time.Time{}
	if w.next >= 0 {
		wantNext = t0.Add(w.next)
	}
	if !d.NextCheck.Equal(wantNext) {
		t.Errorf("next check %v, want %v", d.NextCheck, wantNext)
	}
	if !strings.Contains(d.Reason, w.reason) {
		t.Errorf("reason %q, want it to say %q", d.Reason, w.reason)
	}
}

func TestDecide(t *testing.T) {
	const m = time.Minute
	c, ca, c2 := canary(nil), canary(ratioCheck(1)), canary(ratioCheck(2))
	bg, bga, bgw := blueGreen(nil, 10*m), blueGreen(ratioCheck(1), 0), blueGreen(webhookCheck(), 10*m)
	fallback := c
	fallback.Router = Router{Provider: NoRouter}
	aborted := State{Revision: "r2", Phase: Aborted, Step: 1, StepStarted: t0, Reason: "analysis failed", Metric: "error ratio", Values: "0.31 > 0.05"}
	cases := []struct {
		name string
		spec Spec
		st   State
		in   Input
		want want
	}{
		// Starting.
		{"canary starts with no traffic", c, State{}, at(0), want{ActionStart, Progressing, 0, 0, 1, ReadyPoll, false, false, "no traffic"}},
		{"blueGreen preview starts full size", bg, State{}, at(0), want{ActionStart, Previewing, 0, 0, 10, ReadyPoll, false, false, "no traffic"}},
		{"start after a completed rollout", c, State{Revision: "r1", Phase: Completed}, at(0), want{ActionStart, Progressing, 0, 0, 1, ReadyPoll, false, false, "started"}},
		{"start after an aborted one", c, State{Revision: "r1", Phase: Aborted}, at(0), want{ActionStart, Progressing, 0, 0, 1, ReadyPoll, false, false, "started"}},
		{"nothing to roll out", c, State{}, at(0).stableRev("r2"), want{ActionHold, "", 0, 0, 0, -1, false, false, "nothing to roll out"}},
		{"nothing to roll out after an abort", c, State{Revision: "r1", Phase: Aborted, Step: 1, Reason: "x"}, at(0).stableRev("r2"), want{ActionHold, Aborted, 1, 0, 0, -1, false, false, "nothing to roll out"}},
		{"waiting for the canary", c, State{Revision: "r2", Phase: Progressing}, at(time.Second), want{ActionHold, Progressing, 0, 0, 1, time.Second + ReadyPoll, false, false, "waiting for 1 replicas"}},
		{"canary ready: step 0 flows", c, State{Revision: "r2", Phase: Progressing}, at(m).ready(), want{ActionAdvance, Progressing, 0, 10, 1, 3 * m, false, false, "10% of traffic"}},
		{"step flows with analysis: next look at the interval", ca, State{Revision: "r2", Phase: Progressing}, at(m).ready(), want{ActionAdvance, Progressing, 0, 10, 1, m + 30*time.Second, false, false, "10%"}},
		// Holding and passing steps.
		{"pause not over", c, serving(c, 0, 0), at(m).ready(), want{ActionHold, Progressing, 0, 10, 1, 2 * m, false, false, "held until"}},
		{"pause over, no analysis: next step scales first", c, serving(c, 0, 0), at(2 * m).ready(), want{ActionAdvance, Progressing, 1, 10, 5, 2*m + ReadyPoll, false, false, "5 replicas"}},
		{"next step flows once ready", c, State{Revision: "r2", Phase: Progressing, Step: 1, Weight: 10}, at(3 * m).ready(), want{ActionAdvance, Progressing, 1, 50, 5, 8 * m, false, false, "50%"}},
		{"colour not ready: step held", c, serving(c, 0, 0), at(5 * m), want{ActionHold, Progressing, 0, 10, 1, 5*m + ReadyPoll, false, false, "not ready"}},
		{"last step passed: promote keeps weights", c, serving(c, 1, 0), at(5 * m).ready(), want{ActionPromote, Promoting, 1, 50, 5, 5*m + ReadyPoll, false, false, "updating the stable"}},
		{"promoting waits for stable", c, State{Revision: "r2", Phase: Promoting, Step: 1, Weight: 50, StepStarted: t0}, at(6 * m).stableRev("r2"), want{ActionHold, Promoting, 1, 50, 5, 6*m + ReadyPoll, false, false, "waiting for the stable"}},
		{"stable ready: finalize", c, State{Revision: "r2", Phase: Promoting, Step: 1, Weight: 50, StepStarted: t0}, at(7 * m).stableReady(), want{ActionFinalize, Completed, 1, 0, 0, -1, false, false, "all traffic on stable"}},
		{"completed holds", c, State{Revision: "r2", Phase: Completed, Step: 1}, at(8 * m).stableRev("r2"), want{ActionHold, Completed, 1, 0, 0, -1, false, false, "complete"}},
		{"step without pause waits for promote", canaryWait(), State{Revision: "r2", Phase: Progressing, Step: 1, Weight: 20, StepStarted: t0}, at(time.Hour).ready(), want{ActionHold, Progressing, 1, 20, 2, -1, false, false, "promote"}},
		// Analysis.
		{"pause over but no verdict yet", ca, serving(ca, 0, 0), at(2 * m).ready(), want{ActionHold, Progressing, 0, 10, 1, 2*m + 30*time.Second, false, false, "last: none yet"}},
		{"pause over, inconclusive never advances", ca, serving(ca, 0, 0), at(2 * m).ready().verdict(inconc(90*time.Second, 2*m)), want{ActionHold, Progressing, 0, 10, 1, 2*m + 30*time.Second, false, false, "last: Inconclusive"}},
		{"pause over and a pass: advance", ca, serving(ca, 0, 0), at(2 * m).ready().verdict(pass(90*time.Second, 2*m)), want{ActionAdvance, Progressing, 1, 10, 5, 2*m + ReadyPoll, false, false, "step 0 passed"}},
		{"a pass before the pause ends holds", ca, serving(ca, 0, 0), at(m).ready().verdict(pass(30*time.Second, m)), want{ActionHold, Progressing, 0, 10, 1, m + 30*time.Second, false, false, "held until"}},
		{"a verdict from before the step does not count", ca, serving(ca, 0, m), at(3 * m).ready().verdict(pass(30*time.Second, 3*m)), want{ActionHold, Progressing, 0, 10, 1, 3*m + 30*time.Second, false, false, "none yet"}},
		{"a failure aborts at once", ca, serving(ca, 1, 0), at(m).ready().verdict(fail(30*time.Second, m)), want{ActionAbort, Aborted, 1, 0, 0, -1, false, false, "analysis failed at step 1 (weight 50%): error ratio 0.31 > 0.05"}},
		{"a failure below the limit holds", c2, serving(c2, 1, 0), at(m).ready().verdict(fail(30*time.Second, m)), want{ActionHold, Progressing, 1, 50, 5, m + 30*time.Second, false, false, "held"}},
		{"the second consecutive failure aborts", c2, func() State {
			s := serving(c2, 1, 0)
			s.Failures, s.Verdict, s.AnalysedAt = 1, Fail, t0.Add(m)
			return s
		}(), at(2 * m).ready().verdict(fail(90*time.Second, 2*m)), want{ActionAbort, Aborted, 1, 0, 0, -1, false, false, "error ratio"}},
		{"a failure counted once", c2, func() State {
			s := serving(c2, 1, 0)
			s.Failures, s.Verdict, s.AnalysedAt = 1, Fail, t0.Add(m)
			return s
		}(), at(2 * m).ready().verdict(fail(30*time.Second, m)), want{ActionHold, Progressing, 1, 50, 5, 2*m + 30*time.Second, false, false, "held"}},
		{"a failure aborts even while paused", ca, func() State { s := serving(ca, 0, 0); s.Paused = true; return s }(), at(m).ready().verdict(fail(0, m)), want{ActionAbort, Aborted, 0, 0, 0, -1, false, false, "analysis failed"}},
		{"aborted stays aborted", ca, aborted, at(time.Hour).ready().verdict(pass(0, time.Hour)), want{ActionHold, Aborted, 1, 0, 0, -1, false, false, "waiting for a new revision"}},
		// Operators.
		{"pause freezes", ca, serving(ca, 0, 0), at(5 * m).ready().cmd(CommandPause), want{ActionHold, Progressing, 0, 10, 1, 5*m + 30*time.Second, true, false, "paused by an operator"}},
		{"paused and waiting for the colour: no traffic moves", c, State{Revision: "r2", Phase: Progressing, Step: 1, Weight: 10, Paused: true}, at(m).ready(), want{ActionHold, Progressing, 1, 10, 5, -1, true, false, "paused"}},
		{"resume restarts the step's pause", c, func() State { s := serving(c, 0, 0); s.Paused = true; return s }(), at(10 * m).ready().cmd(CommandResume), want{ActionHold, Progressing, 0, 10, 1, 12 * m, false, false, "held until"}},
		{"operator abort", c, serving(c, 1, 0), at(m).ready().cmd(CommandAbort), want{ActionAbort, Aborted, 1, 0, 0, -1, false, false, "aborted by an operator"}},
		{"operator promote skips steps", c, serving(c, 0, 0), at(m).ready().cmd(CommandPromote), want{ActionPromote, Promoting, 0, 10, 1, m + ReadyPoll, false, false, "promoted"}},
		{"promote wins over a failure", ca, serving(ca, 0, 0), at(m).ready().cmd(CommandPromote).verdict(fail(0, m)), want{ActionPromote, Promoting, 0, 10, 1, m + ReadyPoll, false, false, "promoted"}},
		{"promote an aborted revision", ca, aborted, at(m).cmd(CommandPromote), want{ActionPromote, Promoting, 1, 0, 0, m + ReadyPoll, false, false, "after the abort"}},
		{"retry an aborted revision", ca, aborted, at(m).cmd(CommandRetry), want{ActionStart, Progressing, 0, 0, 1, m + ReadyPoll, false, false, "retried"}},
		{"abort too late while promoting", c, State{Revision: "r2", Phase: Promoting, Step: 1, Weight: 50, StepStarted: t0}, at(m).cmd(CommandAbort), want{ActionHold, Promoting, 1, 50, 5, m + ReadyPoll, false, false, "abort ignored"}},
		{"pause on a completed rollout is ignored", c, State{Revision: "r2", Phase: Completed}, at(m).cmd(CommandPause), want{ActionHold, Completed, 0, 0, 0, -1, false, false, "pause ignored"}},
		// A new revision.
		{"supersede mid-step: traffic back first", c, serving(c, 1, 0), at(m).rev("r3").ready(), want{ActionRestart, Progressing, 0, 0, 1, m + ReadyPoll, false, false, "superseded"}},
		{"supersede a switched blueGreen", bg, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(m).rev("r3"), want{ActionRestart, Previewing, 0, 0, 10, m + ReadyPoll, false, false, "traffic back on stable"}},
		{"supersede keeps an operator's pause", c, func() State { s := serving(c, 1, 0); s.Paused = true; return s }(), at(m).rev("r3").ready(), want{ActionRestart, Progressing, 0, 0, 1, m + ReadyPoll, true, false, "superseded"}},
		{"a new revision after an abort starts afresh", ca, aborted, at(m).rev("r3"), want{ActionStart, Progressing, 0, 0, 1, m + ReadyPoll, false, false, "started"}},
		{"git back to what stable runs ends the rollout", c, serving(c, 1, 0), at(m).rev("r1").ready(), want{ActionFinalize, Completed, 0, 0, 0, -1, false, false, "rollout of r2 ended"}},
		{"stable already runs the rollout's revision", c, serving(c, 1, 0), at(m).stableRev("r2").ready(), want{ActionFinalize, Completed, 1, 0, 0, -1, false, false, "rollout of r2 ended"}},
		// Blue/green.
		{"preview ready: no traffic yet", bg, State{Revision: "r2", Phase: Previewing}, at(m).ready(), want{ActionAdvance, Previewing, 0, 0, 10, 6 * m, false, false, "no traffic until the switch"}},
		{"preview pause over: switch", bg, State{Revision: "r2", Phase: Previewing, StepStarted: t0}, at(5 * m).ready(), want{ActionAdvance, Switched, 0, 100, 10, 15 * m, false, false, "switched"}},
		{"router-only analysis cannot hold the preview", bga, State{Revision: "r2", Phase: Previewing, StepStarted: t0}, at(5 * m).ready().verdict(inconc(0, 5*m)), want{ActionAdvance, Switched, 0, 100, 10, 5 * m, false, false, "switched"}},
		{"a smoke webhook must pass the preview", bgw, State{Revision: "r2", Phase: Previewing, StepStarted: t0}, at(5 * m).ready(), want{ActionHold, Previewing, 0, 0, 10, 5*m + 30*time.Second, false, false, "passing analysis"}},
		{"rollback window not over", bg, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(5 * m).ready(), want{ActionHold, Switched, 0, 100, 10, 10 * m, false, false, "held until"}},
		{"window with no length still needs a pass", bga, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(m).ready().verdict(inconc(0, m)), want{ActionHold, Switched, 0, 100, 10, m + 30*time.Second, false, false, "Inconclusive"}},
		{"window over: promote on the preview's traffic", bg, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(10 * m).ready(), want{ActionPromote, Promoting, 0, 100, 10, 10*m + ReadyPoll, false, false, "updating the stable"}},
		{"failure in the window rolls back at once", bga, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(m).ready().verdict(fail(0, m)), want{ActionAbort, Aborted, 0, 0, 0, -1, false, false, "rollback window"}},
		{"operator rollback in the window", bg, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(m).ready().cmd(CommandAbort), want{ActionAbort, Aborted, 0, 0, 0, -1, false, false, "operator"}},
		{"promote a ready preview switches with it", bg, State{Revision: "r2", Phase: Previewing, StepStarted: t0}, at(m).ready().cmd(CommandPromote), want{ActionPromote, Promoting, 0, 100, 10, m + ReadyPoll, false, false, "promoted"}},
		{"promote a preview not yet ready leaves traffic on stable", bg, State{Revision: "r2", Phase: Previewing}, at(m).cmd(CommandPromote), want{ActionPromote, Promoting, 0, 0, 0, m + ReadyPoll, false, false, "promoted"}},
		{"blueGreen finalize: traffic back to the updated stable", bg, State{Revision: "r2", Phase: Promoting, Weight: 100, StepStarted: t0}, at(12 * m).stableReady(), want{ActionFinalize, Completed, 0, 0, 0, -1, false, false, "all traffic on stable"}},
		// Replica-ratio fallback.
		{"fallback scales by ratio", fallback, State{Revision: "r2", Phase: Progressing, Step: 1, Weight: 10}, at(m).replicas(4), want{ActionHold, Progressing, 1, 10, 2, m + ReadyPoll, false, false, "2 replicas"}},
		{"fallback at least one replica", fallback, State{}, at(0).replicas(1), want{ActionStart, Progressing, 0, 0, 1, ReadyPoll, false, false, "1 replicas"}},
		// Bad input.
		{"invalid spec", Spec{Strategy: "linear"}, serving(c, 1, 0), at(m), want{err: true}},
		{"no time", c, serving(c, 1, 0), Input{Revision: "r2", Replicas: 1}, want{err: true}},
		{"no revision", c, serving(c, 1, 0), at(m).rev(""), want{err: true}},
		{"no replicas", c, serving(c, 1, 0), at(m).replicas(0), want{err: true}},
		{"unknown command", c, serving(c, 1, 0), at(m).cmd("rollback"), want{err: true}},
		{"unknown verdict", c, serving(c, 1, 0), at(m).verdict(Verdict{Result: "Maybe"}), want{err: true}},
		{"recorded step beyond the spec", c, State{Revision: "r2", Phase: Progressing, Step: 5, Weight: 50, StepStarted: t0}, at(m), want{err: true}},
		{"recorded weight beyond the step", c, State{Revision: "r2", Phase: Progressing, Step: 0, Weight: 50, StepStarted: t0}, at(m), want{err: true}},
		{"recorded blueGreen phase for a canary", c, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(m), want{err: true}},
		{"recorded canary phase for blueGreen", bg, State{Revision: "r2", Phase: Progressing, Weight: 10}, at(m), want{err: true}},
		{"recorded aborted state with traffic", c, State{Revision: "r2", Phase: Aborted, Weight: 10}, at(m), want{err: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check(t, Decide(tc.spec, tc.st, tc.in), tc.want)
		})
	}
}

// canaryWait is a canary whose last step waits for an operator.
func canaryWait() Spec {
	s := Spec{Strategy: Canary, Steps: []Step{{5, time.Minute}, {20, 0}}, Router: router()}
	s.setDefaults()
	return s
}

func (in Input) colour(n int) Input { in.ColourReplicas = n; return in }

// With a router, the colour traffic leaves keeps its tasks for the
// scale-down delay: the router polls its weights and still sends requests
// there until its next poll.
func TestDecide_scaleDownDelay(t *testing.T) {
	const m = time.Minute
	delayed := func(s Spec) Spec { s.ScaleDownDelay = 30 * time.Second; return s }
	c, ca, bg := delayed(canary(nil)), delayed(canary(ratioCheck(1))), delayed(blueGreen(nil, 10*m))
	drainingAt := func(st State, at time.Duration) State { st.ScaleDownAt = t0.Add(at); return st }
	done := State{Revision: "r2", Phase: Completed, Step: 1}
	abortedR2 := State{Revision: "r2", Phase: Aborted, Step: 1, Reason: "analysis failed", Metric: "error ratio", Values: "0.31 > 0.05"}
	supersededR2 := State{Revision: "r2", Phase: Superseded, Step: 1}
	pausedR2 := supersededR2
	pausedR2.Paused = true
	cases := []struct {
		name    string
		spec    Spec
		st      State
		in      Input
		want    want
		drainAt time.Duration // -1: no scale-down time recorded
	}{
		{"finalize keeps the colour's tasks for the delay", c, State{Revision: "r2", Phase: Promoting, Step: 1, Weight: 50, StepStarted: t0}, at(7 * m).stableReady().colour(5),
			want{ActionFinalize, Completed, 1, 0, 5, 7*m + 30*time.Second, false, false, "all traffic on stable"}, 7*m + 30*time.Second},
		{"while draining the colour keeps what it runs", c, drainingAt(done, 7*m+30*time.Second), at(7 * m).stableRev("r2").colour(5),
			want{ActionHold, Completed, 1, 0, 5, 7*m + 30*time.Second, false, false, "once the router has let go"}, 7*m + 30*time.Second},
		{"after the delay the colour goes to zero", c, drainingAt(done, 7*m+30*time.Second), at(8 * m).stableRev("r2").colour(5),
			want{ActionHold, Completed, 1, 0, 0, -1, false, false, "complete"}, -1},
		{"an abort from traffic drains too", ca, serving(ca, 1, 0), at(m).ready().colour(5).verdict(fail(30*time.Second, m)),
			want{ActionAbort, Aborted, 1, 0, 5, m + 30*time.Second, false, false, "analysis failed"}, m + 30*time.Second},
		{"an aborted colour drains, then stops", ca, drainingAt(abortedR2, m+30*time.Second), at(m + 10*time.Second).colour(5),
			want{ActionHold, Aborted, 1, 0, 5, m + 30*time.Second, false, false, "once the router has let go"}, m + 30*time.Second},
		{"a retry during the drain starts at once", ca, drainingAt(abortedR2, m+30*time.Second), at(m + 10*time.Second).colour(5).cmd(CommandRetry),
			want{ActionStart, Progressing, 0, 0, 1, m + 10*time.Second + ReadyPoll, false, false, "retried"}, -1},
		{"an abort with no traffic on the colour needs no drain", c, State{Revision: "r2", Phase: Progressing, Step: 0}, at(m).colour(1).cmd(CommandAbort),
			want{ActionAbort, Aborted, 0, 0, 0, -1, false, false, "operator"}, -1},
		{"blue/green: back to the updated stable, the preview drains", bg, State{Revision: "r2", Phase: Promoting, Weight: 100, StepStarted: t0}, at(12 * m).stableReady().colour(10),
			want{ActionFinalize, Completed, 0, 0, 10, 12*m + 30*time.Second, false, false, "all traffic on stable"}, 12*m + 30*time.Second},
		// A new revision (or git back to stable) while the colour has
		// traffic: the traffic goes back at once, the colour keeps r2's
		// spec and tasks for the delay, and only then takes the new one.
		{"a new revision mid-step: traffic back, the colour drains on r2", c, serving(c, 1, 0), at(m).rev("r3").ready().colour(5),
			want{ActionSupersede, Superseded, 1, 0, 5, m + 30*time.Second, false, false, "superseded the unfinished rollout of r2"}, m + 30*time.Second},
		{"during the drain the new revision waits", c, drainingAt(supersededR2, m+30*time.Second), at(m + 10*time.Second).rev("r3").colour(5),
			want{ActionHold, Superseded, 1, 0, 5, m + 30*time.Second, false, false, "the new revision starts then"}, m + 30*time.Second},
		{"after the drain the new revision starts from the first step", c, drainingAt(supersededR2, m+30*time.Second), at(2 * m).rev("r3").colour(5),
			want{ActionRestart, Progressing, 0, 0, 1, 2*m + ReadyPoll, false, false, "starting again from the first step"}, -1},
		{"an operator's pause outlives the drain", c, drainingAt(pausedR2, m+30*time.Second), at(2 * m).rev("r3").colour(5),
			want{ActionRestart, Progressing, 0, 0, 1, 2*m + ReadyPoll, true, false, "starting again"}, -1},
		{"blue/green switched: traffic back on stable, the preview drains on r2", bg, State{Revision: "r2", Phase: Switched, Weight: 100, StepStarted: t0}, at(m).rev("r3").colour(10),
			want{ActionSupersede, Superseded, 0, 0, 10, m + 30*time.Second, false, false, "all traffic back on stable"}, m + 30*time.Second},
		{"a completed colour still draining: the new revision waits", c, drainingAt(done, 7*m+30*time.Second), at(7 * m).rev("r3").colour(5),
			want{ActionHold, Completed, 1, 0, 5, 7*m + 30*time.Second, false, false, "the new revision starts then"}, 7*m + 30*time.Second},
		{"a new revision before the colour had traffic needs no drain", c, State{Revision: "r2", Phase: Progressing, Step: 0}, at(m).rev("r3").colour(1),
			want{ActionRestart, Progressing, 0, 0, 1, m + ReadyPoll, false, false, "starting again"}, -1},
		{"git back to stable: the colour drains on r2 first", c, serving(c, 1, 0), at(m).rev("r1").ready().colour(5),
			want{ActionSupersede, Superseded, 1, 0, 5, m + 30*time.Second, false, false, "superseded"}, m + 30*time.Second},
		{"git back to stable after the drain: the rollout ends", c, drainingAt(supersededR2, m+30*time.Second), at(2 * m).rev("r1").colour(5),
			want{ActionFinalize, Completed, 0, 0, 0, -1, false, false, "rollout of r2 ended"}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.spec, tc.st, tc.in)
			check(t, d, tc.want)
			wantAt := time.Time{}
			if tc.drainAt >= 0 {
				wantAt = t0.Add(tc.drainAt)
			}
			if !d.State.ScaleDownAt.Equal(wantAt) {
				t.Errorf("scale-down at %v, want %v", d.State.ScaleDownAt, wantAt)
			}
			back, err := StateFromLabels(d.State.Labels())
			if err != nil || !back.ScaleDownAt.Equal(d.State.ScaleDownAt) {
				t.Errorf("the record does not keep the scale-down time: %+v, %v", back, err)
			}
		})
	}
}
