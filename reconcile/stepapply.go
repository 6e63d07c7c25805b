package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
)

// The apply and confirm steps: the deploy, its release record, and the
// plan again afterwards.

// apply deploys a changed manifest and records the revision. An unchanged
// plan writes nothing at all.
func (c *Controller) apply(ctx context.Context, p *pass) error {
	if p.action == charts.Unchanged {
		return nil
	}
	if !p.waved {
		if err := c.beginSync(ctx, p); err != nil || p.action == charts.Unchanged {
			return err
		}
		manifest, err := p.serviceManifest()
		if err != nil {
			return stalled("apply", err)
		}
		// Hook jobs are not part of it: the hook steps run them.
		res, err := p.backend.DeployStack(ctx, charts.DeployRequest{
			Stack:    p.app.Stack,
			Manifest: manifest,
			Secrets:  p.rendered.Secrets,
			Sealed:   p.rendered.Sealed,
			Labels:   p.deployLabels(p.latestRevision() + 1),
			Adopt:    p.app.Adopt,
			// The render's conversion, when the manifest is the rendered
			// one (no hook jobs taken out).
			Conversion: p.conversion,
		})
		if err != nil {
			// The daemon's InvalidArgument is bad input too: the same
			// manifest would be refused again, so wait for a new commit.
			return deployError("apply", err)
		}
		p.deployed = &res
	}
	next := p.latestRevision() + 1
	rec := charts.Release{
		Name:     p.app.Stack,
		Revision: next,
		Owner:    p.owner,
		Manifest: p.rendered.Manifest,
		Desired:  p.uncoloured,
		Commit:   p.rev.Commit,
		Author:   p.rev.Author,
		Message:  p.rev.Message,
		Time:     c.now(),
		Trigger:  TriggerAutomated,
		Chart:    p.chart,
		Set:      setRef(p.app),
	}
	if p.request == nil && pinned(p.latest, p) {
		// A rollback's rollout goes on under its pin: each step's record
		// is still that rollback, of the same commit, pinned the same.
		l := p.latest
		rec.Commit, rec.Author, rec.Message, rec.Trigger = l.Commit, l.Author, l.Message, l.Trigger
		rec.PinnedCommit, rec.PinnedValuesCommit = l.PinnedCommit, l.PinnedValuesCommit
	}
	rotated := c.recordRefs(p, &rec)
	if p.request != nil {
		rec.Trigger = TriggerSync
		if p.request.Rollback > 0 {
			rec.Trigger = fmt.Sprintf("rollback to revision %d", p.request.Rollback)
			rec.Commit, rec.Author, rec.Message = p.rollbackOf.Commit, p.rollbackOf.Author, p.rollbackOf.Message
			rec.PinnedCommit = p.rev.Commit
			if p.values != nil {
				rec.PinnedValuesCommit = p.values.Commit
			}
		}
		if p.request.By != "" {
			rec.Trigger += " by " + p.request.By
		}
	}
	if rotated != "" {
		// The cause is the rotation when the commit stayed; with a new
		// commit as well, the rotation is added to the ordinary cause.
		if rec.Trigger == TriggerAutomated && p.latest != nil && p.latest.Commit == rec.Commit {
			rec.Trigger = rotated
		} else {
			rec.Trigger += "; " + rotated
		}
	}
	return c.record(ctx, p, rec)
}

// checkLatest makes sure, right before the first write, that the record the
// pass planned against is still the swarm's newest, and plans again when it
// is not: the next revision number is taken from the swarm, not from memory.
func (c *Controller) checkLatest(ctx context.Context, p *pass) error {
	fresh, err := capability.LatestRelease(ctx, p.base, p.app.Stack, p.latest)
	if err != nil {
		return transient("apply", fmt.Errorf("check the newest release record: %w", err))
	}
	if fresh == p.latest {
		return nil
	}
	c.forgetRelease(destination(p.app), p.app.Stack)
	if fresh != nil && !c.mayTakeOver(fresh.Owner, p.app.Name) {
		return stalled("apply", fmt.Errorf("stack %q is owned by %q, not by this controller (%q)", p.app.Stack, fresh.Owner, c.opts.ControllerID))
	}
	p.latest = fresh
	p.action = charts.Plan(p.rendered.Manifest, p.owner, fresh)
	if p.action == charts.Unchanged {
		// Another writer deployed and recorded this very manifest since
		// the plan: nothing is left to do, and the status says so.
		p.log.Info("the manifest was recorded meanwhile by another writer; nothing to deploy", "revision", fresh.Revision)
		p.status.Sync, p.status.SyncReason = application.Synced, application.ReasonNone
		p.status.LastAppliedRevision, p.status.Revision = fresh.Revision, fresh.Commit
	}
	return nil
}

