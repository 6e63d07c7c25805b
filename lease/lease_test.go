package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memStore is a compare-and-swap store in memory, the contract the swarm
// config store keeps.
type memStore struct {
	mu      sync.Mutex
	rec     Record
	version uint64
	exists  bool
	writes  []Record // every accepted write, in order
}

func (m *memStore) get() (Record, uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec, m.version, m.exists
}

// view is one controller's connection to the store; a test cuts it.
type view struct {
	m *memStore
	// down fails every call at once; stall blocks it until its context
	// ends, like a connection that stopped answering; loseAnswers applies
	// updates and then reports a failure, like an answer lost on the way.
	down, stall, loseAnswers atomic.Bool
}

func (v *view) fault(ctx context.Context) error {
	if v.stall.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if v.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

func (v *view) Get(ctx context.Context) (Record, uint64, error) {
	if err := v.fault(ctx); err != nil {
		return Record{}, 0, err
	}
	rec, ver, ok := v.m.get()
	if !ok {
		return Record{}, 0, ErrNoRecord
	}
	return rec, ver, nil
}

func (v *view) Create(ctx context.Context, r Record) (uint64, error) {
	if err := v.fault(ctx); err != nil {
		return 0, err
	}
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	if v.m.exists {
		return 0, ErrConflict
	}
	v.m.exists, v.m.rec = true, r
	v.m.version++
	v.m.writes = append(v.m.writes, r)
	return v.m.version, nil
}

func (v *view) Update(ctx context.Context, version uint64, r Record) (uint64, error) {
	if err := v.fault(ctx); err != nil {
		return 0, err
	}
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	if !v.m.exists || v.m.version != version {
		return 0, ErrConflict
	}
	v.m.rec = r
	v.m.version++
	v.m.writes = append(v.m.writes, r)
	if v.loseAnswers.Load() {
		return 0, errors.New("answer lost")
	}
	return v.m.version, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type member struct {
	l      *Lease
	v      *view
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, m *memStore, id string, d time.Duration) *member {
	t.Helper()
	v := &view{m: m}
	l, err := New(v, Options{ID: id, Duration: d, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mb := &member{l: l, v: v, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(mb.done)
		_ = l.Run(ctx)
	}()
	t.Cleanup(func() { mb.stop() })
	return mb
}

// stop ends Run (releasing the lease if it can reach the store).
func (mb *member) stop() {
	mb.cancel()
	<-mb.done
}

// kill is a crash: the store is unreachable from here on, so nothing is
// released, and Run is ended.
func (mb *member) kill() {
	mb.v.down.Store(true)
	mb.stop()
}

func waitLeader(t *testing.T, within time.Duration, members ...*member) *member {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, mb := range members {
			if _, _, err := mb.l.Permit(); err == nil {
				return mb
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no leader within %s", within)
	return nil
}

// sampler checks, as often as it can, that at most one member may write
// and that each epoch is only ever permitted to one of them.
type sampler struct {
	mu      sync.Mutex
	holders map[uint64]string
	err     error
	stop    chan struct{}
	done    chan struct{}
}

func sample(members []*member) *sampler {
	s := &sampler{holders: map[uint64]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			var permitted []string
			for _, mb := range members {
				if e, _, err := mb.l.Permit(); err == nil {
					permitted = append(permitted, mb.l.ID())
					s.mu.Lock()
					if h, ok := s.holders[e]; ok && h != mb.l.ID() && s.err == nil {
						s.err = fmt.Errorf("epoch %d permitted to %s and %s", e, h, mb.l.ID())
					}
					s.holders[e] = mb.l.ID()
					s.mu.Unlock()
				}
			}
			if len(permitted) > 1 {
				s.mu.Lock()
				if s.err == nil {
					s.err = fmt.Errorf("%v may all write at once", permitted)
				}
				s.mu.Unlock()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return s
}

func (s *sampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	if s.err != nil {
		t.Fatal(s.err)
	}
}

func TestNew_refusesAMissingIDAndAMarginTooLarge(t *testing.T) {
	if _, err := New(&view{m: &memStore{}}, Options{}); err == nil {
		t.Error("New without an id: no error")
	}
	if _, err := New(&view{m: &memStore{}}, Options{ID: "a", Duration: time.Second, Margin: 600 * time.Millisecond}); err == nil {
		t.Error("New with a margin over half the duration: no error")
	}
}

func TestOneOfThreeLeadsAndEveryEpochHasOneHolderThroughCrashesAndReleases(t *testing.T) {
	m := &memStore{}
	const d = 120 * time.Millisecond
	members := []*member{start(t, m, "a", d), start(t, m, "b", d), start(t, m, "c", d)}
	s := sample(members)
	alive := map[*member]bool{members[0]: true, members[1]: true, members[2]: true}
	for round := 0; round < 4; round++ {
		var candidates []*member
		for mb := range alive {
			candidates = append(candidates, mb)
		}
		leader := waitLeader(t, 3*d, candidates...)
		time.Sleep(d) // a few renewals
		if round%2 == 0 {
			leader.kill()
		} else {
			leader.stop()
		}
		delete(alive, leader)
		// Bring one back under a new id so the pair never runs dry.
		nb := start(t, m, fmt.Sprintf("r%d", round), d)
		alive[nb] = true
		members = append(members, nb)
		s.finish(t)
		s = sample(members)
	}
	s.finish(t)

	// The store itself agrees: epochs only rise, and a holder's epoch is its
	// own for every write made in it.
	m.mu.Lock()
	defer m.mu.Unlock()
	owner := map[uint64]string{}
	var last uint64
	for _, w := range m.writes {
		if w.Epoch < last {
			t.Fatalf("epoch went back from %d to %d", last, w.Epoch)
		}
		last = w.Epoch
		if w.Holder == "" {
			continue
		}
		if o, ok := owner[w.Epoch]; ok && o != w.Holder {
			t.Fatalf("epoch %d written by %s and %s", w.Epoch, o, w.Holder)
		}
		owner[w.Epoch] = w.Holder
	}
	if last < 4 {
		t.Errorf("four takeovers, but the last epoch is %d", last)
	}
}

func TestAStandbyLeadsWithinTwoDurationsOfTheLeadersDeath(t *testing.T) {
	m := &memStore{}
	const d = 200 * time.Millisecond
	a := start(t, m, "a", d)
	leader := waitLeader(t, 2*d, a)
	b := start(t, m, "b", d)
	time.Sleep(d / 2) // b has seen a's lease
	if _, _, err := b.l.Permit(); err == nil {
		t.Fatal("the standby may write while the leader renews")
	}
	var nl *NotLeaderError
	if _, _, err := b.l.Permit(); !errors.As(err, &nl) || nl.Holder != "a" {
		t.Fatalf("the standby's refusal does not name the leader: %v", err)
	}
	died := time.Now()
	leader.kill()
	waitLeader(t, 2*d, b)
	t.Logf("took over %s after the leader died (lease %s)", time.Since(died), d)
	if st := b.l.State(); !st.Leader || st.Epoch != 2 || st.Holder != "b" {
		t.Errorf("state after the takeover = %+v, want leader b in epoch 2", st)
	}
}

func TestAPartitionedLeaderStopsWritingBeforeTheStandbyStarts(t *testing.T) {
	for _, fault := range []string{"stall", "refuse"} {
		t.Run(fault, func(t *testing.T) {
			m := &memStore{}
			const d = 200 * time.Millisecond
			a := start(t, m, "a", d)
			waitLeader(t, 2*d, a)
			b := start(t, m, "b", d)
			time.Sleep(d / 2)

			var aLast, bFirst atomic.Int64
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					now := time.Now().UnixNano()
					if _, _, err := a.l.Permit(); err == nil {
						aLast.Store(now)
					}
					if _, _, err := b.l.Permit(); err == nil && bFirst.Load() == 0 {
						bFirst.Store(now)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}()
			if fault == "stall" {
				a.v.stall.Store(true)
			} else {
				a.v.down.Store(true)
			}
			waitLeader(t, 3*d, b)
			// The poller may not have asked b since it became leader: on a
			// loaded machine let it, or the comparison below is against 0.
			for deadline := time.Now().Add(5 * time.Second); bFirst.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			close(stop)
			<-done
			if bFirst.Load() == 0 {
				t.Fatal("the standby became leader but was never permitted a write")
			}
			if aLast.Load() >= bFirst.Load() {
				t.Fatalf("the partitioned leader could still write %s after the standby began", time.Duration(aLast.Load()-bFirst.Load()))
			}
			if st := a.l.State(); st.Leader {
				t.Error("the partitioned leader still reports itself leader")
			}
		})
	}
}

func TestAReleasedLeaseIsTakenWithoutWaitingForExpiry(t *testing.T) {
	m := &memStore{}
	const d = 2 * time.Second
	a := start(t, m, "a", d)
	waitLeader(t, time.Second, a)
	b := start(t, m, "b", d)
	time.Sleep(50 * time.Millisecond)
	began := time.Now()
	a.stop()
	if rec, _, _ := m.get(); rec.Holder != "" {
		t.Fatalf("after a clean stop the record still names %q", rec.Holder)
	}
	waitLeader(t, d, b)
	if took := time.Since(began); took >= d/2 {
		t.Errorf("took %s to follow a released lease of %s", took, d)
	}
}

func TestExpiryIsMeasuredFromObservationNotFromTheHoldersClock(t *testing.T) {
	const d = 300 * time.Millisecond
	for name, renewed := range map[string]time.Time{
		"stamped long ago":  time.Now().Add(-24 * time.Hour),
		"stamped in future": time.Now().Add(24 * time.Hour),
	} {
		t.Run(name, func(t *testing.T) {
			m := &memStore{exists: true, version: 7, rec: Record{Holder: "gone", Epoch: 5, Renewed: renewed, Duration: d}}
			began := time.Now()
			b := start(t, m, "b", d)
			waitLeader(t, 3*d, b)
			if took := time.Since(began); took < d {
				t.Errorf("took over after %s, sooner than one duration (%s) after first seeing the record", took, d)
			}
			if st := b.l.State(); st.Epoch != 6 {
				t.Errorf("epoch after takeover = %d, want 6", st.Epoch)
			}
		})
	}
}

func TestChangedSignalsLeadershipWonAndLost(t *testing.T) {
	m := &memStore{}
	const d = 200 * time.Millisecond
	a := start(t, m, "a", d)
	select {
	case <-a.l.Changed():
	case <-time.After(d):
		t.Fatal("no change signalled on winning")
	}
	if !a.l.State().Leader {
		t.Fatal("not leader after the signal")
	}
	a.v.down.Store(true)
	deadline := time.After(2 * d)
	for a.l.State().Leader {
		select {
		case <-a.l.Changed():
		case <-deadline:
			t.Fatal("leadership never lost with the store down")
		}
	}
}

func TestALeaderWhoseRenewalsLandButWhoseAnswersAreLostResumesInItsEpoch(t *testing.T) {
	m := &memStore{}
	const d = 200 * time.Millisecond
	a := start(t, m, "a", d)
	waitLeader(t, 2*d, a)
	a.v.loseAnswers.Store(true)
	deadline := time.Now().Add(2 * d)
	for a.l.State().Leader && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a.l.State().Leader {
		t.Fatal("a leader whose renewals are never answered kept writing")
	}
	a.v.loseAnswers.Store(false)
	lost := time.Now()
	waitLeader(t, d, a)
	if took := time.Since(lost); took >= d/2 {
		t.Errorf("took %s to resume its own lease; it need not wait for expiry", took)
	}
	if st := a.l.State(); st.Epoch != 1 {
		t.Errorf("epoch %d after resuming, want 1: nobody else held the lease", st.Epoch)
	}
}

func TestTwoControllersMisconfiguredWithOneIDNeverWriteAtOnce(t *testing.T) {
	m := &memStore{}
	const d = 120 * time.Millisecond
	members := []*member{start(t, m, "same", d), start(t, m, "same", d)}
	s := sample(members)
	time.Sleep(3 * d)
	// The leader's renewals land and their answers are lost: the other,
	// reading a record that names its own id, must not take it for its own.
	for _, mb := range members {
		mb.v.loseAnswers.Store(true)
	}
	time.Sleep(3 * d)
	for _, mb := range members {
		mb.v.loseAnswers.Store(false)
	}
	time.Sleep(3 * d)
	s.finish(t)
}
