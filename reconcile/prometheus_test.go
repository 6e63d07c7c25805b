package reconcile

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// A canary gated on a Prometheus query alone: the pass asks the server at
// the interval's end, with $$interval (compose's escape) standing for the
// interval, and a value above max aborts the rollout with the query's
// figure in the status.
func TestAFailingPrometheusQueryAbortsTheCanary(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		asked = append(asked, r.Form.Get("query"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1796526035,"0.31"]}]}}`))
	}))
	t.Cleanup(prom.Close)
	compose := func(tag string) string {
		return gatedCanaryCompose(tag, `prometheus:
            address: "`+strings.Replace(prom.URL, "http://", "http://reader:s3cret@", 1)+`"
            query: 'sum(rate(errors_total{job="shop-canary"}[$$interval]))'
            max: 0.05`)
	}
	b, f, c, clk := canaryOnMinimal(t, prom.URL)
	f.commit(t, map[string]string{"docker-compose.yml": compose("1")})
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": compose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c) // the canary is ready: its traffic and its first interval start
	if st, _, _, _ := rolloutState(t, b); st.Weight != 25 || st.StepStarted.IsZero() {
		t.Fatalf("once ready: %+v, want weight 25 flowing", st)
	}
	clk.add(30 * time.Second)
	res := reconcileOK(t, c)

	st, _, _, _ := rolloutState(t, b)
	if st.Phase != rollout.Aborted || st.Weight != 0 {
		t.Fatalf("after a failing query: %+v, want Aborted with no traffic", st)
	}
	r := res.Status.Rollouts
	if len(r) != 1 || r[0].Metric != "prometheus" || r[0].Values != "0.31 > 0.05" {
		t.Fatalf("status rollouts %+v, want Aborted on prometheus 0.31 > 0.05", r)
	}
	if res.Status.Health != application.Degraded || !strings.Contains(res.Status.HealthMessage, "prometheus 0.31 > 0.05") ||
		strings.Contains(res.Status.HealthMessage, "s3cret") {
		t.Fatalf("health %s %q, want Degraded with the query's figure and no credentials", res.Status.Health, res.Status.HealthMessage)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != `sum(rate(errors_total{job="shop-canary"}[30s]))` {
		t.Fatalf("asked %q, want the query once, at the interval's end, over 30s", asked)
	}
}
