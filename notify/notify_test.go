package notify

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

func TestSink_wants(t *testing.T) {
	progress := events.Progress("shop", "shop", "web", 1, 2, "updating", "")
	appHealth := events.Event{Type: events.HealthChanged, App: "shop", Message: "degraded"}
	tests := []struct {
		name string
		cfg  application.Notification
		e    events.Event
		want bool
	}{
		{"default takes every published type", application.Notification{}, failed("shop", "x"), true},
		{"default takes application health", application.Notification{}, appHealth, true},
		{"default leaves per-service progress out", application.Notification{}, progress, false},
		{"services takes progress", application.Notification{Events: []events.Type{events.HealthChanged}, Services: true}, progress, true},
		{"markers never pass", application.Notification{}, events.Event{Type: events.Lagged}, false},
		{"gap never passes", application.Notification{}, events.Event{Type: events.Gap}, false},
		{"event filter refuses", application.Notification{Events: []events.Type{events.DriftDetected}}, failed("shop", "x"), false},
		{"event filter passes", application.Notification{Events: []events.Type{events.SyncFailed}}, failed("shop", "x"), true},
		{"application filter passes", application.Notification{Applications: []string{"shop"}}, failed("shop", "x"), true},
		{"application filter refuses", application.Notification{Applications: []string{"shop"}}, failed("billing", "x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Name, cfg.Type, cfg.URLEnv = "s", application.NotifyWebhook, "URL"
			d, err := New([]application.Notification{cfg}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := d.sinks[0].wants(tt.e); got != tt.want {
				t.Errorf("wants = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSink_render(t *testing.T) {
	e := events.Event{Type: events.SyncFailed, App: "shop", Service: "web",
		Revision: "0123456789abcdef", Message: "deploy <!channel> & fail"}
	tests := []struct {
		name     string
		kind     application.NotificationType
		template string
		e        events.Event
		want     string
		wantErr  bool
	}{
		{"slack default escapes values", application.NotifySlack, "", e,
			"*shop* sync.failed web at `0123456789ab`: deploy &lt;!channel&gt; &amp; fail", false},
		{"webhook default keeps values", application.NotifyWebhook, "", e,
			"shop sync.failed web at 0123456789ab: deploy <!channel> & fail", false},
		{"custom template with functions", application.NotifyWebhook,
			`{{upper .App}}/{{.Stack | default "-"}}/{{trunc 4 .Revision}}`, e, "SHOP/-/0123", false},
		{"slack template keeps its own links", application.NotifySlack,
			`<https://ci.example.com/{{.App}}|{{.App}}> {{.Type}}`, e, "<https://ci.example.com/shop|shop> sync.failed", false},
		{"progress data", application.NotifyWebhook,
			`{{.Service}} {{.Data.running}}/{{.Data.desired}}`,
			events.Progress("shop", "shop", "web", 1, 3, "updating", ""), "web 1/3", false},
		{"failure on real data falls back to the default", application.NotifyWebhook,
			`{{trunc 2 .Data.updateState}}`, e, "shop sync.failed web at 0123456789ab: deploy <!channel> & fail", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New([]application.Notification{{Name: "s", Type: tt.kind, URLEnv: "U", Template: tt.template}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.sinks[0].render(tt.e)
			if got != tt.want {
				t.Errorf("text\n got %q\nwant %q", got, tt.want)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("error %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestSink_renderCutsLongText(t *testing.T) {
	d, err := New([]application.Notification{{Name: "s", Type: application.NotifyWebhook, URLEnv: "U",
		Template: "{{.Message}}{{.Message}}"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.sinks[0].render(events.Event{Type: events.SyncFailed, Message: strings.Repeat("é", maxText)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > maxText+len("…") || !strings.HasSuffix(got, "é…") {
		t.Errorf("len %d, ends %q", len(got), got[len(got)-8:])
	}
}

func TestSlackReceivesOnlyText(t *testing.T) {
	rc := newReceiver(t, nil)
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifySlack, rc.URL+slackPath)}, Options{})
	h.broker.Publish(failed("shop", "boom"))
	r := rc.next(t)
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("content type %q", got)
	}
	if r.path != slackPath {
		t.Errorf("path %q", r.path)
	}
	if got, want := string(r.body), "{\"text\":\"*shop* sync.failed at `0123456789ab`: boom\"}"; got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

func TestWebhookReceivesTheEventTextAndHeaders(t *testing.T) {
	rc := newReceiver(t, nil)
	cfg := sinkConfig(t, "hook", application.NotifyWebhook, rc.URL+"/hook")
	cfg.Headers = []application.Header{{Name: "X-Team", Value: "ops"}}
	cfg.Template = "{{.App}}: {{.Type}} {{.Message}}"
	h := start(t, []application.Notification{cfg}, Options{})
	e := h.broker.Publish(failed("shop", "boom"))
	r := rc.next(t)
	if got := r.header.Get("X-Team"); got != "ops" {
		t.Errorf("X-Team %q", got)
	}
	m := r.json(t)
	want := map[string]any{"id": float64(e.ID), "type": "sync.failed", "app": "shop", "stack": "shop",
		"revision": "0123456789abcdef", "message": "boom", "text": "shop: sync.failed boom",
		"time": e.Time.Format(time.RFC3339Nano)}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	if _, ok := m["suppressed"]; ok {
		t.Error("suppressed present with nothing suppressed")
	}
}

func TestOnlyEventsPassingTheFiltersAreSent(t *testing.T) {
	rc := newReceiver(t, nil)
	cfg := sinkConfig(t, "ops", application.NotifyWebhook, rc.URL)
	cfg.Events = []events.Type{events.SyncFailed, events.HealthChanged}
	cfg.Applications = []string{"shop"}
	h := start(t, []application.Notification{cfg}, Options{})

	h.broker.Publish(events.Event{Type: events.SyncSucceeded, App: "shop"})
	h.broker.Publish(failed("billing", "other application"))
	h.broker.Publish(events.Progress("shop", "shop", "web", 1, 2, "updating", "per-service"))
	h.broker.Publish(failed("shop", "wanted"))
	h.broker.Publish(events.Event{Type: events.HealthChanged, App: "shop", Message: "also wanted"})

	// A sink sends in order, so anything filtered wrongly would arrive
	// before these.
	for _, want := range []string{"wanted", "also wanted"} {
		if got := rc.next(t).json(t)["message"]; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	}
}

func TestAFailedDeliveryIsRetriedUntilItSucceeds(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifySlack, rc.URL)},
		Options{Backoff: Backoff{Min: 40 * time.Millisecond, Max: time.Second}})
	h.broker.Publish(failed("shop", "boom"))
	first, second := rc.next(t), rc.next(t)
	if string(first.body) != string(second.body) {
		t.Errorf("retry sent %s, first attempt %s", second.body, first.body)
	}
	waitFor(t, "the delivery to count", func() bool { return h.stats("ops").Delivered == 1 })
	waits := h.clock.Waits()
	if len(waits) != 1 || waits[0] < 20*time.Millisecond || waits[0] > 40*time.Millisecond {
		t.Errorf("waits %v, want one in [20ms, 40ms]", waits)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifySlack, rc.URL)},
		Options{Backoff: Backoff{Min: time.Millisecond, Max: time.Minute}})
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "the delivery", func() bool { return h.stats("ops").Delivered == 1 })
	if got := h.clock.Waits(); !slices.Equal(got, []time.Duration{7 * time.Second}) {
		t.Errorf("waits %v, want [7s]", got)
	}
}

func TestARetryAfterBeyondTheLimitEndsTheDelivery(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifySlack, rc.URL)}, Options{})
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "the failure", func() bool { return h.stats("ops").Failed == 1 })
	if rc.count() != 1 || len(h.clock.Waits()) != 0 {
		t.Errorf("%d requests, waits %v", rc.count(), h.clock.Waits())
	}
	if !strings.Contains(h.logs.String(), "longer than the 1s limit") {
		t.Errorf("logs do not say why:\n%s", h.logs)
	}
}

func TestAFailingReceiverIsTriedMaxAttemptsTimes(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	})
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifySlack, rc.URL)}, Options{MaxAttempts: 3})
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "the failure", func() bool { return h.stats("ops").Failed == 1 })
	if rc.count() != 3 || len(h.clock.Waits()) != 2 {
		t.Errorf("%d requests, waits %v; want 3 requests, 2 waits", rc.count(), h.clock.Waits())
	}
	if n := strings.Count(h.logs.String(), "giving up"); n != 1 {
		t.Errorf("%d give-up lines:\n%s", n, h.logs)
	}
}

