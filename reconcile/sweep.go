package reconcile

import (
	"context"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/sweep"
)

// pruneEnabled reports whether this pass may delete: the application is
// automated with prune on, or an explicit sync asked for it.
func pruneEnabled(p *pass) bool {
	if p.request != nil && p.request.Prune {
		return true
	}
	a := p.app.SyncPolicy.Automated
	return a != nil && a.Prune && p.request == nil
}

// sweepStep removes what the repository stopped declaring and this
// application can prove it created, or, without prune, reports what it would
// remove. It runs when the stack may have changed shape — after a deploy, on
// the first pass after a start, when an explicit sync asks, and while an
// earlier sweep left work to retry — so a steady-state pass reads nothing
// more for it.
func (c *Controller) sweepStep(ctx context.Context, p *pass) error {
	// After a write, the confirmation reads health afresh. That read does
	// not depend on the sweep (health judges declared services, which the
	// sweep never removes) unless a hook job is left to clean up after it,
	// so it is made beside the sweep's reads.
	if (p.recorded != nil || p.healed != nil) && p.healthRead == nil && !p.hasHooks() {
		p.healthRead = readStackAsync(ctx, p)
	}
	prev := c.sweepState(p.app.Name)
	needed := p.deployed != nil || !prev.ran || p.request != nil || len(prev.failures) > 0 ||
		prev.manifest != p.rendered.Manifest
	if !needed {
		return nil
	}
	if p.request != nil && p.request.DryRun {
		return nil // a dry-run sync reports through Diff, not here
	}
	gated := p.app.SyncPolicy.Automated == nil && p.request == nil
	rep, err := sweep.Run(ctx, p.base, sweep.RunInput{
		Stack:         p.app.Stack,
		Owner:         p.owner,
		Owners:        c.previousOwners(p),
		Current:       p.declared,
		RetainRotated: retainRotated(p.app),
		PruneVolumes:  p.app.SyncPolicy.Automated != nil && p.app.SyncPolicy.Automated.PruneVolumes,
		Failures:      prev.failures,
		DryRun:        gated || !pruneEnabled(p),
	})
	if err != nil {
		return transient("sweep", err)
	}
	c.setSweepState(p.app.Name, sweepState{ran: true, failures: rep.Failures, manifest: p.rendered.Manifest})
	p.status.Sweep = sweepStatus(rep)
	for _, it := range rep.Removed {
		p.log.Info("swept resource the repository no longer declares", "kind", it.Kind, "name", it.Name)
		c.emit(p, events.Pruned, "", "removed "+it.String(), map[string]any{"kind": string(it.Kind), "name": it.Name})
	}
	for _, f := range rep.Stuck() {
		p.log.Error("resource still cannot be removed, retrying every pass", "kind", f.Kind, "name", f.Name, "failures", f.Count, "error", f.Error)
	}
	if rep.OwnStack && !prev.ownStackReported {
		p.log.Warn("not sweeping the controller's own stack")
		c.markOwnStackReported(p.app.Name)
	}
	return nil
}

// previousOwners lists owner stamps that count as this application's in the
// sweep's history walk: the owners of this controller's earlier records of
// the stack, which is how a renamed application keeps proof of what it
// created under its old name.
func (c *Controller) previousOwners(p *pass) []string {
	if p.latest == nil || p.latest.Owner == p.owner {
		return nil
	}
	return []string{p.latest.Owner}
}

func retainRotated(a application.Application) int {
	if a.SyncPolicy.RetainRotated != nil {
		return *a.SyncPolicy.RetainRotated
	}
	return application.DefaultRetainRotated
}

func sweepStatus(rep sweep.Report) *application.SweepStatus {
	st := &application.SweepStatus{DryRun: rep.DryRun, Messages: rep.Messages()}
	if rep.DryRun {
		for _, it := range rep.Plan.Delete {
			st.Pending = append(st.Pending, it.String())
		}
	}
	for _, it := range rep.Removed {
		st.Removed = append(st.Removed, it.String())
	}
	for _, it := range rep.Plan.Unmanaged {
		st.Unmanaged = append(st.Unmanaged, it.String())
	}
	return st
}

// sweepState is what the controller remembers between sweeps of one
// application. Losing it on a restart costs one sweep on the first pass.
type sweepState struct {
	ran              bool
	failures         map[string]int
	manifest         string // the manifest the last sweep compared against
	ownStackReported bool
}

func (c *Controller) sweepState(app string) sweepState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.apps[app]; ok {
		return a.sweep
	}
	return sweepState{}
}

func (c *Controller) setSweepState(app string, s sweepState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.apps[app]; ok {
		s.ownStackReported = a.sweep.ownStackReported
		a.sweep = s
	}
}

func (c *Controller) markOwnStackReported(app string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.apps[app]; ok {
		a.sweep.ownStackReported = true
	}
}
