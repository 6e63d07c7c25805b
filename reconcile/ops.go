package reconcile

import (
	"context"
	"fmt"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// History returns the application's recorded revisions, newest first, from
// the swarm's release records.
func (c *Controller) History(ctx context.Context, name string) ([]charts.Release, error) {
	app, err := c.application(name)
	if err != nil {
		return nil, err
	}
	rs, err := c.opts.Backend.Releases(ctx, app.Stack)
	if err != nil {
		return nil, fmt.Errorf("application %q: read history: %w", name, err)
	}
	return rs, nil
}

// Rollback queues a pass that redeploys the manifest of a recorded revision
// and records it as a new revision pinned to the commit git points at now.
// An automated application then stays on it until a new commit arrives or
// an explicit sync clears it.
func (c *Controller) Rollback(name string, revision int, by string) (<-chan Result, error) {
	if revision < 1 {
		return nil, fmt.Errorf("application %q: rollback: revision must be 1 or more", name)
	}
	return c.enqueue(name, SyncRequest{By: by, Rollback: revision})
}

// RequestSyncWith queues an explicit sync with options (prune, dry run, a
// pinned revision).
func (c *Controller) RequestSyncWith(name string, req SyncRequest) (<-chan Result, error) {
	req.Rollback = 0
	return c.enqueue(name, req)
}

func (c *Controller) enqueue(name string, req SyncRequest) (<-chan Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return nil, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	req.done = make(chan Result, 1)
	a.pending = append(a.pending, &req)
	c.poke()
	return req.done, nil
}

func (c *Controller) application(name string) (appConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return appConfig{}, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	return appConfig{Stack: a.app.Stack}, nil
}

type appConfig struct{ Stack string }

// renderRollback makes the pass deploy a recorded revision's manifest.
func (c *Controller) renderRollback(ctx context.Context, p *pass, revision int) error {
	rs, err := p.backend.Releases(ctx, p.app.Stack)
	if err != nil {
		return transient("render", fmt.Errorf("read history: %w", err))
	}
	for i := range rs {
		if rs[i].Revision == revision {
			p.rollbackOf = &rs[i]
			return c.useRecord(ctx, p, &rs[i])
		}
	}
	return stalled("render", fmt.Errorf("rollback: revision %d is not in the kept history of %s", revision, p.app.Stack))
}

// useRecord makes a stored record's manifest the pass's manifest. Its
// secrets' plaintext is not stored anywhere, so a deploy of it relies on
// the secrets still being on the swarm, which rotation retention provides.
func (c *Controller) useRecord(ctx context.Context, p *pass, rec *charts.Release) error {
	declared, err := compose.Convert(ctx, rec.Manifest, p.app.Stack, nil)
	if err != nil {
		return stalled("render", fmt.Errorf("revision %d: %w", rec.Revision, err))
	}
	p.rendered = &compose.Rendered{Manifest: rec.Manifest}
	p.chart = rec.Chart
	p.declared = declared
	return nil
}

// pinned reports whether the newest record is a rollback that still holds:
// git points where it pointed when the rollback was made.
func pinned(latest *charts.Release, p *pass) bool {
	return latest != nil && latest.PinnedCommit != "" && p.rev != nil &&
		latest.PinnedCommit == p.rev.Commit
}

func pinMessage(r *charts.Release) string {
	return fmt.Sprintf("rolled back to revision %d (commit %s); automated sync resumes at the next commit or an explicit sync",
		r.Revision, shortCommit(r.Commit))
}
