// Package lease elects one writer among controllers that share a swarm,
// through a single record kept in a compare-and-swap store (the swarm's own
// raft store, reached through a config's labels; see Store).
//
// Three rules make it safe without trusting any clock but the local one:
//
//   - A lease expires for an observer Duration after the observer itself saw
//     the record change, measured on its monotonic clock. The holder's wall
//     clock is written down for people to read and never consulted.
//   - The holder stops writing Margin before Duration has passed since it
//     sent its last successful renewal. Every observer saw that renewal only
//     after it was sent, so the holder's writes end before anyone else's
//     clock can call the lease expired.
//   - Every takeover is a compare-and-swap on the version the taker observed
//     and raises the epoch, so one epoch has exactly one holder.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Record is what the store holds about the lease.
type Record struct {
	// Holder is the id of the controller that holds the lease; empty once
	// it was released.
	Holder string
	// Epoch is raised by every takeover and kept by renewals.
	Epoch uint64
	// Renewed is the holder's wall clock at its last renewal, for people
	// reading the record; expiry never depends on it.
	Renewed time.Time
	// Duration is how long the holder's lease lasts after each renewal, as
	// the holder was configured.
	Duration time.Duration
}

// Store keeps one lease record with a version that moves on every write.
type Store interface {
	// Get returns the record and its version, or ErrNoRecord.
	Get(ctx context.Context) (Record, uint64, error)
	// Create stores the first record and returns its version, or
	// ErrConflict when a record already exists.
	Create(ctx context.Context, r Record) (uint64, error)
	// Update replaces the record only if its version is still version,
	// and returns the new version; ErrConflict when it moved.
	Update(ctx context.Context, version uint64, r Record) (uint64, error)
}

// Errors a Store returns.
var (
	ErrNoRecord = errors.New("lease: no record")
	ErrConflict = errors.New("lease: record changed meanwhile")
)

// NotLeaderError is the answer of Permit when this controller may not
// write: it names who holds the lease, as last observed.
type NotLeaderError struct {
	ID     string // this controller
	Holder string // "" when nobody holds it, as far as this controller knows
	Epoch  uint64
}

func (e *NotLeaderError) Error() string {
	if e.Holder == "" || e.Holder == e.ID {
		return fmt.Sprintf("controller %q does not hold the leader lease (last epoch %d) and writes nothing until it does", e.ID, e.Epoch)
	}
	return fmt.Sprintf("controller %q stands by: %q holds the leader lease in epoch %d and is the only one that writes", e.ID, e.Holder, e.Epoch)
}

// Defaults of Options.
const (
	DefaultDuration = 15 * time.Second
)

// Options configure New.
type Options struct {
	// ID names this controller in the record. Required and unique among
	// the controllers sharing the lease.
	ID string
	// Duration is how long a lease lasts after a renewal. Default
	// DefaultDuration.
	Duration time.Duration
	// Margin is how long before Duration this controller stops writing
	// after its last renewal, to cover a write still in flight. Default a
	// fifth of Duration; it must be less than half of it.
	Margin time.Duration
	// Logger receives the lease's logs, with component=lease. Nil uses
	// slog.Default().
	Logger *slog.Logger
}

// State is what this controller knows of the lease.
type State struct {
	// Leader is true while this controller may write.
	Leader bool
	// Holder and Epoch are the last observed record's.
	Holder string
	Epoch  uint64
}

// Lease campaigns for and renews one lease. Its methods are safe for
// concurrent use; Run drives it.
type Lease struct {
	store Store
	opts  Options
	log   *slog.Logger
	poll  time.Duration

	mu sync.Mutex
	// Observation: the record last read or written, its version, and when
	// this controller saw that version appear.
	rec     Record
	version uint64
	seen    time.Time
	known   bool
	// While leading: writes stop at until.
	leader bool
	until  time.Time
	// sent are the records this controller tried to write since its last
	// answered write, so that one that landed though its answer was lost
	// is recognised.
	sent []Record

	changed chan struct{}
}

