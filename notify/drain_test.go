package notify

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// A stopping controller drains: Drain returns once every event published
// before it is delivered, even to a receiver that takes its time.
func TestDrainReturnsOnlyOnceThePublishedEventsAreDelivered(t *testing.T) {
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, _ *http.Request) { time.Sleep(100 * time.Millisecond) })
	h := start(t, []application.Notification{sinkConfig(t, "slow", application.NotifyWebhook, rc.URL)}, Options{})
	for _, msg := range []string{"one", "two", "three"} {
		h.broker.Publish(failed("shop", msg))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.d.Drain(ctx, h.broker); err != nil {
		t.Fatal(err)
	}
	if got := h.stats("slow").Delivered; got != 3 {
		t.Fatalf("Drain returned with %d of 3 notifications delivered", got)
	}
}

// A receiver that never answers cannot hold a stop: Drain gives up with
// its context and names the sink still busy.
func TestDrainGivesUpWithItsContextNamingTheBusySink(t *testing.T) {
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	})
	h := start(t, []application.Notification{sinkConfig(t, "stuck", application.NotifyWebhook, rc.URL)}, Options{})
	h.broker.Publish(failed("shop", "never answered"))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := h.d.Drain(ctx, h.broker)
	if err == nil || !strings.Contains(err.Error(), "sink stuck") {
		t.Fatalf("Drain = %v, want an error naming sink stuck", err)
	}
}

// Events from before the dispatcher subscribed never reach it, and Drain
// does not wait for them.
func TestDrainDoesNotWaitForEventsPublishedBeforeRun(t *testing.T) {
	rc := newReceiver(t, nil)
	cfg := sinkConfig(t, "late", application.NotifyWebhook, rc.URL)
	d, err := New([]application.Notification{cfg}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := start(t, []application.Notification{cfg}, Options{}).broker
	b.Publish(failed("shop", "before"))
	// A second dispatcher subscribing after that event was published.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx, b) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the second dispatcher to subscribe", func() bool { return b.Subscribers() == 2 })
	dctx, dcancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer dcancel()
	if err := d.Drain(dctx, b); err != nil {
		t.Fatalf("Drain waited for an event published before Run: %v", err)
	}
}
