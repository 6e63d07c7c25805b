package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
)

// degradedWatch is what the controller remembers of its newest sync between
// passes for syncPolicy.rollback: since when that revision has been seen
// Degraded without a break, and whether it was already rolled back. It is
// memory only: a restarted controller starts the clock again, which can
// only delay a rollback, never cause one.
type degradedWatch struct {
	revision int
	since    time.Time
	fired    bool
}

// autoRollback rolls the newest sync back when the application has been
// Degraded for syncPolicy.rollback.onDegraded since it applied: it queues
// the same rollback an operator would ask for (the previous revision,
// pinned until the next commit), by the controller. A rollback is never
// itself rolled back, and an explicit sync's pass only watches; the passes
// after it judge.
func (c *Controller) autoRollback(ctx context.Context, p *pass) error {
	rb := p.app.SyncPolicy.Rollback
	if rb == nil || rb.OnDegraded.Duration <= 0 {
		return nil
	}
	latest := p.recorded
	if latest == nil {
		latest = p.latest
	}
	now := c.now()
	var w degradedWatch
	c.mu.Lock()
	if a, ok := c.apps[p.app.Name]; ok {
		w = a.degraded
	}
	c.mu.Unlock()
	switch {
	case latest == nil || latest.PinnedCommit != "":
		w = degradedWatch{}
	case w.revision != latest.Revision:
		w = degradedWatch{revision: latest.Revision}
	}
	if latest != nil && latest.PinnedCommit == "" {
		if p.status.Health != application.Degraded {
			w.since = time.Time{}
		} else if w.since.IsZero() {
			w.since = now
		}
	}
	due := latest != nil && !w.fired && !w.since.IsZero() && p.request == nil &&
		now.Sub(w.since) >= rb.OnDegraded.Duration
	if due {
		w.fired = true
	}
	c.mu.Lock()
	if a, ok := c.apps[p.app.Name]; ok {
		a.degraded = w
	}
	c.mu.Unlock()
	if !due {
		return nil
	}
	prev, err := c.previousRecord(ctx, p, latest)
	if err != nil || prev == nil {
		if err == nil {
			err = fmt.Errorf("no earlier revision is kept")
		}
		p.log.Warn("application stayed Degraded after a sync but cannot be rolled back", "revision", latest.Revision, "error", err)
		return nil
	}
	reason := fmt.Sprintf("automatically: Degraded for %s after revision %d", rb.OnDegraded.Duration, latest.Revision)
	if _, err := c.enqueue(p.app.Name, SyncRequest{Rollback: prev.Revision, By: "flotilla " + reason}); err != nil {
		p.log.Warn("could not queue the automatic rollback", "revision", prev.Revision, "error", err)
		return nil
	}
	msg := fmt.Sprintf("rolling back to revision %d %s", prev.Revision, reason)
	p.log.Warn("application stayed Degraded after a sync; rolling back", "revision", latest.Revision, "to", prev.Revision)
	c.emit(p, events.RolledBack, "", msg, map[string]any{"from": latest.Revision, "to": prev.Revision})
	return nil
}

// previousRecord is the newest kept record older than latest.
func (c *Controller) previousRecord(ctx context.Context, p *pass, latest *charts.Release) (*charts.Release, error) {
	rs, err := p.backend.Releases(ctx, p.app.Stack)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	for i := range rs {
		if rs[i].Revision < latest.Revision {
			return &rs[i], nil
		}
	}
	return nil, nil
}