// New returns a Lease over store; nothing is read before Run.
func New(store Store, opts Options) (*Lease, error) {
	if opts.ID == "" {
		return nil, errors.New("lease: an id is required")
	}
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if opts.Margin <= 0 {
		opts.Margin = opts.Duration / 5
	}
	if opts.Margin*2 >= opts.Duration {
		return nil, fmt.Errorf("lease: margin %s must be less than half the duration %s", opts.Margin, opts.Duration)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Lease{
		store:   store,
		opts:    opts,
		log:     opts.Logger.With("component", "lease", "id", opts.ID),
		poll:    opts.Duration / 4,
		changed: make(chan struct{}, 1),
	}, nil
}

// ID is this controller's id in the record.
func (l *Lease) ID() string { return l.opts.ID }

// Duration is the configured lease duration.
func (l *Lease) Duration() time.Duration { return l.opts.Duration }

// Changed receives a value whenever State may have changed (leadership won
// or lost, another holder observed); read State after it.
func (l *Lease) Changed() <-chan struct{} { return l.changed }

// State reports what this controller knows now. Leadership that ran out
// while a renewal was still unanswered already reads as lost.
func (l *Lease) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return State{Leader: l.leadingLocked(time.Now()), Holder: l.rec.Holder, Epoch: l.rec.Epoch}
}

// Permit returns the epoch writes are made in and the wall time they must
// be done by, or a *NotLeaderError. It is the gate every write asks.
func (l *Lease) Permit() (uint64, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.leadingLocked(now) {
		return 0, time.Time{}, &NotLeaderError{ID: l.opts.ID, Holder: l.rec.Holder, Epoch: l.rec.Epoch}
	}
	return l.rec.Epoch, l.until, nil
}

func (l *Lease) leadingLocked(now time.Time) bool {
	return l.leader && now.Before(l.until)
}

// Run campaigns until ctx ends: it watches the record, takes the lease
// once it is free or expired, renews it while held, and on return releases
// it if still held, so a standby takes over at once instead of waiting for
// expiry. The caller must have stopped every write before ctx ends.
func (l *Lease) Run(ctx context.Context) error {
	defer l.release()
	for {
		wait := l.step(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// step does one round and returns how long to wait before the next.
func (l *Lease) step(ctx context.Context) time.Duration {
	l.mu.Lock()
	leader, until := l.leader, l.until
	l.mu.Unlock()
	if leader {
		return l.renew(ctx, until)
	}
	return l.observe(ctx)
}

// renew extends a held lease. A renewal refused because the record moved
// means someone took the lease; one that fails otherwise is retried until
// the lease runs out, after which this controller stands by and treats its
// own last record like anyone else's.
func (l *Lease) renew(ctx context.Context, until time.Time) time.Duration {
	left := time.Until(until)
	if left <= 0 {
		l.lose("the lease ran out before a renewal was answered")
		return 0
	}
	l.mu.Lock()
	version, rec := l.version, l.rec
	l.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	sent := time.Now()
	next := Record{Holder: l.opts.ID, Epoch: rec.Epoch, Renewed: sent.UTC(), Duration: l.opts.Duration}
	l.setSent(next)
	v, err := l.store.Update(rctx, version, next)
	switch {
	case err == nil:
		l.mu.Lock()
		l.sent = l.sent[:0]
		l.rec, l.version, l.seen = next, v, sent
		if l.leader {
			l.until = sent.Add(l.opts.Duration - l.opts.Margin)
		}
		l.mu.Unlock()
		return l.poll
	case errors.Is(err, ErrConflict):
		l.lose("another controller took the lease")
		return 0
	case ctx.Err() != nil:
		return 0
	default:
		l.log.Warn("lease not renewed; retrying until it runs out", "error", err, "left", time.Until(until).Round(time.Millisecond))
		if time.Until(until) <= 0 {
			l.lose("the lease ran out while renewals failed")
			return 0
		}
		return min(l.poll/2, max(time.Until(until), time.Millisecond))
	}
}

// lose ends leadership: from here on Permit refuses every write.
func (l *Lease) lose(why string) {
	l.mu.Lock()
	was := l.leader
	l.leader = false
	epoch := l.rec.Epoch
	l.mu.Unlock()
	if was {
		l.log.Warn("leadership lost; writing stopped", "epoch", epoch, "reason", why)
		l.notify()
	}
}

// observe reads the record, starts the expiry clock when its version moved,
// and takes the lease when it is free, released or expired.
func (l *Lease) observe(ctx context.Context) time.Duration {
	rctx, cancel := context.WithTimeout(ctx, l.opts.Duration)
	defer cancel()
	rec, v, err := l.store.Get(rctx)
	if errors.Is(err, ErrNoRecord) {
		sent := time.Now()
		first := Record{Holder: l.opts.ID, Epoch: 1, Renewed: sent.UTC(), Duration: l.opts.Duration}
		l.setSent(first)
		v, err := l.store.Create(rctx, first)
		if err != nil {
			if !errors.Is(err, ErrConflict) && ctx.Err() == nil {
				l.log.Warn("could not create the lease record", "error", err)
			}
			return l.poll / 2
		}
		l.win(first, v, sent)
		return l.poll
	}
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("could not read the lease; no takeover without a fresh look", "error", err)
		}
		return l.poll
	}
	now := time.Now()
	l.mu.Lock()
	moved := !l.known || v != l.version
	if moved {
		l.rec, l.version, l.seen, l.known = rec, v, now, true
	}
	seen := l.seen
	l.mu.Unlock()
	if moved {
		l.notify()
	}
	if l.isOwnLastWrite(rec) {
		return l.resume(rctx, rec, v)
	}
	d := rec.Duration
	if d <= 0 {
		d = l.opts.Duration
	}
	if rec.Holder != "" && now.Sub(seen) < d {
		return min(l.poll, d-now.Sub(seen))
	}
	sent := time.Now()
	next := Record{Holder: l.opts.ID, Epoch: rec.Epoch + 1, Renewed: sent.UTC(), Duration: l.opts.Duration}
	l.setSent(next)
	nv, err := l.store.Update(rctx, v, next)
	if err != nil {
		if !errors.Is(err, ErrConflict) && ctx.Err() == nil {
			l.log.Warn("could not take over the lease", "error", err, "holder", rec.Holder, "epoch", rec.Epoch)
		}
		return l.poll / 2
	}
	l.log.Info("took over the lease", "from", rec.Holder, "epoch", next.Epoch)
	l.win(next, nv, sent)
	return l.poll
}

func (l *Lease) setSent(r Record) {
	l.mu.Lock()
	if len(l.sent) >= 16 {
		l.sent = l.sent[1:]
	}
	l.sent = append(l.sent, r)
	l.mu.Unlock()
}

// isOwnLastWrite reports whether rec is exactly a record this controller
// sent since its last answered write: a renewal or takeover that landed
// though its answer was lost (or came too late). Holder alone would not do:
// two processes misconfigured with one id must never both take a record
// for theirs.
func (l *Lease) isOwnLastWrite(rec Record) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sent {
		if rec.Holder == l.opts.ID && s.Holder == rec.Holder && s.Epoch == rec.Epoch && s.Renewed.Equal(rec.Renewed) {
			return true
		}
	}
	return false
}

