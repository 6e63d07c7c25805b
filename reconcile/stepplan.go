package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// The plan, observe and gate steps: what the manifest changes against the
// newest release, what runs now, and whether this pass may write.

// errGated ends a pass early without failing it: a manual application that
// was planned and reported but not asked to sync.
var errGated = errors.New("gated")

// plan compares the manifest with the newest release record.
func (c *Controller) plan(ctx context.Context, p *pass) error {
	latest, err := c.latestReleaseIn(ctx, p, p.snapshot)
	if err != nil {
		return transient("plan", err)
	}
	if latest != nil && !c.mayTakeOver(latest.Owner, p.app.Name) {
		return stalled("plan", fmt.Errorf("stack %q is owned by %q, not by this controller (%q)", p.app.Stack, latest.Owner, c.opts.ControllerID))
	}
	p.latest = latest
	p.status.Pinned = ""
	if pinned(latest, p) {
		// A rollback holds while git still points where it pointed then.
		// Automated passes stay on the record; an explicit sync leaves it.
		p.status.Pinned = pinMessage(latest)
		if p.request == nil {
			if err := c.useRecord(ctx, p, latest); err != nil {
				return err
			}
		}
	}
	p.action = charts.Plan(p.rendered.Manifest, p.owner, latest)
	if latest != nil {
		p.status.LastAppliedRevision = latest.Revision
		p.status.SecretRefs = refStatus(latest.SecretRefs)
		p.status.Chart = chartLabel(latest.Chart)
		p.status.Revision = latest.Commit
	}
	return nil
}

// mayTakeOver reports whether a stack recorded as owned by owner may be
// deployed by this controller's application app. Another controller's stack
// never is; another application of this controller's is (a rename hands the
// stack over), since the applications file already refuses two applications
// on one stack.
func (c *Controller) mayTakeOver(owner, app string) bool {
	id, _, ok := splitOwner(owner)
	return ok && id == c.opts.ControllerID
}

// observe reads what runs and records sync and health before anything is
// written, so a pass that fails later still leaves an honest status.
func (c *Controller) observe(ctx context.Context, p *pass) error {
	snap := p.snapshot
	if snap == nil {
		s, err := capability.ReadStacks(ctx, p.base, []string{p.app.Stack})
		snap = &snapshot{stacks: s, err: err}
	}
	c.applyHealth(p, snap)
	switch p.action {
	case charts.Unchanged:
		p.status.Sync = application.Synced
		p.status.SyncReason = application.ReasonNone
	default:
		p.status.Sync = application.OutOfSync
		p.status.SyncReason = application.ReasonGit
	}
	c.publish(p)
	return nil
}

// gate stops a manual application that was not asked to sync: it has been
// planned and reported, and that is all it gets.
func (c *Controller) gate(ctx context.Context, p *pass) error {
	if p.request != nil && p.request.DryRun {
		p.plan = c.dryRunPlan(ctx, p)
		return errGated
	}
	if p.app.SyncPolicy.Automated == nil && p.request == nil {
		// Not applied, but what a sync would remove is still worth showing.
		if err := c.sweepStep(ctx, p); err != nil {
			p.log.Warn("could not work out pending removals", "error", err)
		}
		return errGated
	}
	return c.hold(p)
}
