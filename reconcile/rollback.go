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
// passes for syncPolicy.rollback: since when it has itself seen that
// revision Degraded without a break, and whether it was already rolled back.
// That memory is one of two clocks; the other is read from the swarm on
// every pass (swarmDegradedSince), so a restarted controller, which has
// lost the first, still finds the second and keeps the deadline.
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
//
// The clock starts at the earlier of two moments, each of which the
// application has provably been Degraded since: the first pass of this
// controller that found it Degraded with no pass in between finding it
// otherwise, and what the swarm itself records (swarmDegradedSince). Either
// may be missing; neither is ever earlier than the revision's record.
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
	var since time.Time
	if latest != nil && latest.PinnedCommit == "" {
		if p.status.Health != application.Degraded || p.degradedByRollout {
			w.since = time.Time{}
		} else {
			if w.since.IsZero() {
				w.since = now
			}
			since = w.since
			if durable, ok := swarmDegradedSince(latest, p.judged, p.status.Services); ok && durable.Before(since) {
				since = durable
			}
		}
	}
	due := latest != nil && !w.fired && !since.IsZero() && p.request == nil &&
		now.Sub(since) >= rb.OnDegraded.Duration
	if due {
		w.fired = true
	}
	c.mu.Lock()
	if a, ok := c.apps[p.app.Name]; ok {
		a.degraded = w
	}
	c.mu.Unlock()
	if !due {
		if !since.IsZero() && p.request == nil && !w.fired {
			p.log.Debug("application is Degraded after a sync; rollback is due at the deadline", "revision", latest.Revision,
				"since", since.UTC().Format(time.RFC3339), "deadline", since.Add(rb.OnDegraded.Duration).UTC().Format(time.RFC3339))
		}
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
	p.log.Warn("application stayed Degraded after a sync; rolling back", "revision", latest.Revision, "to", prev.Revision,
		"degradedSince", since.UTC().Format(time.RFC3339Nano))
	c.emit(p, events.RolledBack, "", msg, map[string]any{"from": latest.Revision, "to": prev.Revision, "degradedSince": since.UTC()})
	return nil
}

// stoppedUpdate are the UpdateStatus states in which Swarm has stopped a
// service's update (or is undoing it). The health judgement calls such a
// service Degraded whatever its tasks do, and the state changes only with
// a write to the service, which moves its UpdatedAt.
var stoppedUpdate = map[string]bool{
	"paused": true, "rollback_started": true, "rollback_paused": true, "rollback_completed": true,
}

// swarmDegradedSince is the moment the swarm itself proves the application
// has been Degraded since, for the revision latest, when it proves one: a
// service judged Degraded whose update Swarm stopped has been Degraded
// since Swarm wrote that state, its object's UpdatedAt, and so has the
// application. The earliest such moment counts, never earlier than the
// record's time (the policy counts from the sync). Task timestamps prove
// nothing of the kind: the swarm keeps a few tasks per slot, so a crash loop
// that began at the deploy and one that began a minute ago look alike, and a
// service failing only by its tasks gets no durable clock.
func swarmDegradedSince(latest *charts.Release, states []charts.ServiceState, judged []application.ServiceStatus) (time.Time, bool) {
	degraded := map[string]bool{}
	for _, s := range judged {
		if s.Health == application.Degraded {
			degraded[s.Name] = true
		}
	}
	var since time.Time
	for _, s := range states {
		if !degraded[s.Name] || !stoppedUpdate[s.UpdateState] || s.UpdatedAt.IsZero() {
			continue
		}
		if since.IsZero() || s.UpdatedAt.Before(since) {
			since = s.UpdatedAt
		}
	}
	if since.IsZero() {
		return time.Time{}, false
	}
	if since.Before(latest.Time) {
		since = latest.Time
	}
	return since, true
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
