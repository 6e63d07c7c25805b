package bench

import (
	"context"
	"maps"
	"testing"

	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// A steady batch reads the swarm a constant number of times: the same
// requests, operation by operation, at 10 applications as at 100, none of
// them once per application. Request counts are exact, so this is asserted
// here; the time a batch takes is the benchmark's to report.
func TestSteadyBatch_sendsTheSameRequestsAt10And100Applications(t *testing.T) {
	ctx := context.Background()
	batch := map[int]backend.Stats{}
	for _, apps := range []int{10, 100} {
		ctl, be, m := steadyFixture(t, apps, 2)
		// Two batches: the first after the deploy reads what the second does.
		for i := range 2 {
			before := requestsMetric(t, m)
			d := steadyBatch(ctx, t, ctl, be)
			t.Logf("steady batch %d over %d applications: %d requests: %s", i+1, apps, d.Total(), opsOf(d))
			if got := requestsMetric(t, m) - before; got != d.Total() {
				t.Errorf("%d applications: flotilla_docker_requests_total moved by %d in the batch, the backend counted %d", apps, got, d.Total())
			}
			for op, n := range d.Requests {
				if n >= apps {
					t.Errorf("%d applications: %s sent %d times in one batch, once per application or more", apps, op, n)
				}
			}
			if prev, ok := batch[apps]; ok && !maps.Equal(prev.Requests, d.Requests) {
				t.Errorf("%d applications: two steady batches differ: %s, then %s", apps, opsOf(prev), opsOf(d))
			}
			batch[apps] = d
		}
	}
	if !maps.Equal(batch[10].Requests, batch[100].Requests) {
		t.Errorf("a steady batch's requests grow with its applications: 10 send %s, 100 send %s", opsOf(batch[10]), opsOf(batch[100]))
	}
}

// requestsMetric sums flotilla_docker_requests_total of the local swarm.
func requestsMetric(t *testing.T, m *metrics.Metrics) int {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		if f.GetName() != "flotilla_docker_requests_total" {
			continue
		}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if l.GetName() == "swarm" && l.GetValue() == metrics.LocalSwarm {
					n += int(s.GetCounter().GetValue())
				}
			}
		}
	}
	return n
}
