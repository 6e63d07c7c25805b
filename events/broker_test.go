package events

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func collect(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	var out []Event
	timeout := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events", len(out), n)
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("got %d of %d events before the deadline", len(out), n)
		}
	}
	return out
}

func TestBroker_PublishAssignsIncreasingIDs(t *testing.T) {
	b := NewBroker(BrokerOptions{})
	for i := 1; i <= 3; i++ {
		e := b.Publish(Event{Type: SyncStarted, App: "shop"})
		if e.ID != uint64(i) {
			t.Fatalf("event %d got id %d", i, e.ID)
		}
		if e.Time.IsZero() {
			t.Fatal("Publish left Time zero")
		}
	}
	if b.LastID() != 3 {
		t.Fatalf("LastID = %d, want 3", b.LastID())
	}
}

func TestBroker_subscriberReceivesNewEventsOnly(t *testing.T) {
	b := NewBroker(BrokerOptions{})
	b.Publish(Event{Type: SyncStarted})
	ch, cancel := b.Subscribe(t.Context(), 0)
	defer cancel()
	b.Publish(Event{Type: SyncSucceeded})
	got := collect(t, ch, 1)
	if got[0].ID != 2 || got[0].Type != SyncSucceeded {
		t.Fatalf("got %+v, want the event published after subscribing", got[0])
	}
}

func TestBroker_filterByApp(t *testing.T) {
	b := NewBroker(BrokerOptions{})
	b.Publish(Event{Type: SyncStarted, App: "billing"})
	b.Publish(Event{Type: SyncStarted, App: "shop"})
	ch, cancel := b.SubscribeFilter(t.Context(), 0, Filter{App: "shop"})
	defer cancel()
	b.Publish(Event{Type: SyncFailed, App: "billing"})
	b.Publish(Event{Type: SyncSucceeded, App: "shop"})
	got := collect(t, ch, 1)
	if got[0].App != "shop" || got[0].ID != 4 {
		t.Fatalf("got %+v, want shop's event 4", got[0])
	}
	// Replay honours the filter too.
	ch2, cancel2 := b.SubscribeFilter(t.Context(), 1, Filter{App: "shop"})
	defer cancel2()
	got = collect(t, ch2, 2)
	if got[0].ID != 2 || got[1].ID != 4 {
		t.Fatalf("replay = %v, want ids 2 and 4", ids(got))
	}
}

func ids(es []Event) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestBroker_aSlowSubscriberNeverBlocksThePublisher(t *testing.T) {
	b := NewBroker(BrokerOptions{QueueSize: 4, BufferSize: 64})
	slow, cancelSlow := b.Subscribe(t.Context(), 0)
	defer cancelSlow()
	fast, cancelFast := b.Subscribe(t.Context(), 0)
	defer cancelFast()

	var fastGot []Event
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := range fast {
			fastGot = append(fastGot, e)
			if e.ID == 50 {
				return
			}
		}
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			b.Publish(Event{Type: HealthChanged, Message: fmt.Sprint(i)})
			time.Sleep(100 * time.Microsecond) // let the fast reader keep up
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	wg.Wait()
	if len(fastGot) != 50 {
		t.Fatalf("fast subscriber got %d events, want 50", len(fastGot))
	}

	// The slow one got what fitted, then a Lagged marker, then a close.
	var slowGot []Event
	for e := range slow {
		slowGot = append(slowGot, e)
	}
	if n := len(slowGot); n != 5 {
		t.Fatalf("slow subscriber got %d events, want 4 and a marker", n)
	}
	last := slowGot[len(slowGot)-1]
	if last.Type != Lagged {
		t.Fatalf("last event is %s, want %s", last.Type, Lagged)
	}
	if last.ID != 4 {
		t.Fatalf("Lagged id = %d, want 4 (the last event delivered)", last.ID)
	}

	// Resubscribing from the marker's id replays everything missed.
	again, cancel := b.Subscribe(t.Context(), last.ID)
	defer cancel()
	got := collect(t, again, 46)
	if got[0].ID != 5 || got[45].ID != 50 {
		t.Fatalf("replay after lag = ids %d..%d, want 5..50", got[0].ID, got[45].ID)
	}
	if b.Subscribers() != 2 {
		t.Fatalf("Subscribers = %d, want 2 (fast and again; slow was dropped)", b.Subscribers())
	}
}

