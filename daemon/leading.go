package daemon

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/lease"
)

// runPasses runs the reconciler until ctx ends: at once without --ha, and
// with it only while this controller holds the leader lease.
func (r *runner) runPasses(ctx context.Context) error {
	if r.lease == nil {
		return r.ctl.Run(ctx)
	}
	return r.runLeading(ctx)
}

// runLeading campaigns for the lease and runs the reconciler for as long as
// it is held, stopping it (a pass in flight ends at its next step; the write
// gate already refuses its writes) the moment leadership is lost, and
// starting it again if it is won back. The standby runs no pass at all, not
// even a read-only one: its API answers from the swarm and from what it
// last knew, and a pass that could not write would only report failures.
//
// The lease outlives the reconciler on the way out, so it is released only
// once no pass can write any more, and a standby takes over at once rather
// than after the lease expires.
func (r *runner) runLeading(ctx context.Context) error {
	leaseCtx, stopLease := context.WithCancel(context.WithoutCancel(ctx))
	leaseDone := make(chan struct{})
	go func() {
		defer close(leaseDone)
		_ = r.lease.Run(leaseCtx)
	}()
	defer func() {
		stopLease()
		<-leaseDone
	}()
	// Leadership can also run out by the clock alone, between signals.
	check := time.NewTicker(max(r.lease.Duration()/10, 10*time.Millisecond))
	defer check.Stop()
	for {
		r.log.Info("standing by: waiting for the leader lease", "ha_id", r.lease.ID())
		for !r.lease.State().Leader {
			select {
			case <-ctx.Done():
				return nil
			case <-r.lease.Changed():
			case <-check.C:
			}
		}
		st := r.lease.State()
		r.log.Info("leading: passes start", "ha_id", r.lease.ID(), "epoch", st.Epoch)
		passes, stopPasses := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.ctl.Run(passes) }()
		for r.lease.State().Leader {
			select {
			case <-ctx.Done():
				err := <-done
				stopPasses()
				return err
			case err := <-done:
				stopPasses()
				return err
			case <-r.lease.Changed():
			case <-check.C:
			}
		}
		stopPasses()
		if err := <-done; err != nil {
			return err
		}
		// The new leader moves the rollouts on from here; the routes and
		// the operators' commands of this term must not be served or
		// deployed again, not even once this controller leads again.
		r.ctl.ForgetRoutes()
		forgotten := r.ctl.ForgetRolloutCommands()
		r.log.Warn("leadership lost: passes stopped, writes refused, router configuration withheld", "ha_id", r.lease.ID(), "epoch", st.Epoch, "rollout_commands_forgotten", forgotten)
	}
}

// leadership is what the API reports of the lease.
func leadership(l *lease.Lease) func() api.Leadership {
	return func() api.Leadership {
		st := l.State()
		return api.Leadership{ID: l.ID(), Leader: st.Leader, Holder: st.Holder, Epoch: st.Epoch}
	}
}

// defaultHAID names this controller in the lease: $FLOTILLA_HA_ID (a swarm
// service sets it to the task's name), or else hostname-pid, unique per
// process on a host and per task of a service on an overlay network, where
// the hostname is the container's.
func defaultHAID() string {
	if id := os.Getenv("FLOTILLA_HA_ID"); id != "" {
		return id
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "flotilla"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
