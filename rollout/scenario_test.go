package rollout

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// viaLabels is what a restarted controller sees: the state as the swarm
// recorded it.
func viaLabels(t *testing.T, s State) State {
	t.Helper()
	back, err := StateFromLabels(s.Labels())
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestACanaryRunsThroughEveryStepAndPromotes(t *testing.T) {
	spec := canary(ratioCheck(1))
	var st State
	var seen []string
	step := func(in Input) Decision {
		d := Decide(spec, st, in)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		st = viaLabels(t, d.State)
		seen = append(seen, string(d.Action)+"/"+strconv.Itoa(d.Weights.Canary))
		return d
	}
	const m = time.Minute
	step(at(0))
	step(at(10 * time.Second).ready())                           // step 0 flows
	step(at(2*m + 10*time.Second).ready().verdict(pass(m, 2*m))) // pause over, pass
	step(at(3 * m).ready())                                      // step 1 flows
	step(at(8 * m).ready().verdict(pass(7*m, 8*m)))              // last step passed
	step(at(9 * m))                                              // stable updating
	d := step(at(10 * m).stableReady().stableRev("r2"))
	want := []string{"start/0", "advance/10", "advance/10", "advance/50", "promote/50", "hold/50", "finalize/0"}
	if len(seen) != len(want) {
		t.Fatalf("actions %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("actions %v, want %v", seen, want)
			break
		}
	}
	if d.State.Phase != Completed || d.Replicas != 0 {
		t.Errorf("final %+v", d)
	}
}

func TestARestartedControllerResumesTheRecordedStepAndItsPause(t *testing.T) {
	spec := canary(nil)
	const m = time.Minute
	// Step 1 (50%, 5m) began to flow at t0+3m; the controller died then.
	d := Decide(spec, State{Revision: "r2", Phase: Progressing, Step: 1, Weight: 10}, at(3*m).ready())
	rec := d.State.Labels()
	// A new controller reads the record at t0+5m: still step 1, held until
	// t0+8m, not started over and not passed.
	st, err := StateFromLabels(rec)
	if err != nil {
		t.Fatal(err)
	}
	d = Decide(spec, st, at(5*m).ready())
	if d.State.Step != 1 || d.Weights.Canary != 50 || d.Action != ActionHold || !d.NextCheck.Equal(t0.Add(8*m)) {
		t.Errorf("resumed at %+v weights %+v next %v, want step 1 at 50%% until t0+8m", d.State, d.Weights, d.NextCheck)
	}
	// Down for an hour: one step at a time, never straight to promote.
	d = Decide(spec, st, at(time.Hour).ready())
	if d.Action != ActionPromote || d.Weights.Canary != 50 {
		t.Errorf("after an hour: %s at %+v, want a promote with the weights unchanged", d.Action, d.Weights)
	}
	st0 := State{Revision: "r2", Phase: Progressing, Step: 0, Weight: 10, StepStarted: t0}
	d = Decide(spec, viaLabels(t, st0), at(time.Hour).ready())
	if d.State.Step != 1 || d.Weights.Canary != 10 || !d.State.StepStarted.IsZero() {
		t.Errorf("a step passed after downtime went to %+v with %+v; want step 1 scaled but its traffic not flowing yet", d.State, d.Weights)
	}
}

// TestDecideKeepsItsPromisesUnderRandomInputs drives many random sequences
// of inputs and checks, after every decision: the weights sum to 100, an
// aborted rollout sends nothing to the canary, the canary never gets more
// than its current step's weight (blue/green: 100 only once the preview
// was ready), traffic only grows on a colour reported ready, and the state
// reads back from its labels.
func TestDecideKeepsItsPromisesUnderRandomInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specs := []Spec{canary(nil), canary(ratioCheck(1)), canary(ratioCheck(3)), canaryWait(),
		blueGreen(nil, 0), blueGreen(ratioCheck(2), 3*time.Minute), blueGreen(webhookCheck(), time.Minute)}
	cmds := []Command{NoCommand, NoCommand, NoCommand, NoCommand, NoCommand, NoCommand, CommandPromote, CommandAbort, CommandPause, CommandResume, CommandRetry}
	results := []Result{"", Pass, Pass, Fail, Inconclusive}
	revs := []string{"r1", "r2", "r2", "r2", "r3"}
	for run := 0; run < 400; run++ {
		spec := specs[run%len(specs)]
		var st State
		now := t0
		last := now
		for i := 0; i < 60; i++ {
			now = now.Add(time.Duration(rng.IntN(200)) * time.Second)
			in := Input{Now: now, Revision: revs[rng.IntN(len(revs))], StableRevision: "r1", Replicas: 1 + rng.IntN(12),
				ColourReady: rng.IntN(3) > 0, StableReady: rng.IntN(2) == 0, Command: cmds[rng.IntN(len(cmds))]}
			if rng.IntN(8) == 0 {
				in.StableRevision = in.Revision
			}
			if r := results[rng.IntN(len(results))]; r != "" {
				in.Verdict = Verdict{Result: r, Metric: "m", Values: "v", From: last, To: now}
			}
			d := Decide(spec, st, in)
			if d.Err != nil {
				t.Fatalf("run %d input %d: %v (state %+v)", run, i, d.Err, st)
			}
			w := d.Weights
			if w.Stable+w.Canary != 100 || w.Canary < 0 || w.Stable < 0 {
				t.Fatalf("run %d: weights %+v", run, w)
			}
			if d.State.Phase == Aborted && (w.Canary != 0 || d.Replicas != 0) {
				t.Fatalf("run %d: aborted with %+v and %d replicas", run, w, d.Replicas)
			}
			if max := maxWeight(spec, d.State); w.Canary > max {
				t.Fatalf("run %d: canary weight %d beyond the step's %d (%+v)", run, w.Canary, max, d.State)
			}
			if w.Canary > st.Weight && d.State.Revision == st.Revision && !in.ColourReady {
				t.Fatalf("run %d: weight grew %d -> %d on a colour not ready", run, st.Weight, w.Canary)
			}
			if w.Canary > 0 && d.State.Revision != st.Revision {
				t.Fatalf("run %d: a new revision got %d%% at once", run, w.Canary)
			}
			if d.NextCheck.Before(now) && !d.NextCheck.IsZero() {
				t.Fatalf("run %d: next check %v before now %v", run, d.NextCheck, now)
			}
			st = viaLabels(t, d.State)
			last = now
		}
	}
}

func maxWeight(spec Spec, st State) int {
	if spec.Strategy == BlueGreen {
		if st.Phase == Previewing {
			return 0
		}
		return 100
	}
	return spec.Steps[st.Step].Weight
}
