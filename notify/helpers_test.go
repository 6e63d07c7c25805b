package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/internal/syncbuf"
)

// fakeClock stands still until advanced, and records every wait asked of
// it while ending each one at once.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// logBuffer collects log output from several goroutines.
type logBuffer = syncbuf.Buffer

// request is what a receiver got.
type request struct {
	path   string
	header http.Header
	body   []byte
}

func (r request) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// receiver is a webhook endpoint; respond decides the answer to the n-th
// request (from 1). A nil respond answers 200.
type receiver struct {
	*httptest.Server
	got chan request

	mu sync.Mutex
	n  int
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan request, 1000)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.n++
		n := rc.n
		rc.mu.Unlock()
		rc.got <- request{path: r.URL.Path, header: r.Header.Clone(), body: body}
		if respond != nil {
			respond(n, w, r)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n
}

// next returns the next request, failing the test after a deadline.
func (rc *receiver) next(t *testing.T) request {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no request arrived")
		return request{}
	}
}

// slackPath is the shape of a Slack webhook path: the whole of it is the
// credential.
const slackPath = "/services/T0000000/B0000000/XXXXSECRETXXXXXXXXXXXXXX"

// urlFile writes a URL file and returns its path.
func urlFile(t *testing.T, url string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(p, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// harness runs a Dispatcher on a fresh Broker for one test.
type harness struct {
	d      *Dispatcher
	broker *events.Broker
	clock  *fakeClock
	logs   *logBuffer
}

// start runs a Dispatcher for cfg until the test ends. Options left zero
// get a fake clock, debug logs into a buffer and millisecond backoff.
func start(t *testing.T, cfg []application.Notification, opts Options) *harness {
	t.Helper()
	h := &harness{broker: events.NewBroker(events.BrokerOptions{}), logs: &logBuffer{}}
	if opts.Clock == nil {
		h.clock = newFakeClock()
		opts.Clock = h.clock
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Backoff == (Backoff{}) {
		opts.Backoff = Backoff{Min: time.Millisecond, Max: time.Second}
	}
	d, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, h.broker)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(t, "the dispatcher to subscribe", func() bool { return h.broker.Subscribers() == 1 })
	return h
}

// stats returns the counters of the named sink.
func (h *harness) stats(name string) SinkStats {
	for _, s := range h.d.Stats() {
		if s.Sink == name {
			return s
		}
	}
	return SinkStats{}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// sinkConfig is a valid sink of type kind posting to url.
func sinkConfig(t *testing.T, name string, kind application.NotificationType, url string) application.Notification {
	return application.Notification{Name: name, Type: kind, URLFile: urlFile(t, url)}
}

func failed(app, msg string) events.Event {
	return events.Event{Type: events.SyncFailed, App: app, Stack: app, Revision: "0123456789abcdef", Message: msg}
}
