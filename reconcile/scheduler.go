package reconcile

// The scheduler: one loop that starts a batch of passes for every
// application that is due, reads the swarm once per batch off its own
// goroutine, and runs the passes in bounded lanes.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// Run drives every application until ctx ends, then waits for passes in
// flight to finish and answers every request still waiting with ctx's error.
//
// The scheduler itself never waits on the swarm: each batch reads it on a
// goroutine of its own under SwarmReadTimeout, and the look for orphaned
// stacks runs beside the scheduler, one at a time, under OrphanSweepTimeout.
// A daemon that stops answering therefore costs the applications it serves
// an Unknown health, not every application its passes.
func (c *Controller) Run(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	defer func() { c.stop(ctx.Err()) }() // after the passes: they answer their own requests
	defer wg.Wait()
	// A value rotated in a secret store makes the applications that use
	// it due now (see secrets.go); the store answered, so their backoff
	// is cleared as by a webhook.
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.stores.Watch(ctx, func(app string) {
			if c.Refresh(app) == nil {
				c.log.Info("a secret store value changed; pass due", "application", app)
			}
		})
	}()
	orphansDue := c.now()
	sweeping := false
	swept := make(chan struct{}, 1)
	t := time.NewTicker(c.opts.Tick)
	defer t.Stop()
	for ctx.Err() == nil {
		if c.appsChanged.Swap(false) {
			orphansDue = c.now()
		}
		if !sweeping && !c.now().Before(orphansDue) {
			// On start, then now and then: a removal that failed (still
			// in use) is retried, and a record written meanwhile by a
			// controller that has since lost the application is found.
			sweeping = true
			orphansDue = c.now().Add(orphanInterval)
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, c.opts.OrphanSweepTimeout)
				defer cancel()
				if _, err := c.SweepOrphans(sctx); err != nil && ctx.Err() == nil {
					c.log.Warn("stacks of removed applications not checked", "error", err)
				}
				swept <- struct{}{}
			}()
		}
		c.startDue(ctx, &wg, false)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.wake:
		case <-swept:
			sweeping = false
		}
	}
	return nil
}

// stop answers every request still queued once the loop has ended, so no
// caller waits for a pass that will never run, and refuses new ones.
func (c *Controller) stop(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	c.mu.Lock()
	c.stopped = cause
	var drop []*queued
	var names []string
	for name, a := range c.apps {
		for _, q := range a.pending {
			drop = append(drop, q)
			names = append(names, name)
		}
		a.pending = nil
	}
	c.mu.Unlock()
	for i, q := range drop {
		q.answer(Result{App: names[i], Err: fmt.Errorf("application %q: the controller stopped before serving the request: %w", names[i], cause)})
	}
}

// startDue starts a batch for every application that is due (every one,
// with all) or has a sync request, one batch per destination. Each batch
// reads its swarm once for all of its applications and then runs their
// passes side by side, at most MaxConcurrentPasses at a time across all
// batches, all on goroutines counted by wg, so the caller never waits on a
// swarm or for a free slot, and a swarm that does not answer holds up only
// its own batch.
func (c *Controller) startDue(ctx context.Context, wg *sync.WaitGroup, all bool) {
	if ctx.Err() != nil {
		return // stopping: no new pass
	}
	now := c.now()
	c.mu.Lock()
	var due []*appState
	var first []bool
	for _, a := range c.apps {
		if a.running {
			continue
		}
		if all || len(a.pending) > 0 || !now.Before(a.next) {
			a.running = true
			due = append(due, a)
		}
	}
	// Explicit requests first: someone waits for them.
	slices.SortStableFunc(due, func(x, y *appState) int { return cmpBool(len(y.pending) > 0, len(x.pending) > 0) })
	for _, a := range due {
		first = append(first, a.status.LastPass.IsZero())
	}
	c.mu.Unlock()
	for dest, idx := range byDestination(due) {
		batch := make([]*appState, len(idx))
		batchFirst := make([]bool, len(idx))
		for i, j := range idx {
			batch[i], batchFirst[i] = due[j], first[j]
		}
		c.startBatch(ctx, wg, dest, batch, batchFirst)
	}
}

// byDestination groups the indices of due by destination, keeping order.
func byDestination(due []*appState) map[string][]int {
	out := map[string][]int{}
	for i, a := range due {
		d := destination(a.app)
		out[d] = append(out[d], i)
	}
	return out
}

