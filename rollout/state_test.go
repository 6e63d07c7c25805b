package rollout

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 3, 0, 0, 123456789, time.UTC)

func TestState_labelsRoundTrip(t *testing.T) {
	states := []State{
		{},
		{Revision: "sha256:abc", Phase: Progressing, Step: 1, Weight: 10},
		{Revision: "r1", Phase: Progressing, Step: 2, Weight: 50, StepStarted: t0, Paused: true, Failures: 1, Verdict: Inconclusive, AnalysedAt: t0.Add(time.Minute)},
		{Revision: "r1", Phase: Switched, Weight: 100, StepStarted: t0},
		{Revision: "r1", Phase: Aborted, Step: 1, StepStarted: t0, Failures: 2, Verdict: Fail,
			Reason: "analysis failed at step 1 (weight 50%): error ratio 0.31 > 0.05", Metric: "error ratio", Values: "0.31 > 0.05"},
		{Revision: "r1", Phase: Completed, Step: 3},
	}
	for _, s := range states {
		l := s.Labels()
		for k := range l {
			if !strings.HasPrefix(k, LabelPrefix) {
				t.Errorf("label %s outside %s", k, LabelPrefix)
			}
		}
		back, err := StateFromLabels(l)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		if back != s {
			t.Errorf("round trip of %+v gave %+v", s, back)
		}
	}
}

func TestState_labelsAlwaysCarryEveryKey(t *testing.T) {
	// Writing the labels of a later state over an earlier one must leave
	// nothing of the earlier behind, so both have the same keys.
	a := State{Revision: "r", Phase: Progressing, Paused: true, Reason: "x"}.Labels()
	b := State{}.Labels()
	if len(a) != len(b) {
		t.Fatalf("%d keys against %d", len(a), len(b))
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			t.Errorf("zero state lacks %s", k)
		}
	}
}

func TestStateFromLabels_ignoresOtherLabelsAndRefusesGarbage(t *testing.T) {
	s, err := StateFromLabels(map[string]string{"com.docker.stack.namespace": "shop", "io.flotilla.owner": "x"})
	if err != nil || s != (State{}) {
		t.Errorf("StateFromLabels of unrelated labels = %+v, %v; want the zero state", s, err)
	}
	good := State{Revision: "r", Phase: Progressing, Step: 1, Weight: 10, StepStarted: t0}.Labels()
	for _, tc := range []struct{ key, value string }{
		{"phase", "Running"},
		{"step", "one"},
		{"step", "-1"},
		{"step", "9999999999999999999999"},
		{"weight", "101"},
		{"failures", "-3"},
		{"step-started", "yesterday"},
		{"analysed-at", "2026-13-01T00:00:00Z"},
		{"paused", "yes"},
		{"verdict", "Maybe"},
		{"revision", ""},
		{"colour", "blue"},
	} {
		l := map[string]string{}
		for k, v := range good {
			l[k] = v
		}
		l[LabelPrefix+tc.key] = tc.value
		if s, err := StateFromLabels(l); err == nil {
			t.Errorf("%s=%q read as %+v, want an error", tc.key, tc.value, s)
		}
	}
	if _, err := StateFromLabels(map[string]string{LabelPrefix + "phase": "Aborted", LabelPrefix + "revision": "r", LabelPrefix + "weight": "10"}); err == nil {
		t.Error("an aborted state with traffic on the canary was read")
	}
}

func TestState_labelsClipLongStrings(t *testing.T) {
	s := State{Revision: "r", Phase: Aborted, Reason: strings.Repeat("é", 2000)}
	l := s.Labels()
	if v := l[LabelPrefix+"abort-reason"]; len(v) > maxLabelValue || !strings.HasPrefix(s.Reason, v) {
		t.Errorf("reason label of %d bytes", len(v))
	}
	if _, err := StateFromLabels(l); err != nil {
		t.Error(err)
	}
}

func FuzzStateFromLabels(f *testing.F) {
	f.Add("revision", "r", "phase", "Progressing", "step", "1")
	f.Add("phase", "Aborted", "weight", "0", "abort-reason", "x")
	f.Add("step-started", "2026-12-06T03:00:00.5Z", "paused", "true", "verdict", "Pass")
	f.Add("weight", "100", "phase", "Switched", "revision", "r")
	f.Add("failures", "99999999999", "analysed-at", "0001-01-01T00:00:00Z", "x", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		l := map[string]string{LabelPrefix + k1: v1, LabelPrefix + k2: v2, LabelPrefix + k3: v3}
		s, err := StateFromLabels(l)
		if err != nil {
			return
		}
		// What reads must write back to itself.
		back, err := StateFromLabels(s.Labels())
		if err != nil {
			t.Fatalf("labels of %+v do not read back: %v", s, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip %+v gave %+v", s, back)
		}
	})
}
