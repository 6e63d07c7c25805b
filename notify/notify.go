// Package notify sends what the controller does to chat and webhook sinks
// configured in the applications file: a Slack-compatible incoming webhook
// or a generic JSON POST, each with its own event filter and text template.
//
// A Dispatcher reads the events.Broker and hands each event to every sink
// that wants it. Every sink has a bounded queue and a goroutine of its own,
// so a sink that is slow, down or hanging delays nobody: the broker is read
// at full speed, and when a queue is full its oldest notification is
// dropped with a counted warning. Deliveries are retried with backoff, and
// repeats of one notification within a window are suppressed.
//
// A sink's URL is its credential (a Slack webhook's path is its token). It
// is read from a file or the environment at every delivery and never
// appears in a log or an error: logs name the sink only.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// Defaults for Options.
const (
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultMaxAttempts    = 6
	DefaultDedupWindow    = 10 * time.Minute
	DefaultQueueSize      = 100
	DefaultAttemptTimeout = 10 * time.Second
)

// Options configure a Dispatcher. Zero fields take their defaults.
type Options struct {
	// Logger receives the sinks' failures, drops and suppressions, with
	// component=notify. Default slog.Default().
	Logger *slog.Logger
	// HTTPClient sends deliveries. Default: a client that does not follow
	// redirects, since following one would resend the body to a URL no
	// one configured.
	HTTPClient *http.Client
	// Clock tells the time for deduplication and Retry-After, and waits
	// between attempts. Default: the real clock.
	Clock Clock
	// Backoff bounds the wait between attempts.
	Backoff Backoff
	// MaxAttempts is how many times one notification is tried, the first
	// included. Default DefaultMaxAttempts.
	MaxAttempts int
	// AttemptTimeout bounds one request. Default DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// DedupWindow is how long an identical notification is suppressed after
	// it was delivered. Default DefaultDedupWindow; negative turns
	// suppression off.
	DedupWindow time.Duration
	// QueueSize is how many notifications one sink holds undelivered before
	// it drops the oldest. Default DefaultQueueSize.
	QueueSize int
}

// Backoff is the exponential backoff between attempts: Min after the first
// failure, doubling up to Max, each wait drawn at random from its upper
// half so that sinks failing together do not retry in step. A Retry-After
// from the server replaces it; one longer than Max ends the delivery.
type Backoff struct {
	// Min is the first wait. Default DefaultMinBackoff.
	Min time.Duration
	// Max caps every wait. Default DefaultMaxBackoff.
	Max time.Duration
}

// Clock is the time as the dispatcher sees it; tests replace it to run
// retries and dedup windows without waiting.
type Clock interface {
	Now() time.Time
	// After is like time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Dispatcher delivers events to the configured sinks. Build it with New and
// start it with Run.
type Dispatcher struct {
	opts  Options
	log   *slog.Logger
	sinks []*sink

	consumed atomic.Uint64 // id of the newest event handed to the sinks
}

// New checks cfg and returns a Dispatcher for it. cfg is normally the
// Notifications of a loaded applications file, already defaulted and
// validated; New applies the same defaults and refuses what could never be
// delivered (unknown type, no URL source, a template that does not render),
// so a config built in code gets the same guarantees.
func New(cfg []application.Notification, opts Options) (*Dispatcher, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Backoff.Min <= 0 {
		opts.Backoff.Min = DefaultMinBackoff
	}
	if opts.Backoff.Max <= 0 {
		opts.Backoff.Max = DefaultMaxBackoff
	}
	opts.Backoff.Max = max(opts.Backoff.Max, opts.Backoff.Min)
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if opts.DedupWindow == 0 {
		opts.DedupWindow = DefaultDedupWindow
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	d := &Dispatcher{opts: opts, log: opts.Logger.With("component", "notify")}
	names := map[string]bool{}
	var errs []error
	for _, n := range cfg {
		if names[n.Name] {
			errs = append(errs, fmt.Errorf("notification %q: name used twice", n.Name))
			continue
		}
		names[n.Name] = true
		s, err := newSink(n, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("notification %q: %w", n.Name, err))
			continue
		}
		d.sinks = append(d.sinks, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// Run delivers the events published on b from now on until ctx ends, then
// stops every sink; notifications still queued are dropped. It returns when
// every sink goroutine has stopped. A Dispatcher runs once.
func (d *Dispatcher) Run(ctx context.Context, b *events.Broker) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if len(d.sinks) == 0 {
		return
	}
	for _, s := range d.sinks {
		wg.Go(func() { s.run(ctx) })
	}
	var last uint64
	for {
		ch, stop := b.Subscribe(ctx, last)
		if last == 0 {
			// Events published before the subscription never come: Drain
			// must not wait for them.
			d.consumed.Store(max(d.consumed.Load(), b.LastID()))
		}
		lagged := d.consume(ch, &last)
		stop()
		if !lagged || ctx.Err() != nil {
			return
		}
		// Only possible if this loop was starved of CPU: it never waits
		// on a sink. Resubscribing from the last id loses nothing still in
		// the broker's ring.
		d.log.Warn("event stream fell behind; resuming from the last event seen", "after", last)
	}
}

// consume hands every event of one subscription to the sinks and reports
// whether the subscription ended by lagging.
func (d *Dispatcher) consume(ch <-chan events.Event, last *uint64) (lagged bool) {
	for e := range ch {
		switch e.Type {
		case events.Lagged:
			*last = e.ID
			return true
		case events.Gap:
			d.log.Warn("some events were dropped before notifications could be sent for them")
			continue
		}
		*last = e.ID
		for _, s := range d.sinks {
			if s.wants(e) {
				s.push(e)
			}
		}
		d.consumed.Store(e.ID)
	}
	return false
}

// SinkStats counts what became of one sink's notifications since New.
type SinkStats struct {
	Sink string
	// Delivered were accepted by the receiver (2xx).
	Delivered uint64
	// Failed were given up: refused (4xx), or still failing after every
	// attempt.
	Failed uint64
	// Dropped were pushed out of a full queue before they were tried.
	Dropped uint64
	// Suppressed repeated one delivered within the dedup window.
	Suppressed uint64
}

// Stats returns every sink's counters, in configuration order, for metrics
// and tests.
func (d *Dispatcher) Stats() []SinkStats {
	out := make([]SinkStats, len(d.sinks))
	for i, s := range d.sinks {
		out[i] = SinkStats{
			Sink:       s.name,
			Delivered:  s.delivered.Load(),
			Failed:     s.failed.Load(),
			Dropped:    s.dropped.Load(),
			Suppressed: s.suppressed.Load(),
		}
	}
	return out
}
