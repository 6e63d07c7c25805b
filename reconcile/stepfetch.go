package reconcile

import (
	"context"

	"github.com/flotilla-gitops/flotilla/source"
)

// The fetch step: the application's revision, resolved and checked out.

// fetch resolves the application's revision to a commit and its tree.
func (c *Controller) fetch(ctx context.Context, p *pass) error {
	if err := c.fetchSource(ctx, p); err != nil {
		return err
	}
	return c.fetchValues(ctx, p)
}

func (c *Controller) fetchSource(ctx context.Context, p *pass) error {
	if p.app.Source.FromRepository() {
		return c.fetchChart(ctx, p)
	}
	revision := p.app.Source.Revision
	if p.request != nil && p.request.Revision != "" {
		revision = p.request.Revision
	}
	began := c.now()
	rev, err := c.opts.Fetcher.Fetch(ctx, source.Request{
		RepoURL:     p.app.Source.RepoURL,
		Revision:    revision,
		Credentials: p.app.Source.Credentials,
		Path:        p.app.Source.Path,
	})
	c.opts.Metrics.ObserveGitFetch(p.app.Source.RepoURL, c.now().Sub(began), err)
	if err != nil {
		if c.rollbackWithoutSource(ctx, p, err) {
			return nil
		}
		return fetchFailed("fetch", err)
	}
	p.rev = rev
	p.status.SeenRevision = rev.Commit
	return nil
}
