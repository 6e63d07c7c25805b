package reconcile

import (
	"fmt"
	"time"
)

// The queue of explicit requests (syncs, rollbacks): each waits here for the
// loop (scheduler.go), at most Options.QueueLimit per application, and is
// answered by the pass that serves it or by the stop.

// queued is one waiting request and everyone waiting for its result:
// identical requests merge into one, so each gets the same answer.
type queued struct {
	req     SyncRequest
	waiters []chan Result // each buffered for one result
}

// answer sends res to every waiter. It never blocks.
func (q *queued) answer(res Result) {
	for _, w := range q.waiters {
		w <- res
	}
}

// RequestSync queues an explicit sync for the controller's loop and returns a
// channel that receives the result of the pass that serves it.
func (c *Controller) RequestSync(name, by string) (<-chan Result, error) {
	return c.enqueue(name, SyncRequest{By: by})
}

// Refresh makes the application due now, without forcing a manual one to
// apply. It also clears the backoff of earlier transient failures: a refresh
// (a webhook, an operator) says the outage is over, so the next pass must
// not wait out the backoff. Asked for during a pass, it runs another one
// right after.
func (c *Controller) Refresh(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	a.next = time.Time{}
	a.failures = 0
	if a.running {
		a.refreshed = true
	}
	c.poke()
	return nil
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

type queueFullError struct{}

func (queueFullError) Error() string        { return "too many requests waiting" }
func (queueFullError) Is(target error) bool { return target == ErrBusy }

// RequestSyncWith queues an explicit sync with options (prune, dry run, a
// pinned revision).
func (c *Controller) RequestSyncWith(name string, req SyncRequest) (<-chan Result, error) {
	req.Rollback = 0
	return c.enqueue(name, req)
}

// enqueue queues req for the application's next pass. A request identical
// to one already waiting joins it and receives the same result; past
// QueueLimit waiting requests the new one is refused at once. Whatever
// happens to the application, every waiter is answered: by its pass, or
// with an error when the application is removed or the controller stops.
func (c *Controller) enqueue(name string, req SyncRequest) (<-chan Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return nil, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	if c.stopped != nil {
		return nil, fmt.Errorf("application %q: the controller has stopped: %w", name, c.stopped)
	}
	done := make(chan Result, 1)
	for _, q := range a.pending {
		if q.req == req {
			q.waiters = append(q.waiters, done)
			return done, nil
		}
	}
	if len(a.pending) >= c.opts.QueueLimit {
		return nil, fmt.Errorf("application %q: %d requests already waiting: %w", name, len(a.pending), ErrQueueFull)
	}
	a.pending = append(a.pending, &queued{req: req, waiters: []chan Result{done}})
	c.poke()
	return done, nil
}