// record stores the revision apply deployed. The swarm keeps the record, so
// nothing is cached here: confirm reads it back. A revision number another
// writer took first (two controllers during a start-first update, or one
// that read the same history) is never overwritten: the history is read
// again, and the deploy either turns out to be what that writer recorded or
// is planned and applied once more under the next number.
func (c *Controller) record(ctx context.Context, p *pass, rec charts.Release) error {
	err := p.backend.RecordRelease(ctx, rec, p.app.History)
	c.forgetRelease(destination(p.app), p.app.Stack)
	if errors.Is(err, charts.ErrRecordExists) {
		return c.recordTaken(ctx, p, rec, err)
	}
	if err != nil {
		return transient("record", err)
	}
	p.recorded = &rec
	p.log.Info("deployed revision", "revision", rec.Revision, "commit", shortCommit(p.rev.Commit),
		"created", len(p.deployed.Created), "updated", len(p.deployed.Updated), "unchanged", len(p.deployed.Unchanged), "writes", p.deployed.Writes)
	return nil
}

// recordTaken handles a revision number found taken when recording rec.
func (c *Controller) recordTaken(ctx context.Context, p *pass, rec charts.Release, taken error) error {
	latest, err := c.readLatestRelease(ctx, p)
	if err != nil {
		return transient("record", fmt.Errorf("%w; re-reading the history failed: %w", taken, err))
	}
	if latest != nil && charts.Plan(rec.Manifest, rec.Owner, latest) == charts.Unchanged {
		// The other writer recorded this very manifest for this owner:
		// the deploy and the record agree, so there is nothing to add.
		p.log.Warn("revision was recorded meanwhile by another writer with the same manifest; keeping that record", "revision", latest.Revision)
		p.recorded = latest
		return nil
	}
	p.lostRecordRace++
	if latest == nil || p.lostRecordRace > 1 {
		return transient("record", fmt.Errorf("revision %d of %s: %w", rec.Revision, p.app.Stack, taken))
	}
	if !c.mayTakeOver(latest.Owner, p.app.Name) {
		return stalled("record", fmt.Errorf("stack %q was recorded meanwhile as owned by %q, not by this controller (%q)", p.app.Stack, latest.Owner, c.opts.ControllerID))
	}
	p.log.Warn("revision number was taken by another writer; deploying again under the next one",
		"revision", rec.Revision, "newest", latest.Revision, "owner", latest.Owner)
	p.latest = latest
	p.action = charts.Plan(p.rendered.Manifest, p.owner, latest)
	// Another manifest was deployed meanwhile: deploy this one whole again.
	p.waved = false
	return c.apply(ctx, p)
}

// confirm plans again after a deploy. A release that still differs right
// after its own deploy is reported rather than redeployed in a loop.
func (c *Controller) confirm(ctx context.Context, p *pass) error {
	if p.recorded == nil && p.healed == nil {
		c.joinReadBacks(ctx, p)
		return nil
	}
	// Health after a write is read fresh: the batch snapshot predates it.
	// The read does not depend on the record's, so both are made at once,
	// if the sweep did not start it already.
	health := p.healthRead
	if health == nil {
		health = readStackAsync(ctx, p)
	}
	// The checks of what the daemon kept run while these reads are made;
	// their report joins the status before the pass publishes it.
	defer c.joinReadBacks(ctx, p)
	if p.recorded != nil {
		// Read back from the swarm, not from memory: a record write that
		// was acknowledged and lost, or one another writer replaced,
		// must fail the pass rather than report it Synced.
		latest, err := c.readLatestRelease(ctx, p)
		if err != nil {
			return transient("confirm", fmt.Errorf("read back revision %d: %w", p.recorded.Revision, err))
		}
		switch {
		case latest == nil:
			return transient("confirm", fmt.Errorf("release %s has no record on the swarm right after revision %d was recorded", p.app.Stack, p.recorded.Revision))
		case latest.Revision != p.recorded.Revision:
			return transient("confirm", fmt.Errorf("the newest record of release %s is revision %d of %s, not revision %d recorded by this pass", p.app.Stack, latest.Revision, latest.Owner, p.recorded.Revision))
		}
		if a := charts.Plan(p.rendered.Manifest, p.owner, latest); a != charts.Unchanged {
			return transient("confirm", fmt.Errorf("release %s still plans as %s right after revision %d was recorded", p.app.Stack, a, p.recorded.Revision))
		}
		p.status.Sync = application.Synced
		p.status.SyncReason = application.ReasonNone
		p.status.Revision = p.recorded.Commit
		p.status.LastAppliedRevision = p.recorded.Revision
		p.status.SecretRefs = refStatus(p.recorded.SecretRefs)
		p.status.Chart = chartLabel(p.recorded.Chart)
		p.status.LastSyncTime = c.now()
		p.status.Pinned = ""
		if p.recorded.PinnedCommit != "" {
			p.status.Pinned = pinMessage(p.recorded)
		}
		c.emit(p, events.SyncSucceeded, "", fmt.Sprintf("revision %d deployed (%s)", p.recorded.Revision, p.recorded.Trigger), nil)
		c.reportRolloutSteps(p)
	}
	r := <-health
	snap := &snapshot{stacks: map[string][]charts.ServiceState{}, err: r.err}
	if r.trusted {
		snap.stacks[p.app.Stack] = r.states
	}
	c.applyHealth(p, snap)
	return nil
}
