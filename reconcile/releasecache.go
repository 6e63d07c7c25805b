package reconcile

import (
	"context"
	"fmt"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// The release cache: each stack's newest release record, kept between
// passes (a pass that writes one replaces it), so a steady pass reads only
// the record's head from the swarm, not its whole history.

// latestRelease returns the newest record of stack. The copy this controller
// keeps is checked against the swarm on every call (capability.LatestRelease:
// one small read with ReleaseHead, the whole history without), so a record
// deleted by hand or written by another controller is planned against on the
// next pass, never hidden by memory. When that check cannot be made the copy
// is returned as it is; apply never writes on it unchecked.
func (c *Controller) latestRelease(ctx context.Context, p *pass) (*charts.Release, error) {
	return c.latestReleaseIn(ctx, p, nil)
}

// latestReleaseIn is latestRelease within a batch: the check of the kept
// copy is the batch's one check of every application's (snapshot.isHead)
// when it vouches for it, which is at most as old as the batch; apply checks
// again on its own before it writes.
func (c *Controller) latestReleaseIn(ctx context.Context, p *pass, snap *snapshot) (*charts.Release, error) {
	stack, key := p.app.Stack, relKey{destination(p.app), p.app.Stack}
	c.relMu.Lock()
	known := c.releases[key]
	c.relMu.Unlock()
	if snap.isHead(ctx, c, stack, known) {
		return known, nil
	}
	r, err := capability.LatestRelease(ctx, p.base, stack, known)
	if err != nil && known != nil {
		// The pass may still plan from the record last read, so that it
		// observes and reports what it can; apply checks the swarm again
		// before it writes anything.
		c.log.Warn("could not check the newest release record against the swarm; planning from the one last read",
			"stack", stack, "revision", known.Revision, "error", err)
		return known, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release records: %w", err)
	}
	if known != nil && r != known && (r == nil || r.Revision != known.Revision || r.Version != known.Version) {
		newest := "none"
		if r != nil {
			newest = fmt.Sprintf("revision %d of %s", r.Revision, r.Owner)
		}
		c.log.Warn("release records changed on the swarm since this controller read them; planning against the swarm's",
			"stack", stack, "revision", known.Revision, "newest", newest)
	}
	c.relMu.Lock()
	c.releases[key] = r
	c.relMu.Unlock()
	return r, nil
}

// readLatestRelease reads the newest record of the pass's stack from the
// swarm, never from memory, and keeps it for the next latestRelease.
func (c *Controller) readLatestRelease(ctx context.Context, p *pass) (*charts.Release, error) {
	c.forgetRelease(destination(p.app), p.app.Stack)
	return c.latestRelease(ctx, p)
}

func (c *Controller) forgetRelease(dest, stack string) {
	c.relMu.Lock()
	delete(c.releases, relKey{dest, stack})
	c.relMu.Unlock()
}

// relKey names a stack on a swarm: the same stack name on two swarms is two
// releases.
type relKey struct{ dest, stack string }
