package analysis

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/rollout"
)

// traefik serves the samples router/testdata recorded from a real Traefik
// v3.7.13 routing route "app" over backends a and b, renamed to the route
// and backends the served configuration gives app shop's service web.
// canaryIs says which recorded backend plays the canary.
type traefik struct {
	t        *testing.T
	canaryIs string
	mu       sync.Mutex
	sample   string // "" answers 500
	scrapes  int
}

func newTraefik(t *testing.T, canaryIs string) (*traefik, string) {
	f := &traefik{t: t, canaryIs: canaryIs}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return f, s.URL + "/metrics"
}

func (f *traefik) serve(sample string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sample = sample
}

func (f *traefik) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	sample := f.sample
	f.scrapes++
	f.mu.Unlock()
	if sample == "" {
		http.Error(w, "broken", http.StatusInternalServerError)
		return
	}
	b, err := os.ReadFile("../router/testdata/traefik-v3.7.13-" + sample + ".txt")
	if err != nil {
		f.t.Error(err)
		return
	}
	stable := "b"
	if f.canaryIs == "b" {
		stable = "a"
	}
	text := strings.NewReplacer(`"app.`+f.canaryIs+`@http"`, `"shop-web.canary@http"`, `"app.`+stable+`@http"`, `"shop-web.stable@http"`).Replace(string(b))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(text))
}

var t0 = time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)

func canaryTarget(a rollout.Analysis) Target {
	if a.Interval == 0 {
		a.Interval = 30 * time.Second
	}
	if a.MinRequests == 0 {
		a.MinRequests = 20
	}
	return Target{App: "shop", Service: "web",
		Spec: rollout.Spec{Strategy: rollout.Canary, Steps: []rollout.Step{{Weight: 50, Pause: time.Hour}, {Weight: 100}},
			Router: rollout.Router{Provider: rollout.Traefik, Rule: "Host(`shop`)", Port: 80}, Analysis: &a},
		State: rollout.State{Revision: "r2", Phase: rollout.Progressing, Step: 0, Weight: 50, StepStarted: t0}}
}

func ratioFrom(metrics string) rollout.Analysis {
	r := 0.05
	return rollout.Analysis{MaxErrorRatio: &r, Traefik: &rollout.TraefikMetrics{Metrics: metrics}}
}

// runInterval runs one whole interval: the first call starts it on the
// sample first, the second ends it on the sample then.
func runInterval(t *testing.T, r *Runner, f *traefik, tg Target, first, then string) rollout.Verdict {
	t.Helper()
	ctx := context.Background()
	f.serve(first)
	if v, _ := r.Verdict(ctx, tg, t0.Add(time.Second)); v != (rollout.Verdict{}) {
		t.Fatalf("verdict at the interval's start = %+v, want none", v)
	}
	f.serve(then)
	v, _ := r.Verdict(ctx, tg, t0.Add(31*time.Second))
	if v.From != t0.Add(time.Second) || v.To != t0.Add(31*time.Second) {
		t.Errorf("verdict bounds %s..%s, want the interval's", v.From, v.To)
	}
	return v
}

func TestRunner_aFailingCanaryFails(t *testing.T) {
	f, metrics := newTraefik(t, "b")
	v := runInterval(t, &Runner{}, f, canaryTarget(ratioFrom(metrics)), "1-healthy", "2-b-failing")
	if v.Result != rollout.Fail || v.Metric != "error ratio" || v.Values != "1.00 > 0.05 (stable 0.00)" {
		t.Errorf("verdict = %+v, want Fail on the error ratio 1.00 > 0.05 (stable 0.00)", v)
	}
}

func TestRunner_aHealthyCanaryPasses(t *testing.T) {
	f, metrics := newTraefik(t, "a") // a answered 200 throughout
	v := runInterval(t, &Runner{}, f, canaryTarget(ratioFrom(metrics)), "1-healthy", "2-b-failing")
	if v.Result != rollout.Pass {
		t.Errorf("verdict = %+v, want Pass", v)
	}
}

