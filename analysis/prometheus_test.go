package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/rollout"
)

// promServer answers /api/v1/query as a Prometheus server does, with the
// status and body a case gives, and keeps the queries it was asked.
type promServer struct {
	mu      sync.Mutex
	status  int
	body    string
	delay   time.Duration
	queries []map[string]string
}

func newPromServer(t *testing.T, status int, body string) (*promServer, string) {
	p := &promServer{status: status, body: body}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return p, s.URL
}

func (p *promServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.queries = append(p.queries, map[string]string{"query": r.Form.Get("query"), "time": r.Form.Get("time")})
	status, body, delay := p.status, p.body, p.delay
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func (p *promServer) asked() []map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]string(nil), p.queries...)
}

// vector is a success answer holding one sample per value.
func vector(values ...string) string {
	var samples []string
	for i, v := range values {
		samples = append(samples, `{"metric":{"job":"shop","instance":"i`+string(rune('0'+i))+`"},"value":[1796529631.5,"`+v+`"]}`)
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

func promTarget(address, query string, max float64) Target {
	return canaryTarget(rollout.Analysis{Interval: 30 * time.Second,
		Prometheus: &rollout.PrometheusCheck{Address: address, Query: query, Max: max}})
}

// judgeOnce runs one interval of tg, from t0+1s to t0+31s.
func judgeOnce(t *testing.T, r *Runner, tg Target) rollout.Verdict {
	t.Helper()
	ctx := context.Background()
	if v, _ := r.Verdict(ctx, tg, t0.Add(time.Second)); v != (rollout.Verdict{}) {
		t.Fatalf("verdict at the interval's start = %+v, want none", v)
	}
	v, _ := r.Verdict(ctx, tg, t0.Add(31*time.Second))
	if v.From != t0.Add(time.Second) || v.To != t0.Add(31*time.Second) {
		t.Errorf("verdict bounds %s..%s, want the interval's", v.From, v.To)
	}
	return v
}

func TestRunner_prometheus(t *testing.T) {
	huge := vector("0.01")
	huge = huge[:len(huge)-3] + `,"pad":"` + strings.Repeat("x", MaxPrometheusAnswer) + `"}}`
	for _, c := range []struct {
		name, body   string
		status       int
		max          float64
		result       rollout.Result
		metric, want string // want: the values, or a part of the reason
	}{
		{"one sample at most max passes", vector("0.05"), 200, 0.05, rollout.Pass, "", ""},
		{"one sample above max fails", vector("0.31"), 200, 0.05, rollout.Fail, "prometheus", "0.31 > 0.05"},
		{"the limit's digits are kept", vector("0.0123"), 200, 0.001, rollout.Fail, "prometheus", "0.012 > 0.001"},
		{"a scalar is judged", `{"status":"success","data":{"resultType":"scalar","result":[1796529631.5,"250"]}}`, 200, 100, rollout.Fail, "prometheus", "250.00 > 100"},
		{"a passing scalar", `{"status":"success","data":{"resultType":"scalar","result":[1796529631.5,"-3"]}}`, 200, 0, rollout.Pass, "", ""},
		{"no series proves nothing", vector(), 200, 1, rollout.Inconclusive, "prometheus", "no series"},
		{"several series prove nothing", vector("0.9", "0.01"), 200, 0.5, rollout.Inconclusive, "prometheus", "2 series"},
		{"NaN proves nothing", vector("NaN"), 200, 1, rollout.Inconclusive, "prometheus", "NaN"},
		{"+Inf proves nothing", vector("+Inf"), 200, 1, rollout.Inconclusive, "prometheus", "+Inf"},
		{"a matrix is not a value", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, 200, 1, rollout.Inconclusive, "prometheus", "matrix"},
		{"a refused query says why", `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected end of input"}`, 400, 1, rollout.Inconclusive, "prometheus", "bad_data): 1:5: parse error"},
		{"an error status with 200", `{"status":"error","errorType":"execution","error":"query timed out"}`, 200, 1, rollout.Inconclusive, "prometheus", "query timed out"},
		{"a 500 proves nothing", `oops`, 500, 1, rollout.Inconclusive, "prometheus", "answered 500"},
		{"a 404 proves nothing", `not here`, 404, 1, rollout.Inconclusive, "prometheus", "answered 404"},
		{"not JSON", `<html>`, 200, 1, rollout.Inconclusive, "prometheus", "not the JSON expected"},
		{"an unparsable value", vector("zero"), 200, 1, rollout.Inconclusive, "prometheus", "not the JSON expected"},
		{"a huge answer is not read", huge, 200, 1, rollout.Inconclusive, "prometheus", "longer than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, addr := newPromServer(t, c.status, c.body)
			v := judgeOnce(t, &Runner{}, promTarget(addr, `sum(rate(errors[$interval]))`, c.max))
			if v.Result != c.result || v.Metric != c.metric || (c.result == rollout.Fail && v.Values != c.want) ||
				(c.result == rollout.Inconclusive && !strings.Contains(v.Values, c.want)) {
				t.Errorf("verdict = %+v, want %s %q %q", v, c.result, c.metric, c.want)
			}
			if c.result == rollout.Inconclusive && strings.Contains(v.Values, addr[len("http://"):]) {
				t.Errorf("reason %q shows the address", v.Values)
			}
			got := p.asked()
			if len(got) == 0 || got[0]["query"] != "sum(rate(errors[30s]))" || got[0]["time"] != "1796529631" {
				t.Errorf("asked %v, want the query with its interval, at the interval's end %d", got, t0.Add(31*time.Second).Unix())
			}
		})
	}
}

func TestRunner_aSlowPrometheusIsInconclusive(t *testing.T) {
	p, addr := newPromServer(t, 200, vector("0.01"))
	p.delay = 5 * time.Second
	tg := promTarget(addr, "q", 1)
	tg.Spec.Analysis.Interval = time.Second // bounds the query's wait
	r := &Runner{}
	ctx := context.Background()
	r.Verdict(ctx, tg, t0)
	start := time.Now()
	v, _ := r.Verdict(ctx, tg, t0.Add(time.Second))
	if v.Result != rollout.Inconclusive || v.Values != "no answer in time" {
		t.Errorf("verdict = %+v, want Inconclusive: no answer in time", v)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the query took %s, want it cut off after the interval (1s)", d)
	}
}

// An address with credentials is used (as basic auth) and its URL never
// shown, even when the server cannot be reached (a dial error names the
// host and port only, as for the webhook).
func TestRunner_prometheusKeepsTheAddressOutOfReasons(t *testing.T) {
	var user, pass string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ = r.BasicAuth()
		_, _ = w.Write([]byte(vector("0.01")))
	}))
	t.Cleanup(s.Close)
	withCreds := strings.Replace(s.URL, "http://", "http://reader:s3cret@", 1)
	if v := judgeOnce(t, &Runner{}, promTarget(withCreds, "q", 1)); v.Result != rollout.Pass || user != "reader" || pass != "s3cret" {
		t.Errorf("verdict = %+v with basic auth %q:%q, want Pass as reader", v, user, pass)
	}

	s.Close()
	v := judgeOnce(t, &Runner{}, promTarget(withCreds, "q", 1))
	if v.Result != rollout.Inconclusive || strings.Contains(v.Values, "s3cret") || strings.Contains(v.Values, "reader") {
		t.Errorf("verdict = %+v, want Inconclusive without the address", v)
	}
}