func TestA400IsNotRetriedAndLoggedOnce(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
	})
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifySlack, rc.URL)}, Options{})
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "the failure", func() bool { return h.stats("ops").Failed == 1 })
	if rc.count() != 1 || len(h.clock.Waits()) != 0 {
		t.Errorf("%d requests, waits %v; want 1 request, no wait", rc.count(), h.clock.Waits())
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "not retried"); n != 1 || !strings.Contains(logs, "400 Bad Request: invalid_payload") {
		t.Errorf("want one line with the status and body:\n%s", logs)
	}
}

func TestARepeatIsSuppressedWithinTheWindowAndCountedAfterIt(t *testing.T) {
	rc := newReceiver(t, nil)
	h := start(t, []application.Notification{sinkConfig(t, "ops", application.NotifyWebhook, rc.URL)},
		Options{DedupWindow: 10 * time.Minute})
	h.broker.Publish(failed("shop", "boom"))
	rc.next(t)
	h.broker.Publish(failed("shop", "boom"))
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "two suppressions", func() bool { return h.stats("ops").Suppressed == 2 })

	h.broker.Publish(failed("shop", "a different message"))
	if got := rc.next(t).json(t)["text"]; got != "shop sync.failed at 0123456789ab: a different message" {
		t.Errorf("different text: %q", got)
	}

	h.clock.Advance(10 * time.Minute)
	h.broker.Publish(failed("shop", "boom"))
	m := rc.next(t).json(t)
	if m["text"] != "shop sync.failed at 0123456789ab: boom (2 similar suppressed)" || m["suppressed"] != float64(2) {
		t.Errorf("after the window: text %q, suppressed %v", m["text"], m["suppressed"])
	}
	waitFor(t, "three deliveries", func() bool { return h.stats("ops").Delivered == 3 })
	if rc.count() != 3 {
		t.Errorf("%d requests, want 3", rc.count())
	}
}

