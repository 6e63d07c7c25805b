package reconcile

import (
	"context"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// stepCounts is how many observations each step has in
// flotilla_reconcile_step_duration_seconds.
func stepCounts(t *testing.T, m *metrics.Metrics) map[string]uint64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "flotilla_reconcile_step_duration_seconds" {
			continue
		}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if l.GetName() == "step" {
					out[l.GetValue()] = s.Histogram.GetSampleCount()
				}
			}
		}
	}
	return out
}

// Every step a pass runs is timed under its own name, so an operator can
// see where passes spend their time; a pass that fails at a step times that
// step and none after it.
func TestEveryStepOfAPassIsTimedUnderItsName(t *testing.T) {
	m := metrics.New()
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Metrics: m}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Install {
		t.Fatalf("first pass: %v %s", res.Err, res.Action)
	}
	got := stepCounts(t, m)
	for _, s := range steps {
		if got[s.name] != 1 {
			t.Errorf("step %s observed %d times after one pass, want 1", s.name, got[s.name])
		}
	}

	// A render that fails ends the pass there.
	f.commit(t, repoFiles("services: [not, a, mapping]\n"))
	if res, err := c.Reconcile(context.Background(), "shop"); err != nil || res.Err == nil {
		t.Fatalf("a bad commit's pass: %v %v", err, res.Err)
	}
	got = stepCounts(t, m)
	for _, s := range steps {
		want := uint64(1)
		if s.name == "fetch" || s.name == "render" {
			want = 2
		}
		if got[s.name] != want {
			t.Errorf("after a pass that failed to render, step %s observed %d times, want %d", s.name, got[s.name], want)
		}
	}
}
