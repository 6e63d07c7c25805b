package reconcile

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/notify"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// webhookSink records the bodies a generic webhook sink receives.
type webhookSink struct {
	t      *testing.T
	mu     sync.Mutex
	bodies []map[string]any
}

func (s *webhookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Error(err)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		s.t.Errorf("webhook body %s: %v", b, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, body)
}

// rolloutSteps are the rollout.step notifications received so far.
func (s *webhookSink) rolloutSteps() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, b := range s.bodies {
		if b["type"] == string(events.RolloutStep) {
			out = append(out, b)
		}
	}
	return out
}

// signalledCanary is shop with web:1 deployed and web:2 committed behind
// analysedCanary's Traefik, its controller publishing to a broker that a
// notifier with one webhook sink (the default events) reads, as the daemon
// wires them, and counting into m (nil counts nothing). drain waits until
// every event published so far reached the sink.
func signalledCanary(t *testing.T, m *metrics.Metrics) (b *chartstest.MinimalBackend, c *Controller, clk *testClock, traefik *recordedTraefik, sink *webhookSink, drain func()) {
	t.Helper()
	traefik = &recordedTraefik{t: t, canaryIs: "b"}
	tsrv := httptest.NewServer(traefik)
	t.Cleanup(tsrv.Close)
	sink = &webhookSink{t: t}
	ssrv := httptest.NewServer(sink)
	t.Cleanup(ssrv.Close)
	urlFile := filepath.Join(t.TempDir(), "webhook-url")
	if err := os.WriteFile(urlFile, []byte(ssrv.URL+"/hook\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	broker := events.NewBroker(events.BrokerOptions{})
	d, err := notify.New([]application.Notification{{Name: "ops", Type: application.NotifyWebhook, URLFile: urlFile}}, notify.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { d.Run(ctx, broker); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	deadline := time.Now().Add(10 * time.Second)
	for broker.Subscribers() == 0 { // Run subscribes in its own goroutine
		if time.Now().After(deadline) {
			t.Fatal("the notifier never subscribed")
		}
		time.Sleep(time.Millisecond)
	}
	drain = func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Drain(ctx, broker); err != nil {
			t.Fatal(err)
		}
	}

	b = chartstest.NewMinimal()
	f := newFakeFetcher()
	metricsURL := tsrv.URL + "/metrics"
	f.commit(t, map[string]string{"docker-compose.yml": analysedCanaryCompose("1", metricsURL)})
	clk = &testClock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	app := testApp("shop", true)
	app.Allow.AnalysisURLs = []string{metricsURL}
	c, err = New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now, Events: broker, Metrics: m}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": analysedCanaryCompose("2", metricsURL)})
	return b, c, clk, traefik, sink, drain
}

// driveToAbort runs the started canary to its first step's traffic, holds
// it within the analysis interval, ends the interval failing and lets the
// scale-down delay pass; after each pass it calls after with its name.
func driveToAbort(t *testing.T, b *chartstest.MinimalBackend, c *Controller, clk *testClock, traefik *recordedTraefik, after func(pass string)) {
	t.Helper()
	reconcileOK(t, c)
	after("start")
	clk.add(5 * time.Second)
	traefik.serve("1-healthy")
	reconcileOK(t, c)
	after("ready")
	clk.add(10 * time.Second)
	reconcileOK(t, c)
	after("hold")
	traefik.serve("2-b-failing")
	clk.add(20 * time.Second)
	reconcileOK(t, c)
	if st, _, _, _ := rolloutState(t, b); st.Phase != rollout.Aborted || st.Weight != 0 {
		t.Fatalf("after a failing interval: %+v, want Aborted with no traffic", st)
	}
	after("abort")
	clk.add(rollout.DefaultScaleDownDelay)
	reconcileOK(t, c)
	if st, _, _, n := rolloutState(t, b); st.Phase != rollout.Aborted || n != 0 {
		t.Fatalf("after the scale-down delay: %+v at %d replicas, want Aborted at none", st, n)
	}
	after("scaled down")
}

// A failing analysis aborts and a notification goes out carrying the
// application, the service, the step, the metric and the values. Sinks
// hear of each deployed step (rollout.step is a default event), once: a
// pass that holds a step or scales the aborted canary down sends nothing.
func TestAnAbortedCanarySendsOneNotificationWithTheStepMetricAndValues(t *testing.T) {
	b, c, clk, traefik, sink, drain := signalledCanary(t, nil)
	want := map[string][]string{
		"start":       {"start"},
		"ready":       {"start", "advance"},
		"hold":        {"start", "advance"},
		"abort":       {"start", "advance", "abort"},
		"scaled down": {"start", "advance", "abort"},
	}
	driveToAbort(t, b, c, clk, traefik, func(pass string) {
		drain()
		var got []string
		for _, n := range sink.rolloutSteps() {
			data, _ := n["data"].(map[string]any)
			action, _ := data["action"].(string)
			got = append(got, action)
		}
		if strings.Join(got, " ") != strings.Join(want[pass], " ") {
			t.Fatalf("after the %s pass: rollout.step notifications %q, want %q", pass, got, want[pass])
		}
	})

	n := sink.rolloutSteps()[2]
	data, _ := n["data"].(map[string]any)
	if n["app"] != "shop" || n["service"] != "web" {
		t.Errorf("abort notification for %v %v, want shop web", n["app"], n["service"])
	}
	if data["phase"] != "Aborted" || data["step"] != float64(0) || data["weight"] != float64(0) ||
		data["metric"] != "error ratio" || data["values"] != "1.00 > 0.05 (stable 0.00)" {
		t.Errorf("abort notification data %v, want Aborted at step 0, weight 0, error ratio 1.00 > 0.05 (stable 0.00)", data)
	}
	text, _ := n["text"].(string)
	for _, w := range []string{"shop", "rollout.step", "web", "step 0", "error ratio 1.00 > 0.05 (stable 0.00)"} {
		if !strings.Contains(text, w) {
			t.Errorf("abort notification text %q does not say %q", text, w)
		}
	}
}

// rolloutSeries are the samples of the rollout families documented in
// docs/rollouts.md, keyed by the family and its labels in name order.
func rolloutSeries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "flotilla_rollout_") {
			continue
		}
		for _, s := range f.Metric {
			var labels []string
			for _, l := range s.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case s.Counter != nil:
				out[key] = s.Counter.GetValue()
			case s.Gauge != nil:
				out[key] = s.Gauge.GetValue()
			default:
				t.Fatalf("%s is neither a counter nor a gauge", key)
			}
		}
	}
	return out
}