func TestAHangingSinkDelaysNeitherTheBrokerNorAnotherSink(t *testing.T) {
	release := make(chan struct{})
	hanging := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	fast := newReceiver(t, nil)
	h := start(t, []application.Notification{
		sinkConfig(t, "hanging", application.NotifyWebhook, hanging.URL),
		sinkConfig(t, "fast", application.NotifyWebhook, fast.URL),
	}, Options{QueueSize: 4, AttemptTimeout: time.Minute})
	t.Cleanup(func() { close(release) })

	h.broker.Publish(failed("shop", "first"))
	hanging.next(t) // the hanging sink is now stuck in its first request

	const n = 200
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range n {
			h.broker.Publish(failed("shop", fmt.Sprint("event ", i)))
		}
	}()
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish was held up")
	}
	last := fmt.Sprint("event ", n-1)
	for {
		if fast.next(t).json(t)["message"] == last {
			break
		}
	}
	waitFor(t, "the hanging sink's queue to overflow", func() bool { return h.stats("hanging").Dropped >= n-4 })
	if hanging.count() != 1 {
		t.Errorf("hanging sink got %d requests", hanging.count())
	}
}

func TestTheURLNeverAppearsInLogs(t *testing.T) {
	// The receiver echoes the path it was called on, as some do in errors.
	echo := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			http.Error(w, "failed at "+r.URL.String(), http.StatusInternalServerError)
			return
		}
		http.Error(w, "no such hook "+r.URL.Path, http.StatusNotFound)
	})
	down := newReceiver(t, nil)
	down.Close() // connection refused, an error that quotes the URL

	h := start(t, []application.Notification{
		sinkConfig(t, "echo", application.NotifySlack, echo.URL+slackPath),
		sinkConfig(t, "down", application.NotifySlack, down.URL+slackPath+"?token=abc"),
		{Name: "bad", Type: application.NotifySlack, URLFile: urlFile(t, "ftp://x"+slackPath)},
	}, Options{MaxAttempts: 2})
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "every sink to fail", func() bool {
		for _, s := range h.d.Stats() {
			if s.Failed != 1 {
				return false
			}
		}
		return true
	})
	logs := h.logs.String()
	for _, secret := range []string{"XXXXSECRET", "/services/", "T0000000", "token=abc", "ftp://"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
	for _, want := range []string{"sink=echo", "sink=down", "sink=bad", "connection refused", "404 Not Found"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestTheURLFileIsReadAtEveryDelivery(t *testing.T) {
	before, after := newReceiver(t, nil), newReceiver(t, nil)
	cfg := sinkConfig(t, "ops", application.NotifySlack, before.URL)
	h := start(t, []application.Notification{cfg}, Options{})
	h.broker.Publish(failed("shop", "one"))
	before.next(t)
	if err := os.WriteFile(cfg.URLFile, []byte(after.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	h.broker.Publish(failed("shop", "two"))
	after.next(t)
}

func TestTheURLMayComeFromTheEnvironment(t *testing.T) {
	rc := newReceiver(t, nil)
	t.Setenv("FLOTILLA_TEST_NOTIFY_URL", rc.URL)
	h := start(t, []application.Notification{{Name: "ops", Type: application.NotifySlack, URLEnv: "FLOTILLA_TEST_NOTIFY_URL"}}, Options{})
	h.broker.Publish(failed("shop", "boom"))
	rc.next(t)
}

func TestNew_refusesWhatCannotBeDelivered(t *testing.T) {
	tests := []struct {
		name string
		cfg  application.Notification
		msg  string
	}{
		{"unknown type", application.Notification{Name: "a", Type: "email", URLEnv: "U"}, "not slack or webhook"},
		{"no URL", application.Notification{Name: "a", Type: application.NotifySlack}, "exactly one of urlFile and urlEnv"},
		{"both URLs", application.Notification{Name: "a", Type: application.NotifySlack, URLEnv: "U", URLFile: "/u"}, "exactly one"},
		{"relative file", application.Notification{Name: "a", Type: application.NotifySlack, URLFile: "u"}, "absolute"},
		{"bad template", application.Notification{Name: "a", Type: application.NotifySlack, URLEnv: "U", Template: "{{.Nope}}"}, "can't evaluate field Nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New([]application.Notification{tt.cfg}, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), `notification "a"`) {
				t.Errorf("error %v, want one naming the sink and saying %q", err, tt.msg)
			}
		})
	}
	_, err := New([]application.Notification{
		{Name: "a", Type: application.NotifySlack, URLEnv: "U"},
		{Name: "a", Type: application.NotifySlack, URLEnv: "U"},
	}, Options{})
	if err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("duplicate names: %v", err)
	}
}

func TestRunWithoutSinksReturnsAtOnce(t *testing.T) {
	d, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroker(events.BrokerOptions{})
	done := make(chan struct{})
	go func() { d.Run(t.Context(), b); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if b.Subscribers() != 0 {
		t.Error("Run left a subscription")
	}
}
