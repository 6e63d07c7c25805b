package analysis_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/analysis"
	"github.com/flotilla-gitops/flotilla/internal/testproc"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// Against a real Prometheus (FLOTILLA_PROMETHEUS, built by
// scripts/prometheus.sh; skipped without it unless
// FLOTILLA_REQUIRE_PROMETHEUS=1): the runner's query goes over the real
// API, and a gauge Prometheus scraped from a target the test controls
// fails and passes the interval.
func TestRunner_judgesWhatARealPrometheusAnswers(t *testing.T) {
	var ratio atomic.Value
	ratio.Store("0.01")
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE shop_error_ratio gauge\nshop_error_ratio{colour=\"canary\"} %s\n", ratio.Load())
	}))
	t.Cleanup(target.Close)
	prom := startPrometheus(t, strings.TrimPrefix(target.URL, "http://"))

	// judge runs one interval of 2s ending now, on a fresh runner.
	judge := func(query string, max float64) rollout.Verdict {
		t.Helper()
		r := &analysis.Runner{}
		a := rollout.Analysis{Interval: 2 * time.Second, MinRequests: 20, FailureLimit: 1,
			Prometheus: &rollout.PrometheusCheck{Address: prom, Query: query, Max: max}}
		end := time.Now()
		tg := analysis.Target{App: "shop", Service: "web",
			Spec:  rollout.Spec{Strategy: rollout.Canary, Steps: []rollout.Step{{Weight: 50}}, Analysis: &a},
			State: rollout.State{Revision: query, Phase: rollout.Progressing, Weight: 50, StepStarted: end.Add(-time.Hour)}}
		r.Verdict(context.Background(), tg, end.Add(-a.Interval))
		v, _ := r.Verdict(context.Background(), tg, end)
		return v
	}
	// until judges query until it gives want (a scrape takes up to a
	// second to land), and returns the last verdict.
	until := func(query string, max float64, want rollout.Result) rollout.Verdict {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v := judge(query, max)
			if v.Result == want || time.Now().After(deadline) {
				return v
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	const q = `max_over_time(shop_error_ratio{colour="canary"}[$interval])`
	if v := until(q, 0.05, rollout.Pass); v.Result != rollout.Pass {
		t.Fatalf("healthy canary: verdict %+v, want Pass", v)
	}
	ratio.Store("0.31")
	if v := until(q, 0.05, rollout.Fail); v.Result != rollout.Fail || v.Metric != "prometheus" || v.Values != "0.31 > 0.05" {
		t.Fatalf("failing canary: verdict %+v, want Fail prometheus 0.31 > 0.05", v)
	}

	for _, c := range []struct {
		query  string
		max    float64
		result rollout.Result
		values string // the values, or a part of the reason
	}{
		{"vector(0.31)", 0.05, rollout.Fail, "0.31 > 0.05"},
		{"scalar(vector(0.5))", 1, rollout.Pass, ""},
		{`shop_error_ratio{colour="none"}`, 1, rollout.Inconclusive, "no series"},
		{`{job="shop"}`, 1, rollout.Inconclusive, "series, not one"},
		{"vector(0) / 0", 1, rollout.Inconclusive, "NaN"},
		{"sum(", 1, rollout.Inconclusive, "query refused (bad_data)"},
		{"shop_error_ratio[1m]", 1, rollout.Inconclusive, "matrix"},
	} {
		v := judge(c.query, c.max)
		t.Logf("%s (max %v): %s %s %s", c.query, c.max, v.Result, v.Metric, v.Values)
		if v.Result != c.result || (c.result == rollout.Fail && v.Values != c.values) || !strings.Contains(v.Values, c.values) {
			t.Errorf("query %q: verdict %+v, want %s %q", c.query, v, c.result, c.values)
		}
	}
}

// startPrometheus runs $FLOTILLA_PROMETHEUS on loopback, scraping target
// (host:port) every 500 ms as job "shop", and returns its base URL.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := os.Getenv("FLOTILLA_PROMETHEUS")
	if bin == "" {
		if os.Getenv("FLOTILLA_REQUIRE_PROMETHEUS") == "1" {
			t.Fatal("FLOTILLA_REQUIRE_PROMETHEUS=1 but FLOTILLA_PROMETHEUS names no prometheus binary (scripts/prometheus.sh builds one)")
		}
		t.Skip("FLOTILLA_PROMETHEUS names no prometheus binary (eval \"$(scripts/prometheus.sh)\")")
	}
	dir := t.TempDir()
	config := fmt.Sprintf("global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: shop\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	cmd.Dir = dir
	testproc.Start(t, "prometheus", cmd).WaitHTTP(t, base+"/-/ready", 60*time.Second, testproc.OK)
	return base
}
