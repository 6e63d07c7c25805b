package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/source"
)

// troubledSwarm is MinimalBackend plus StacksReader and ReleaseLister, with
// the faults a daemon can have: reads of some stacks that block until their
// context ends (a stalled daemon), every read failing with one error (a
// daemon restarting), release lookups failing, and an orphan lookup that
// blocks until its context ends.
type troubledSwarm struct {
	*chartstest.MinimalBackend

	mu          sync.Mutex
	stall       map[string]bool
	readErr     error
	releasesErr error

	stalling      atomic.Int32 // reads blocked right now
	stalledReads  atomic.Int32 // reads that blocked and ended
	deadlineless  atomic.Int32 // blocking calls whose context had no deadline
	stallOwners   atomic.Bool
	owners        atomic.Int32 // ReleaseOwners calls running now
	maxOwners     atomic.Int32
	ownersStarted atomic.Int32
}

var (
	_ capability.StacksReader  = (*troubledSwarm)(nil)
	_ capability.ReleaseLister = (*troubledSwarm)(nil)
)

func newTroubledSwarm() *troubledSwarm {
	return &troubledSwarm{MinimalBackend: chartstest.NewMinimal(), stall: map[string]bool{}}
}

func (b *troubledSwarm) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	b.mu.Lock()
	err, stall := b.readErr, false
	for _, s := range stacks {
		stall = stall || b.stall[s]
	}
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if stall {
		if _, ok := ctx.Deadline(); !ok {
			b.deadlineless.Add(1)
		}
		b.stalling.Add(1)
		<-ctx.Done()
		b.stalling.Add(-1)
		b.stalledReads.Add(1)
		return nil, fmt.Errorf("list services: %w", ctx.Err())
	}
	out := map[string][]charts.ServiceState{}
	for _, s := range stacks {
		out[s] = b.StackServices(ctx, s)
	}
	return out, nil
}

func (b *troubledSwarm) Releases(ctx context.Context, stack string) ([]charts.Release, error) {
	b.mu.Lock()
	err := b.releasesErr
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return b.MinimalBackend.Releases(ctx, stack)
}

