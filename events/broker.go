package events

import (
	"context"
	"sync"
	"time"
)

// Defaults for BrokerOptions.
const (
	DefaultBufferSize = 1024
	DefaultQueueSize  = 256
)

// BrokerOptions size a Broker.
type BrokerOptions struct {
	// BufferSize is how many recent events are kept for replay.
	// Default DefaultBufferSize.
	BufferSize int
	// QueueSize is how many events one subscriber may have unread before
	// it is cut off with Lagged. Default DefaultQueueSize.
	QueueSize int
	// Clock stamps events published without a Time. Default time.Now.
	Clock func() time.Time
}

// Broker fans published events out to subscribers and remembers the most
// recent ones. Its zero value is not usable; call NewBroker.
type Broker struct {
	opts BrokerOptions

	mu     sync.Mutex
	lastID uint64
	ring   []Event // circular; ring[(head+i)%len] for i < count, oldest first
	head   int
	count  int
	subs   map[*subscriber]struct{}
}

type subscriber struct {
	ch  chan Event
	app string // only this application's events, when set
}

// NewBroker returns a Broker with opts' zero fields defaulted.
func NewBroker(opts BrokerOptions) *Broker {
	if opts.BufferSize <= 0 {
		opts.BufferSize = DefaultBufferSize
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Broker{
		opts: opts,
		ring: make([]Event, opts.BufferSize),
		subs: map[*subscriber]struct{}{},
	}
}

// Publish numbers e, stores it for replay and offers it to every subscriber.
// It never blocks on a subscriber: one whose queue is full is closed with a
// Lagged marker instead. It returns the event as stored.
func (b *Broker) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastID++
	e.ID = b.lastID
	if e.Time.IsZero() {
		e.Time = b.opts.Clock()
	}
	if b.count < len(b.ring) {
		b.ring[(b.head+b.count)%len(b.ring)] = e
		b.count++
	} else {
		b.ring[b.head] = e
		b.head = (b.head + 1) % len(b.ring)
	}
	for s := range b.subs {
		if s.app != "" && s.app != e.App {
			continue
		}
		// One slot of every queue is kept free for the Lagged marker, so
		// the marker itself can never block.
		if len(s.ch) < cap(s.ch)-1 {
			s.ch <- e
			continue
		}
		s.ch <- Event{ID: e.ID - 1, Time: e.Time, Type: Lagged,
			Message: "subscriber fell behind; reconnect with the last event id"}
		close(s.ch)
		delete(b.subs, s)
	}
	return e
}

// LastID returns the id of the newest event published, 0 before the first.
func (b *Broker) LastID() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastID
}

// Filter narrows a subscription.
type Filter struct {
	// App, when set, passes only that application's events.
	App string
}

// Subscribe returns the events after afterID that are still held, followed
// by every event published from now on, until ctx ends or cancel is called;
// the channel is then closed. afterID 0 means "only new events". When events
// after afterID were already dropped from the ring, or afterID is newer than
// anything this Broker published (a client of an earlier process), the
// replay starts with a Gap marker and then everything held.
//
// A subscriber must keep reading: when its queue fills, its last event is
// Lagged and the channel closes.
func (b *Broker) Subscribe(ctx context.Context, afterID uint64) (<-chan Event, func()) {
	return b.SubscribeFilter(ctx, afterID, Filter{})
}

// SubscribeFilter is Subscribe for the events that pass f.
func (b *Broker) SubscribeFilter(ctx context.Context, afterID uint64, f Filter) (<-chan Event, func()) {
	b.mu.Lock()
	var backlog []Event
	if afterID > 0 {
		oldest := b.lastID - uint64(b.count) + 1 // id of ring's first event
		if afterID > b.lastID || (afterID+1 < oldest) {
			backlog = append(backlog, Event{ID: afterID, Time: b.opts.Clock(), Type: Gap,
				Message: "some events are no longer held; reload the current state"})
			if afterID > b.lastID {
				afterID = 0 // an earlier process's id: replay everything held
			}
		}
		for i := range b.count {
			e := b.ring[(b.head+i)%len(b.ring)]
			if e.ID > afterID && (f.App == "" || e.App == f.App) {
				backlog = append(backlog, e)
			}
		}
	}
	s := &subscriber{ch: make(chan Event, max(b.opts.QueueSize, len(backlog))+1), app: f.App}
	for _, e := range backlog {
		s.ch <- e
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()

	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if _, ok := b.subs[s]; ok {
				delete(b.subs, s)
				close(s.ch)
			}
		})
	}
	stop := context.AfterFunc(ctx, cancel)
	return s.ch, func() { stop(); cancel() }
}

// Subscribers returns how many subscriptions are open, for tests and metrics.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