func TestRunner_aSlowCanaryFailsOnItsMeanLatency(t *testing.T) {
	f, metrics := newTraefik(t, "a")
	a := rollout.Analysis{MaxLatency: time.Microsecond, Traefik: &rollout.TraefikMetrics{Metrics: metrics}}
	v := runInterval(t, &Runner{}, f, canaryTarget(a), "1-healthy", "2-b-failing")
	if v.Result != rollout.Fail || v.Metric != "mean latency" || !strings.HasSuffix(strings.Fields(v.Values)[2], "1µs") {
		t.Errorf("verdict = %+v, want Fail on the mean latency over 1µs", v)
	}
}

func TestRunner_noTrafficIsInconclusive(t *testing.T) {
	f, metrics := newTraefik(t, "b")
	v := runInterval(t, &Runner{}, f, canaryTarget(ratioFrom(metrics)), "2-b-failing", "2-b-failing")
	if v.Result != rollout.Inconclusive || v.Metric != "requests" || v.Values != "0 < 20" {
		t.Errorf("verdict = %+v, want Inconclusive with 0 < 20 requests", v)
	}
}

func TestRunner_aTraefikRestartIsInconclusive(t *testing.T) {
	f, metrics := newTraefik(t, "b")
	v := runInterval(t, &Runner{}, f, canaryTarget(ratioFrom(metrics)), "2-b-failing", "3-restarted")
	if v.Result != rollout.Inconclusive || !strings.Contains(v.Values, "restarted") {
		t.Errorf("verdict = %+v, want Inconclusive for the restart", v)
	}
}

func TestRunner_anUnreadableEndpointIsInconclusiveNeverFailOrPass(t *testing.T) {
	for _, tc := range []struct{ name, first, then string }{
		{"at the end", "1-healthy", ""},
		{"at the start", "", "2-b-failing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, metrics := newTraefik(t, "b")
			v := runInterval(t, &Runner{}, f, canaryTarget(ratioFrom(metrics)), tc.first, tc.then)
			if v.Result != rollout.Inconclusive || v.Metric != "traefik metrics" || !strings.Contains(v.Values, "500") {
				t.Errorf("verdict = %+v, want Inconclusive naming the 500", v)
			}
		})
	}
}

func TestRunner_intervalsFollowOneAnotherAndANewStepStartsAfresh(t *testing.T) {
	f, metrics := newTraefik(t, "b")
	r := &Runner{}
	tg := canaryTarget(ratioFrom(metrics))
	ctx := context.Background()
	f.serve("1-healthy")
	if v, _ := r.Verdict(ctx, tg, t0); v != (rollout.Verdict{}) {
		t.Fatalf("first call = %+v, want none", v)
	}
	if v, _ := r.Verdict(ctx, tg, t0.Add(29*time.Second)); v != (rollout.Verdict{}) {
		t.Fatalf("within the interval = %+v, want none", v)
	}
	f.serve("2-b-failing")
	if v, _ := r.Verdict(ctx, tg, t0.Add(30*time.Second)); v.Result != rollout.Fail || v.From != t0 {
		t.Fatalf("at the interval's end = %+v, want Fail from t0", v)
	}
	// The next interval began where that one ended, on that scrape.
	if v, _ := r.Verdict(ctx, tg, t0.Add(60*time.Second)); v.Result != rollout.Inconclusive || v.From != t0.Add(30*time.Second) || v.Values != "0 < 20" {
		t.Fatalf("next interval = %+v, want Inconclusive (no new traffic) from t0+30s", v)
	}
	// The next step: its first interval starts now, nothing carried over.
	tg.State.Step, tg.State.Weight, tg.State.StepStarted = 1, 100, t0.Add(61*time.Second)
	f.serve("1-healthy")
	if v, _ := r.Verdict(ctx, tg, t0.Add(95*time.Second)); v != (rollout.Verdict{}) {
		t.Fatalf("first call of the next step = %+v, want none", v)
	}
	// A controller restart (a new Runner) starts afresh too.
	if v, _ := (&Runner{}).Verdict(ctx, tg, t0.Add(200*time.Second)); v != (rollout.Verdict{}) {
		t.Fatalf("first call after a restart = %+v, want none", v)
	}
}