func (b *troubledSwarm) ReleaseOwners(ctx context.Context) (map[string]string, error) {
	n := b.owners.Add(1)
	defer b.owners.Add(-1)
	for {
		m := b.maxOwners.Load()
		if n <= m || b.maxOwners.CompareAndSwap(m, n) {
			break
		}
	}
	b.ownersStarted.Add(1)
	if b.stallOwners.Load() {
		if _, ok := ctx.Deadline(); !ok {
			b.deadlineless.Add(1)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	out := map[string]string{}
	for _, name := range b.ReleaseNames() {
		if rs, _ := b.MinimalBackend.Releases(ctx, name); len(rs) > 0 {
			out[name] = rs[0].Owner
		}
	}
	return out, nil
}

func (b *troubledSwarm) set(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

// runLoop runs c.Run until the test ends.
func runLoop(t *testing.T, c *Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// statusesPromptly calls Statuses and fails the test if it does not return:
// the API must never wait on the swarm.
func statusesPromptly(t *testing.T, c *Controller) []application.Status {
	t.Helper()
	ch := make(chan []application.Status, 1)
	go func() { ch <- c.Statuses() }()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("Statuses blocked")
		return nil
	}
}

func statusOf(sts []application.Status, name string) application.Status {
	for _, s := range sts {
		if s.Name == name {
			return s
		}
	}
	return application.Status{}
}

func fastApp(name string, interval time.Duration) application.Application {
	a := testApp(name, true)
	a.SyncPolicy.Interval.Duration = interval
	return a
}

func TestStalledSwarmReadHoldsUpNoOtherApplicationAndReportsUnknownWithinItsDeadline(t *testing.T) {
	b := newTroubledSwarm()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	const deadline = 3 * time.Second
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet,
		Tick: 5 * time.Millisecond, SwarmReadTimeout: deadline},
		[]application.Application{fastApp("ok", time.Hour), fastApp("stuck", time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Status.Health != application.Healthy {
			t.Fatalf("%s before the stall: %v %s", r.App, r.Err, r.Status.Health)
		}
	}
	b.set(func() { b.stall["stuck"] = true })
	runLoop(t, c)
	if err := c.Refresh("stuck"); err != nil {
		t.Fatal(err)
	}

	// While the stuck stack's read hangs, the other application keeps
	// passing and the API keeps answering.
	give := time.Now().Add(10 * time.Second)
	for b.stalling.Load() == 0 {
		if time.Now().After(give) {
			t.Fatal("the stuck stack was never read")
		}
		time.Sleep(time.Millisecond)
	}
	// Each refresh of the other application makes a batch of its own (the
	// stuck one is running), which must get through.
	last := statusOf(statusesPromptly(t, c), "ok").LastPass
	for passes := 0; passes < 3; passes++ {
		if err := c.Refresh("ok"); err != nil {
			t.Fatal(err)
		}
		for {
			if b.stalling.Load() == 0 {
				t.Fatalf("only %d passes of another application while the read stalled", passes)
			}
			if lp := statusOf(statusesPromptly(t, c), "ok").LastPass; lp.After(last) {
				last = lp
				break
			}
			time.Sleep(time.Millisecond)
		}
	}

	for {
		st := statusOf(statusesPromptly(t, c), "stuck")
		if st.Health == application.HealthUnknown {
			if !strings.Contains(st.HealthMessage, "no answer within "+deadline.String()) {
				t.Fatalf("unknown health without its reason: %q", st.HealthMessage)
			}
			if len(st.Services) != 0 {
				t.Fatalf("services judged from a read that failed: %+v", st.Services)
			}
			if st.Sync != application.SyncUnknown {
				t.Fatalf("sync %s from a pass that could not read the swarm", st.Sync)
			}
			break
		}
		if time.Now().After(give) {
			t.Fatalf("the stuck application never reported the stalled read: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := b.deadlineless.Load(); n != 0 {
		t.Fatalf("%d reads of the swarm had no deadline", n)
	}
}

func TestOrphanSweepRunsBesideTheSchedulerOneAtATimeUnderItsDeadline(t *testing.T) {
	b := newTroubledSwarm()
	b.stallOwners.Store(true)
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet,
		Tick: 5 * time.Millisecond, OrphanSweepTimeout: 300 * time.Millisecond},
		[]application.Application{fastApp("ok", 10*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	runLoop(t, c)

	give := time.Now().Add(10 * time.Second)
	passes, last := 0, time.Time{}
	for passes < 3 {
		if time.Now().After(give) {
			t.Fatalf("%d passes while the orphan sweep hung", passes)
		}
		if lp := statusOf(statusesPromptly(t, c), "ok").LastPass; lp.After(last) && b.owners.Load() > 0 {
			passes, last = passes+1, lp
		}
		// Every reload asks for a sweep; none may start beside the one
		// that hangs.
		c.SetApplications([]application.Application{fastApp("ok", 10*time.Millisecond), fastApp(fmt.Sprintf("extra%d", passes), time.Hour)})
		time.Sleep(time.Millisecond)
	}
	for b.ownersStarted.Load() < 2 {
		if time.Now().After(give) {
			t.Fatal("the hung orphan sweep never ran out of time")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := b.maxOwners.Load(); m != 1 {
		t.Fatalf("%d orphan sweeps ran at once", m)
	}
	if n := b.deadlineless.Load(); n != 0 {
		t.Fatalf("%d orphan sweeps had no deadline", n)
	}
}

func TestDaemonThatIsNotASwarmManagerIsUnknownNeverMissingOrStale(t *testing.T) {
	b := newTroubledSwarm()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	if r := c.RunOnce(context.Background())[0]; r.Status.Health != application.Healthy || r.Status.Sync != application.Synced {
		t.Fatalf("before the restart: %s %s %v", r.Status.Sync, r.Status.Health, r.Err)
	}
	notManager := errors.New("Error response from daemon: This node is not a swarm manager. Use \"docker swarm init\" or \"docker swarm join\" to connect this node to swarm and try again.")

	// The record is cached: the pass observes, and the read's error is the
	// health.
	b.set(func() { b.readErr = notManager })
	st := c.RunOnce(context.Background())[0].Status
	if st.Health != application.HealthUnknown || !strings.Contains(st.HealthMessage, "not a swarm manager") || len(st.Services) != 0 {
		t.Fatalf("observed through a failed read: %s %q %+v", st.Health, st.HealthMessage, st.Services)
	}
	if st.Sync != application.SyncUnknown {
		t.Fatalf("unchanged in git but the swarm unread: sync %s, want Unknown", st.Sync)
	}

	// The record must be read too (a cache miss): the pass fails before it
	// observes, and still publishes Unknown rather than the old judgement.
	c.RunOnce(context.Background()) // back to a known state first
	b.set(func() { b.readErr = nil })
	if st := c.RunOnce(context.Background())[0].Status; st.Health != application.Healthy {
		t.Fatalf("after the daemon came back: %s", st.Health)
	}
	b.set(func() { b.readErr, b.releasesErr = notManager, notManager })
	c.forgetRelease(application.LocalDestination, "shop")
	before := time.Now()
	r := c.RunOnce(context.Background())[0]
	st = r.Status
	if r.Err == nil {
		t.Fatal("a pass that could not read its record succeeded")
	}
	if st.Health != application.HealthUnknown || st.Sync != application.SyncUnknown {
		t.Fatalf("a pass that failed before observing published %s/%s", st.Sync, st.Health)
	}
	if !strings.Contains(st.HealthMessage, "not a swarm manager") || st.LastPass.Before(before) {
		t.Fatalf("unknown without its reason or time: %q at %s", st.HealthMessage, st.LastPass)
	}
	for _, s := range st.Services {
		if s.Health == application.Missing {
			t.Fatalf("service %s reported Missing from a failed read", s.Name)
		}
	}
}

func TestPassThatFailsToFetchStillJudgesHealthFromAFreshRead(t *testing.T) {
	b := newTroubledSwarm()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	c.RunOnce(context.Background())

	f.mu.Lock()
	f.err = errors.New("connection refused")
	f.mu.Unlock()
	if st := c.RunOnce(context.Background())[0].Status; st.Health != application.Healthy || st.Sync != application.SyncUnknown {
		t.Fatalf("repository down, swarm fine: %s/%s (%s)", st.Sync, st.Health, st.HealthMessage)
	}
	// The stack goes away while the repository is down: the next pass
	// sees it, although it has no manifest of its own.
	if err := b.RemoveStack(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	st := c.RunOnce(context.Background())[0].Status
	if st.Health != application.Missing || len(st.Services) != 2 {
		t.Fatalf("stack removed during a repository outage: %s %q %+v", st.Health, st.HealthMessage, st.Services)
	}

	// Outside a batch (Reconcile) the pass reads the stack itself.
	b.set(func() { b.readErr = errors.New("daemon unreachable") })
	res := mustReconcile(t, c, "shop")
	if res.Status.Health != application.HealthUnknown || !strings.Contains(res.Status.HealthMessage, "daemon unreachable") {
		t.Fatalf("single pass, nothing readable: %s %q", res.Status.Health, res.Status.HealthMessage)
	}
}

func TestIdenticalWaitingSyncRequestsMergeAndEveryWaiterGetsTheResult(t *testing.T) {
	_, _, c := shopOnMinimal(t, false)
	first, err := c.RequestSync("shop", "alice")
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.RequestSync("shop", "alice")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.RequestSync("shop", "bob")
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	queued := len(c.apps["shop"].pending)
	c.mu.Unlock()
	if queued != 2 {
		t.Fatalf("%d requests queued, want 2 (alice's twice is one)", queued)
	}
	c.RunOnce(context.Background()) // serves alice's
	a, b := receive(t, first), receive(t, second)
	if a.Err != nil || a.Revision != 1 || b.Revision != a.Revision {
		t.Fatalf("merged waiters got %+v and %+v", a, b)
	}
	c.RunOnce(context.Background()) // serves bob's
	if r := receive(t, other); r.Err != nil || r.Action != charts.Unchanged {
		t.Fatalf("bob's request: %+v", r)
	}
}

func TestFullRequestQueueRefusesTheNextRequestAtOnce(t *testing.T) {
	_, _, c := shopOnMinimal(t, false)
	for i := range 16 {
		if _, err := c.RequestSync("shop", fmt.Sprint("user", i)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err := c.RequestSync("shop", "one-too-many")
	if !errors.Is(err, ErrQueueFull) || !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), `"shop"`) {
		t.Fatalf("17th request: %v", err)
	}
	// A duplicate of one already waiting costs no place in the queue.
	if _, err := c.RequestSync("shop", "user3"); err != nil {
		t.Fatalf("duplicate of a waiting request: %v", err)
	}
}

func TestRemovingAnApplicationAnswersEveryRequestWaitingForIt(t *testing.T) {
	_, _, c := shopOnMinimal(t, false)
	sync, err := c.RequestSync("shop", "alice")
	if err != nil {
		t.Fatal(err)
	}
	rollback, err := c.Rollback("shop", 1, "bob")
	if err != nil {
		t.Fatal(err)
	}
	c.SetApplications(nil)
	for _, ch := range []<-chan Result{sync, rollback} {
		r := receive(t, ch)
		if !errors.Is(r.Err, ErrNotFound) || !strings.Contains(r.Err.Error(), "removed while waiting") {
			t.Fatalf("waiter of a removed application got %v", r.Err)
		}
	}
}

// blockingFetcher is fakeFetcher whose Fetch waits, while hold is set, until
// release is closed or its context ends.
type blockingFetcher struct {
	*fakeFetcher
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newBlockingFetcher(f *fakeFetcher) *blockingFetcher {
	return &blockingFetcher{fakeFetcher: f, entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (f *blockingFetcher) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	if f.hold.Load() {
		f.entered <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fetch: %w", ctx.Err())
		case <-f.release:
		}
	}
	return f.fakeFetcher.Fetch(ctx, req)
}

func TestStoppedControllerAnswersWaitingRequestsWithTheContextError(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newBlockingFetcher(newFakeFetcher())
	f.commit(t, repoFiles(composeV1))
	f.hold.Store(true)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Tick: 5 * time.Millisecond},
		[]application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	<-f.entered // a pass is running and holds the application

	var waiting []<-chan Result
	for _, by := range []string{"alice", "bob"} {
		ch, err := c.RequestSync("shop", by)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, ch)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, ch := range waiting {
		if r := receive(t, ch); !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("waiter of a stopped controller got %v", r.Err)
		}
	}
	if _, err := c.RequestSync("shop", "late"); !errors.Is(err, context.Canceled) {
		t.Fatalf("request after the stop: %v", err)
	}
}

func TestRefreshClearsTheBackoffOfEarlierTransientFailures(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet,
		Backoff: time.Minute, Clock: func() time.Time { return now }},
		[]application.Application{fastApp("shop", 24*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.err = errors.New("repository unreachable")
	f.mu.Unlock()
	for range 4 {
		c.RunOnce(context.Background())
	}
	next := func() time.Duration {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.apps["shop"].next.Sub(now)
	}
	if got := next(); got != 8*time.Minute {
		t.Fatalf("after 4 failures the next pass is in %s, want 8m", got)
	}
	if err := c.Refresh("shop"); err != nil {
		t.Fatal(err)
	}
	if got := next(); got > 0 {
		t.Fatalf("refreshed, yet the next pass is in %s", got)
	}
	// The backoff starts over: a failure right after waits the first step.
	c.RunOnce(context.Background())
	if got := next(); got != time.Minute {
		t.Fatalf("first failure after a refresh backs off %s, want 1m", got)
	}
}

func TestRefreshDuringAPassMakesTheNextPassDueAtOnce(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newBlockingFetcher(newFakeFetcher())
	f.commit(t, repoFiles(composeV1))
	f.fakeFetcher.err = errors.New("repository unreachable")
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Backoff: time.Hour},
		[]application.Application{fastApp("shop", 24*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f.hold.Store(true)
	results := make(chan []Result)
	go func() { results <- c.RunOnce(context.Background()) }()
	<-f.entered
	// The webhook of the push that ends the outage arrives mid-pass.
	if err := c.Refresh("shop"); err != nil {
		t.Fatal(err)
	}
	f.hold.Store(false)
	close(f.release)
	if r := (<-results)[0]; r.Err == nil {
		t.Fatal("the pass in flight did not fail")
	}
	c.mu.Lock()
	a := c.apps["shop"]
	due, failures := !c.now().Before(a.next), a.failures
	c.mu.Unlock()
	if !due || failures != 0 {
		t.Fatalf("after a refresh during a failing pass: due %v, failures %d", due, failures)
	}
}

func receive(t *testing.T, ch <-chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("request never answered")
		return Result{}
	}
}

// newRepoFetcher holds every fetch of the repository "/new" until its
// context ends or release is closed, counting how many wait at once.
type newRepoFetcher struct {
	*fakeFetcher
	release chan struct{}
	now     atomic.Int32
	most    atomic.Int32
}

func (f *newRepoFetcher) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	if req.RepoURL == "/new" {
		n := f.now.Add(1)
		defer f.now.Add(-1)
		for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.release:
		}
	}
	return f.fakeFetcher.Fetch(ctx, req)
}

func TestLoadingManyNewApplicationsKeepsTheirFirstPassesInALaneOfTheirOwn(t *testing.T) {
	b := chartstest.NewMinimal()
	f := &newRepoFetcher{fakeFetcher: newFakeFetcher(), release: make(chan struct{})}
	f.commit(t, repoFiles(composeV1))
	old := fastApp("old", 10*time.Millisecond)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet,
		Tick: 5 * time.Millisecond, MaxConcurrentPasses: 8}, []application.Application{old})
	if err != nil {
		t.Fatal(err)
	}
	c.RunOnce(context.Background())
	runLoop(t, c)

	apps := []application.Application{old}
	for i := range 50 {
		a := fastApp(fmt.Sprintf("new%02d", i), time.Hour)
		a.Source.RepoURL = "/new"
		apps = append(apps, a)
	}
	c.SetApplications(apps)
	give := time.Now().Add(10 * time.Second)
	for f.now.Load() < 2 && time.Now().Before(give) {
		time.Sleep(time.Millisecond)
	}
	passes, last := 0, statusOf(statusesPromptly(t, c), "old").LastPass
	for passes < 5 {
		if time.Now().After(give) {
			t.Fatalf("%d passes of the running application while 50 first passes waited", passes)
		}
		if lp := statusOf(statusesPromptly(t, c), "old").LastPass; lp.After(last) {
			passes, last = passes+1, lp
		}
		time.Sleep(time.Millisecond)
	}
	if m := f.most.Load(); m != 2 {
		t.Fatalf("%d first passes ran at once, want 2 (a quarter of 8)", m)
	}
	close(f.release)
	for _, name := range []string{"new00", "new49"} {
		for st, _ := c.Status(name); st.LastPass.IsZero(); st, _ = c.Status(name) {
			if time.Now().After(give.Add(20 * time.Second)) {
				t.Fatalf("%s never had its first pass", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestFirstPassesWaitingForALaneNeverHoldUpASteadyPassOfTheSameBatch(t *testing.T) {
	b := chartstest.NewMinimal()
	f := &newRepoFetcher{fakeFetcher: newFakeFetcher(), release: make(chan struct{})}
	f.commit(t, repoFiles(composeV1))
	old := fastApp("old", time.Hour)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, MaxConcurrentPasses: 4},
		[]application.Application{old})
	if err != nil {
		t.Fatal(err)
	}
	c.RunOnce(context.Background())
	before, _ := c.Status("old")
	apps := []application.Application{old}
	for i := range 50 {
		a := fastApp(fmt.Sprintf("new%02d", i), time.Hour)
		a.Source.RepoURL = "/new"
		apps = append(apps, a)
	}
	c.SetApplications(apps)
	done := make(chan []Result)
	go func() { done <- c.RunOnce(context.Background()) }() // one batch for all 51
	give := time.Now().Add(10 * time.Second)
	for st, _ := c.Status("old"); !st.LastPass.After(before.LastPass); st, _ = c.Status("old") {
		if time.Now().After(give) {
			close(f.release)
			<-done
			t.Fatal("the steady pass waited behind first passes held for a lane")
		}
		time.Sleep(time.Millisecond)
	}
	close(f.release)
	if res := <-done; len(res) != 51 {
		t.Fatalf("%d results", len(res))
	}
}
