package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/health"
)

// waitPoll is how often a waiting sync reads the stack.
const waitPoll = time.Second

// wait makes a sync that wrote something wait for the stack to converge when
// syncPolicy.wait asks for it, and fail honestly: a timeout, or an update
// Swarm rolled back, is a failed sync with its reason. The revision stays
// recorded, so the next pass plans it as unchanged and does not push the
// rolled-back spec again until git changes.
func (c *Controller) wait(ctx context.Context, p *pass) error {
	w := p.app.SyncPolicy.Wait
	if w == nil || w.Timeout.Duration <= 0 || (p.deployed == nil && p.healed == nil) {
		return nil
	}
	deadline := c.now().Add(w.Timeout.Duration)
	var last health.Result
	for {
		states, trusted, err := capability.ReadStack(ctx, p.backend, p.app.Stack)
		if err == nil && trusted {
			last = c.judge(p, states)
			if last.Health == application.Healthy || last.Health == application.Suspended {
				return nil
			}
			if rb := rolledBackServices(states); len(rb) > 0 {
				return stalled("wait", fmt.Errorf("sync failed: Swarm rolled back %s: %s", strings.Join(rb, ", "), last.Message))
			}
		}
		if !c.now().Before(deadline) {
			return stalled("wait", fmt.Errorf("sync failed: stack did not converge within %s: %s", w.Timeout.Duration, last.Message))
		}
		select {
		case <-ctx.Done():
			return transient("wait", ctx.Err())
		case <-time.After(waitPoll):
		}
	}
}

// judge rolls up the declared services' health from one read.
func (c *Controller) judge(p *pass, states []charts.ServiceState) health.Result {
	return health.Stack(c.serviceResults(p, states))
}

func rolledBackServices(states []charts.ServiceState) []string {
	var out []string
	for _, s := range states {
		switch s.UpdateState {
		case updateRollbackStarted, updateRollbackCompleted, updateRollbackPaused:
			out = append(out, s.Name)
		}
	}
	return out
}