func TestRunner_nothingIsMeasuredOutsideAServingStep(t *testing.T) {
	f, metrics := newTraefik(t, "b")
	f.serve("1-healthy")
	r := &Runner{}
	for _, st := range []rollout.State{
		{Revision: "r2", Phase: rollout.Progressing},                                  // waiting for the colour
		{Revision: "r2", Phase: rollout.Promoting, StepStarted: t0},                   // promoting
		{Revision: "r2", Phase: rollout.Previewing, StepStarted: t0},                  // no router traffic on a preview
		{Revision: "r2", Phase: rollout.Aborted, StepStarted: t0, Weight: 0, Step: 0}, // ended
	} {
		tg := canaryTarget(ratioFrom(metrics))
		tg.State = st
		for _, d := range []time.Duration{0, time.Minute} {
			if v, _ := r.Verdict(context.Background(), tg, t0.Add(d)); v != (rollout.Verdict{}) {
				t.Errorf("%+v: verdict %+v, want none", st, v)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.scrapes != 0 {
		t.Errorf("%d scrapes, want none", f.scrapes)
	}
}

// hook answers each call with status and body, and keeps what it was sent.
func hook(t *testing.T, status int, body string) (func() []WebhookRequest, string) {
	var got []WebhookRequest
	var mu sync.Mutex
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req WebhookRequest
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook called with %s %s", r.Method, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		if body == "hang" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	sent := func() []WebhookRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]WebhookRequest(nil), got...)
	}
	return sent, s.URL + "/judge?token=s3cret"
}

func TestRunner_webhook(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   rollout.Result
		metric string
		values string
	}{
		{"pass", 200, `{"result":"pass"}`, rollout.Pass, "", ""},
		{"fail with figures", 200, `{"result":"fail","metric":"checkout errors","values":"12 > 3"}`, rollout.Fail, "checkout errors", "12 > 3"},
		{"fail without figures", 201, `{"result":"fail"}`, rollout.Fail, "webhook", ""},
		{"not 2xx", 503, `{"result":"pass"}`, rollout.Inconclusive, "webhook", "answered 503 Service Unavailable"},
		{"not JSON", 200, `ok`, rollout.Inconclusive, "webhook", ""},
		{"unknown result", 200, `{"result":"maybe"}`, rollout.Inconclusive, "webhook", `result "maybe" is neither pass nor fail`},
		{"no answer in time", 200, "hang", rollout.Inconclusive, "webhook", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, to := hook(t, tc.status, tc.body)
			a := rollout.Analysis{Interval: time.Second, Webhook: &rollout.WebhookCheck{URL: to}}
			tg := canaryTarget(a)
			r := &Runner{}
			if v, _ := r.Verdict(context.Background(), tg, t0.Add(time.Second)); v != (rollout.Verdict{}) {
				t.Fatalf("verdict at the start = %+v", v)
			}
			v, _ := r.Verdict(context.Background(), tg, t0.Add(3*time.Second))
			if v.Result != tc.want || v.Metric != tc.metric || (tc.values != "" && v.Values != tc.values) {
				t.Errorf("verdict = %+v, want %s %q %q", v, tc.want, tc.metric, tc.values)
			}
			if strings.Contains(v.Values, "s3cret") {
				t.Errorf("the verdict shows the webhook's URL: %q", v.Values)
			}
			want := WebhookRequest{App: "shop", Service: "web", Phase: "Progressing", Step: 0,
				Weights: WebhookWeights{Stable: 50, Canary: 50}, From: t0.Add(time.Second), To: t0.Add(3 * time.Second)}
			if got := sent(); len(got) != 1 || got[0] != want {
				t.Errorf("webhook was sent %+v, want once %+v", got, want)
			}
		})
	}
}