func TestBroker_replayAfterReconnectMissesNothingStillHeld(t *testing.T) {
	b := NewBroker(BrokerOptions{BufferSize: 8})
	ctx, cancelCtx := context.WithCancel(t.Context())
	ch, _ := b.Subscribe(ctx, 0)
	b.Publish(Event{Type: SyncStarted})
	b.Publish(Event{Type: SyncSucceeded})
	seen := collect(t, ch, 2)
	cancelCtx() // the client disconnects
	for range ch {
	}
	for range 3 {
		b.Publish(Event{Type: HealthChanged})
	}
	re, cancel := b.Subscribe(t.Context(), seen[len(seen)-1].ID)
	defer cancel()
	got := collect(t, re, 3)
	if want := []uint64{3, 4, 5}; fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("replay ids = %v, want %v", ids(got), want)
	}
	b.Publish(Event{Type: Pruned})
	if got := collect(t, re, 1); got[0].ID != 6 {
		t.Fatalf("after replay got id %d, want 6", got[0].ID)
	}
}

func TestBroker_replayFromEvictedIDStartsWithGap(t *testing.T) {
	b := NewBroker(BrokerOptions{BufferSize: 3})
	for range 10 {
		b.Publish(Event{Type: HealthChanged})
	}
	ch, cancel := b.Subscribe(t.Context(), 2)
	defer cancel()
	got := collect(t, ch, 4)
	if got[0].Type != Gap {
		t.Fatalf("first event %s, want %s", got[0].Type, Gap)
	}
	if fmt.Sprint(ids(got[1:])) != "[8 9 10]" {
		t.Fatalf("replayed ids %v, want [8 9 10]", ids(got[1:]))
	}

	// An id from an earlier process (beyond anything published) gets a Gap
	// and everything held.
	ch2, cancel2 := b.Subscribe(t.Context(), 500)
	defer cancel2()
	got = collect(t, ch2, 4)
	if got[0].Type != Gap || fmt.Sprint(ids(got[1:])) != "[8 9 10]" {
		t.Fatalf("got %v %v, want a Gap then [8 9 10]", got[0].Type, ids(got[1:]))
	}

	// Resuming exactly at the edge of the ring is not a gap.
	ch3, cancel3 := b.Subscribe(t.Context(), 7)
	defer cancel3()
	if got := collect(t, ch3, 1); got[0].Type == Gap {
		t.Fatal("resuming from the id just before the oldest held reported a gap")
	}
}

func TestBroker_cancelClosesAndIsIdempotent(t *testing.T) {
	b := NewBroker(BrokerOptions{})
	ch, cancel := b.Subscribe(t.Context(), 0)
	cancel()
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after cancel")
	}
	if b.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d after cancel", b.Subscribers())
	}
	b.Publish(Event{Type: SyncStarted}) // must not panic on a closed channel
}

func TestBroker_concurrentPublishersAndSubscribers(t *testing.T) {
	b := NewBroker(BrokerOptions{BufferSize: 16, QueueSize: 8})
	var subs []<-chan Event
	for range 4 {
		ch, stop := b.Subscribe(t.Context(), 0)
		defer stop()
		subs = append(subs, ch)
	}
	var wg sync.WaitGroup
	for _, ch := range subs {
		wg.Go(func() {
			var last uint64
			for e := range ch {
				if e.Type != Lagged && e.ID <= last {
					t.Errorf("ids went backwards: %d after %d", e.ID, last)
				}
				last = e.ID
				if e.ID >= 800 {
					return
				}
			}
		})
	}
	var pub sync.WaitGroup
	for range 4 {
		pub.Go(func() {
			for range 200 {
				b.Publish(Event{Type: HealthChanged})
			}
		})
	}
	pub.Wait()
	if b.LastID() != 800 {
		t.Fatalf("LastID = %d, want 800", b.LastID())
	}
	wg.Wait() // every reader either saw 800 or was cut off with Lagged
}

func TestProgressOf(t *testing.T) {
	e := Progress("shop", "shop", "web", 2, 3, "updating", "")
	r, d, s, ok := ProgressOf(e)
	if !ok || r != 2 || d != 3 || s != "updating" {
		t.Fatalf("ProgressOf = %d %d %q %v", r, d, s, ok)
	}
	e.Data = map[string]any{DataRunning: float64(1), DataDesired: float64(1)}
	if r, d, _, ok := ProgressOf(e); !ok || r != 1 || d != 1 {
		t.Fatalf("ProgressOf(decoded) = %d %d %v", r, d, ok)
	}
	if _, _, _, ok := ProgressOf(Event{Type: SyncStarted}); ok {
		t.Fatal("ProgressOf accepted a sync event")
	}
}