// resume renews a lease whose last record is this controller's own, in the
// same epoch, without waiting for it to expire. That is safe because the
// compare-and-swap succeeds only if nobody has written since that record,
// so no other controller has held any epoch meanwhile; and this controller
// wrote nothing since its own deadline passed.
func (l *Lease) resume(ctx context.Context, rec Record, version uint64) time.Duration {
	sent := time.Now()
	next := Record{Holder: l.opts.ID, Epoch: rec.Epoch, Renewed: sent.UTC(), Duration: l.opts.Duration}
	l.setSent(next)
	nv, err := l.store.Update(ctx, version, next)
	if err != nil {
		if !errors.Is(err, ErrConflict) && ctx.Err() == nil {
			l.log.Warn("could not resume the lease", "error", err, "epoch", rec.Epoch)
		}
		return l.poll / 2
	}
	l.log.Info("resumed the lease after a renewal whose answer was lost", "epoch", rec.Epoch)
	l.win(next, nv, sent)
	return l.poll
}

// win starts leadership from a record this controller wrote at sent.
func (l *Lease) win(rec Record, version uint64, sent time.Time) {
	l.mu.Lock()
	l.sent = l.sent[:0]
	l.rec, l.version, l.seen, l.known = rec, version, sent, true
	l.leader = true
	l.until = sent.Add(l.opts.Duration - l.opts.Margin)
	l.mu.Unlock()
	l.log.Info("leading", "epoch", rec.Epoch, "lease", l.opts.Duration)
	l.notify()
}

// release gives a held lease up on the way out, so the next holder need
// not wait for it to expire. Writing stops first.
func (l *Lease) release() {
	l.mu.Lock()
	held := l.leadingLocked(time.Now())
	l.leader = false
	version, rec := l.version, l.rec
	l.mu.Unlock()
	if !held {
		return
	}
	l.notify()
	ctx, cancel := context.WithTimeout(context.Background(), min(l.opts.Duration/2, 5*time.Second))
	defer cancel()
	rec.Holder, rec.Renewed = "", time.Now().UTC()
	if _, err := l.store.Update(ctx, version, rec); err != nil {
		l.log.Warn("lease not released; a standby takes over once it expires", "error", err)
		return
	}
	l.log.Info("lease released", "epoch", rec.Epoch)
}

func (l *Lease) notify() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}