// Each deployed step counts flotilla_rollout_steps_total{app,service,action}
// once, and flotilla_rollout_weight_percent{app,service} follows the
// canary's weight: 0 while it gets ready, the step's weight while it
// flows, 0 again once an analysis aborts it. Passes that change nothing
// move neither.
func TestARolloutsStepsAndAbortMoveTheDocumentedSeries(t *testing.T) {
	m := metrics.New()
	b, c, clk, traefik, _, _ := signalledCanary(t, m)
	if got := rolloutSeries(t, m); len(got) != 0 {
		t.Fatalf("before any rollout: %v, want no rollout series", got)
	}
	const (
		start   = "flotilla_rollout_steps_total{action=start,app=shop,service=web}"
		advance = "flotilla_rollout_steps_total{action=advance,app=shop,service=web}"
		abort   = "flotilla_rollout_steps_total{action=abort,app=shop,service=web}"
		weight  = "flotilla_rollout_weight_percent{app=shop,service=web}"
	)
	want := map[string]map[string]float64{
		"start":       {start: 1, weight: 0},
		"ready":       {start: 1, advance: 1, weight: 25},
		"hold":        {start: 1, advance: 1, weight: 25},
		"abort":       {start: 1, advance: 1, abort: 1, weight: 0},
		"scaled down": {start: 1, advance: 1, abort: 1, weight: 0},
	}
	driveToAbort(t, b, c, clk, traefik, func(pass string) {
		got := rolloutSeries(t, m)
		if len(got) != len(want[pass]) {
			t.Fatalf("after the %s pass: series %v, want %v", pass, got, want[pass])
		}
		for k, v := range want[pass] {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("after the %s pass: series %v, want %v", pass, got, want[pass])
			}
		}
	})
}