// startBatch reads dest once for due and feeds their passes to the lanes.
func (c *Controller) startBatch(ctx context.Context, wg *sync.WaitGroup, dest string, due []*appState, first []bool) {
	stacks := make([]string, 0, len(due))
	for _, a := range due {
		stacks = append(stacks, a.app.Stack)
	}
	// The passes of a small batch (a webhook's, a new application's) start
	// at once and wait for the batch's read of the swarm only at their
	// first step that needs it: the git remote check and the render, which
	// need none, overlap the read. A larger batch's passes start once the
	// read is in: its decoded services and the passes' renders would
	// otherwise be in memory together, which at 1,000 applications of 5
	// services raised the controller's peak by about 10 MB.
	read := &batchRead{done: make(chan struct{})}
	overlap := len(due) <= overlapBatch
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(read.done)
		read.snap = c.readBatch(ctx, dest, stacks)
	}()
	go func() {
		defer wg.Done()
		if !overlap {
			read.wait()
		}
		// One feeder per lane, so that first passes waiting for a slot
		// never hold up a steady pass of the same batch.
		var firsts, steady []*appState
		for i, a := range due {
			if first[i] {
				firsts = append(firsts, a)
			} else {
				steady = append(steady, a)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.feed(ctx, wg, c.firstLane, firsts, read)
		}()
		c.feed(ctx, wg, c.steadyLane, steady, read)
	}()
}

// feed starts the passes of due one by one as lane has room. If ctx ends
// first, those not started are given up (their requests are answered when
// Run returns).
func (c *Controller) feed(ctx context.Context, wg *sync.WaitGroup, lane chan struct{}, due []*appState, snap *batchRead) {
	for i, a := range due {
		select {
		case lane <- struct{}{}:
		case <-ctx.Done():
			c.mu.Lock()
			for _, a := range due[i:] {
				a.running = false
			}
			c.mu.Unlock()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-lane }()
			c.runPass(ctx, a, snap)
		}()
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// overlapBatch is the largest batch whose passes start before its read of
// the swarm has answered (see startBatch).
const overlapBatch = 8

// batchRead is a batch's read of the swarm on its way; done is closed once
// snap is set.
type batchRead struct {
	done chan struct{}
	snap *snapshot
}

// wait returns the read once it has arrived.
func (r *batchRead) wait() *snapshot {
	<-r.done
	return r.snap
}

// readBatch takes the one look at the swarm a batch shares, bounded by
// SwarmReadTimeout. A read that failed or ran out of time is kept as the
// snapshot's error, which every pass of the batch then reports as Unknown.
func (c *Controller) readBatch(ctx context.Context, dest string, stacks []string) *snapshot {
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	b, ok := c.backends[dest]
	if !ok {
		return &snapshot{dest: dest, err: fmt.Errorf("destination %q: %w", dest, ErrNoSwarm)}
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.SwarmReadTimeout)
	defer cancel()
	snap := newSnapshot(rctx, dest, b, stacks)
	if snap.err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		snap.err = fmt.Errorf("no answer within %s: %w", c.opts.SwarmReadTimeout, snap.err)
	}
	return snap
}

// runPass runs one pass for a and schedules the next.
func (c *Controller) runPass(ctx context.Context, a *appState, snap *batchRead) {
	// One request per pass: a sync and a rollback queued together are
	// different deploys. The rest stay queued and make the app due again.
	c.mu.Lock()
	var q *queued
	if len(a.pending) > 0 {
		q = a.pending[0]
		a.pending = slices.Delete(a.pending, 0, 1)
	}
	app := a.app
	a.refreshed = false
	c.mu.Unlock()

	var req *SyncRequest
	if q != nil {
		req = &q.req
	}
	res := c.passIn(ctx, app, req, snap)

	c.mu.Lock()
	a.running = false
	a.status = res.Status
	a.last = res
	interval := app.SyncPolicy.Interval.Duration
	if interval <= 0 {
		interval = application.DefaultInterval
	}
	switch {
	case a.refreshed:
		// Asked for during the pass (a webhook, say), which may have
		// fetched before the push it announces: run again now.
		a.failures = 0
		a.next = time.Time{}
	case res.Err != nil && KindOf(res.Err) == Transient:
		a.failures++
		a.next = c.now().Add(min(c.opts.Backoff<<min(a.failures-1, 10), interval))
	default:
		a.failures = 0
		a.next = c.now().Add(interval)
	}
	if n := res.NextCheck; !n.IsZero() && !a.next.IsZero() && n.Before(a.next) {
		// A rollout's pause or readiness poll ends before the interval.
		a.next = n
	}
	again := len(a.pending) > 0 || a.refreshed
	removed := c.apps[app.Name] != a
	c.mu.Unlock()
	if removed {
		// The pass outlived its application: drop the series it just set.
		c.opts.Metrics.ForgetApp(app.Name)
		c.analysis.Forget(app.Name)
	}
	if q != nil {
		q.answer(res)
	}
	if again {
		c.poke()
	}
}

// RunOnce runs one pass of every application as one batch, the way the
// loop does: one read of the swarm for all of them, then the passes side by
// side. It returns the results sorted by application; `controller --once`
// and the benchmarks use it.
func (c *Controller) RunOnce(ctx context.Context) []Result {
	var wg sync.WaitGroup
	c.startDue(ctx, &wg, true)
	wg.Wait()
	c.mu.Lock()
	out := make([]Result, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a.last)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.App, b.App) })
	return out
}
