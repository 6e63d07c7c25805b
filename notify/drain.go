package notify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/events"
)

// drainPoll is how often Drain looks at the queues.
const drainPoll = 20 * time.Millisecond

// Drain waits until every event b published so far has been handed to the
// sinks and every sink has finished with its queue (delivered, failed or
// suppressed), so that a stopping controller sends the notifications of its
// last passes. Run must be running meanwhile; cancel its context after
// Drain returns. When ctx ends first, the error names the sinks still busy.
func (d *Dispatcher) Drain(ctx context.Context, b *events.Broker) error {
	if len(d.sinks) == 0 {
		return nil
	}
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		pending := d.pending(b.LastID())
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("notifications not sent: %s: %w", strings.Join(pending, ", "), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// pending describes what is left before everything up to last is sent.
func (d *Dispatcher) pending(last uint64) []string {
	var out []string
	if c := d.consumed.Load(); c < last {
		out = append(out, fmt.Sprintf("%d event(s) not yet read", last-c))
	}
	for _, s := range d.sinks {
		s.mu.Lock()
		n := len(s.queue)
		if s.busy {
			n++
		}
		s.mu.Unlock()
		if n > 0 {
			out = append(out, fmt.Sprintf("sink %s: %d", s.name, n))
		}
	}
	return out
}