func TestRunner_webhookJudgesAPreviewAndAFailureOutweighsTraefik(t *testing.T) {
	f, metrics := newTraefik(t, "a") // a healthy canary
	_, to := hook(t, 200, `{"result":"fail","metric":"smoke test","values":"login broken"}`)
	a := ratioFrom(metrics)
	a.Webhook = &rollout.WebhookCheck{URL: to}
	v := runInterval(t, &Runner{}, f, canaryTarget(a), "1-healthy", "2-b-failing")
	if v.Result != rollout.Fail || v.Metric != "smoke test" {
		t.Errorf("verdict = %+v, want the webhook's failure", v)
	}

	tg := canaryTarget(a)
	tg.State = rollout.State{Revision: "r2", Phase: rollout.Previewing, StepStarted: t0}
	f.mu.Lock()
	before := f.scrapes
	f.mu.Unlock()
	r := &Runner{}
	r.Verdict(context.Background(), tg, t0.Add(time.Second))
	if v, _ := r.Verdict(context.Background(), tg, t0.Add(31*time.Second)); v.Result != rollout.Fail {
		t.Errorf("preview verdict = %+v, want the webhook's failure", v)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.scrapes != before {
		t.Error("Traefik was scraped for a preview, which gets no router traffic")
	}
}

// A step begun by the pass that made its traffic flow is judged one
// interval later: the pass after it, at the interval's end, has a verdict
// from the step's start, which Decide counts.
func TestRunner_aBegunStepIsJudgedOneIntervalAfterItsStart(t *testing.T) {
	f, metrics := newTraefik(t, "b")
	r := &Runner{}
	tg := canaryTarget(ratioFrom(metrics))
	ctx := context.Background()
	f.serve("1-healthy")
	r.Begin(ctx, tg, t0)
	f.serve("2-b-failing")
	v, _ := r.Verdict(ctx, tg, t0.Add(30*time.Second))
	if v.Result != rollout.Fail || !v.From.Equal(tg.State.StepStarted) {
		t.Fatalf("first verdict after Begin = %+v, want Fail from the step's start %s", v, tg.State.StepStarted)
	}

	// Begin on a state that measures nothing keeps nothing.
	r2 := &Runner{}
	idle := tg
	idle.State.StepStarted = time.Time{}
	r2.Begin(ctx, idle, t0)
	if len(r2.runs) != 0 {
		t.Fatalf("Begin kept %v for a step whose traffic does not flow", r2.runs)
	}
}

// Each URL an analysis calls is granted in the applications file
// (allow.analysisURLs); a redirect must not carry the call past that grant,
// so the Traefik scrape and the webhook, like the Prometheus query, follow
// a redirect only to the same scheme and host, and say why they stopped
// without showing the URL's token.
func TestRunner_aRedirectToAnotherHostIsNotFollowed(t *testing.T) {
	var reached sync.Map
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Store(r.URL.Path, true)
		_, _ = w.Write([]byte(`{"result":"pass"}`))
	}))
	t.Cleanup(inside.Close)
	granted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inside.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(granted.Close)

	for _, tc := range []struct {
		name, metric string
		a            rollout.Analysis
	}{
		{"traefik metrics", "traefik metrics", ratioFrom(granted.URL + "/metrics?token=s3cret")},
		{"webhook", "webhook", rollout.Analysis{Webhook: &rollout.WebhookCheck{URL: granted.URL + "/judge?token=s3cret"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.a.Interval = time.Second
			tg := canaryTarget(tc.a)
			r := &Runner{}
			r.Verdict(context.Background(), tg, t0.Add(time.Second))
			v, _ := r.Verdict(context.Background(), tg, t0.Add(3*time.Second))
			if v.Result != rollout.Inconclusive || v.Metric != tc.metric || !strings.Contains(v.Values, "redirected to another host") {
				t.Errorf("verdict = %+v, want Inconclusive saying the redirect was not followed", v)
			}
			if strings.Contains(v.Values, "s3cret") {
				t.Errorf("the verdict shows the URL's token: %q", v.Values)
			}
		})
	}
	reached.Range(func(k, _ any) bool {
		t.Errorf("the redirect reached the other host at %v", k)
		return true
	})
}