func TestRunner_prometheusFollowsNoRedirectToAnotherHost(t *testing.T) {
	var reached bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		_, _ = w.Write([]byte(vector("0.01")))
	}))
	t.Cleanup(other.Close)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(s.Close)
	v := judgeOnce(t, &Runner{}, promTarget(s.URL, "q", 1))
	if v.Result != rollout.Inconclusive || !strings.Contains(v.Values, "another host") || reached {
		t.Errorf("verdict = %+v (other host reached: %v), want Inconclusive and no request elsewhere", v, reached)
	}
}

// A blue/green preview, which gets no router traffic, is judged by the
// query; a failing query outweighs a passing webhook.
func TestRunner_prometheusJudgesAPreviewAndItsFailureOutweighsAPass(t *testing.T) {
	_, addr := newPromServer(t, 200, vector("7"))
	_, to := hook(t, 200, `{"result":"pass"}`)
	tg := promTarget(addr, "q", 5)
	tg.Spec.Analysis.Webhook = &rollout.WebhookCheck{URL: to}
	tg.Spec.Strategy, tg.Spec.Steps = rollout.BlueGreen, nil
	tg.State = rollout.State{Revision: "r2", Phase: rollout.Previewing, StepStarted: t0}
	if v := judgeOnce(t, &Runner{}, tg); v.Result != rollout.Fail || v.Metric != "prometheus" || v.Values != "7.00 > 5" {
		t.Errorf("preview verdict = %+v, want Fail on prometheus 7.00 > 5", v)
	}
}

func TestExpandQuery(t *testing.T) {
	for _, c := range []struct {
		d          time.Duration
		query, out string
	}{
		{30 * time.Second, "rate(x[$interval])", "rate(x[30s])"},
		{90*time.Second + time.Millisecond, "rate(x[$interval]) / rate(y[$interval])", "rate(x[1m31s]) / rate(y[1m31s])"},
		{time.Hour, "increase(x[$interval])", "increase(x[1h])"},
		{0, "x[$interval]", "x[1s]"},
		{30 * time.Second, "vector(0.5)", "vector(0.5)"},
	} {
		if got := ExpandQuery(c.query, c.d); got != c.out {
			t.Errorf("ExpandQuery(%q, %s) = %q, want %q", c.query, c.d, got, c.out)
		}
	}
}
