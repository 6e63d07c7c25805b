package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/source"
)

// The render step: the checkout turned into a manifest and converted
// without the swarm.

// render turns the checkout into a manifest and converts it without the
// swarm, so that everything a deploy could object to is found before any
// write.
func (c *Controller) render(ctx context.Context, p *pass) error {
	if err := c.renderPass(ctx, p); err != nil {
		return err
	}
	// The logs' mask needs the values a store without versions cannot
	// give again, and a chart's values, which its records cannot (see
	// seensecrets.go).
	c.seen.note(p.app.Name, p.rendered, seenPerApp(p.app), p.app.Source.Chart != nil)
	return nil
}

// renderPass is the render step's work: a rollback's record, a chart, or
// the compose project at the pass's commit.
func (c *Controller) renderPass(ctx context.Context, p *pass) error {
	if p.request != nil && p.request.Rollback > 0 {
		return c.renderRollback(ctx, p, p.request.Rollback)
	}
	if p.app.Source.Chart != nil {
		ids, err := c.identities(p)
		if err != nil {
			return err
		}
		return c.renderChart(ctx, p, ids)
	}
	r, cv, err := c.renderAt(ctx, p, p.rev)
	if err != nil {
		return err
	}
	p.rendered = r
	p.use(cv)
	return nil
}

// identities are the age identities that decrypt this application's SOPS
// files: its own key, else its project's, else the controller's. An own or
// project key replaces the controller's, so a repository cannot have
// another team's files decrypted by copying them in: they are encrypted to
// a key this application is not given. A pull-request preview has only the
// key its set grants previews, and without one none (nil): a pull request
// could otherwise mount its base's secrets into code of its own. The file
// is read every pass, so a rotated key is picked up.
func (c *Controller) identities(p *pass) (*sopsage.Identities, error) {
	k, field := p.app.SOPSKey()
	if k == nil {
		if p.app.IsPreview() {
			return nil, nil
		}
		return c.opts.SOPS, nil
	}
	ids, err := sopsage.ReadIdentityFile(k.AgeKeyFile)
	if err != nil {
		return nil, transient("render", fmt.Errorf("%s: %w", field, err))
	}
	return ids, nil
}

// renderAt renders the application at rev, or returns what an earlier
// render of the same input gave: same commit, same application settings,
// same key material (see renderCache). What it returns is shared with the
// cache and must not be changed.
func (c *Controller) renderAt(ctx context.Context, p *pass, rev *source.Revision) (*compose.Rendered, converted, error) {
	ids, err := c.identities(p)
	if err != nil {
		return nil, converted{}, err
	}
	key := renderKey(p.app, rev.Commit, ids.Fingerprint(), c.opts.RenderLimits)
	res := c.stores.For(ctx, p.app)
	if p.pins != nil {
		// A recorded revision's versions: neither from the cache nor for it.
		return c.renderWith(ctx, p, rev, ids, res.Pinned(p.pins))
	}
	if e, ok := c.renders.get(p.app.Name, key); ok {
		same, err := sameRefs(res, e.refs)
		if err != nil {
			return nil, converted{}, secretFailed(err)
		}
		if same {
			p.refs = e.refs
			return e.rendered, converted{declared: e.declared}, nil
		}
		res = c.stores.For(ctx, p.app)
	}
	r, cv, err := c.renderWith(ctx, p, rev, ids, res)
	if err != nil {
		return nil, converted{}, err
	}
	c.renders.put(p.app.Name, renderEntry{key: key, rendered: r, declared: cv.declared, steady: &steadyMark{}, refs: p.refs}, c.knownApp)
	return r, cv, nil
}

// renderWith renders the application at rev, resolving store references
// through res, and notes in p what the stores gave.
func (c *Controller) renderWith(ctx context.Context, p *pass, rev *source.Revision, ids *sopsage.Identities, res *secretstore.Resolution) (*compose.Rendered, converted, error) {
	d := compose.Dir{
		SecretRef: secretRefFunc(res),
		Root:      rev.Dir,
		Path:      p.app.Source.Path,
		Files:     p.app.Source.Compose.Files,
		EnvFiles:  p.app.Source.Compose.EnvFiles,
		Decrypt:   ids.Decrypt,
		SealKey:   ids.SealKey(),
		Limits:    c.opts.RenderLimits,
	}
	r, err := c.opts.Render(p.app.Stack, d)
	if err != nil {
		if storeFailure(err) {
			return nil, converted{}, secretFailed(err)
		}
		return nil, converted{}, stalled("render", previewHint(&p.app, partialHint(err, rev)))
	}
	p.refs = res.Used()
	cv, err := p.convert(ctx, r.Manifest)
	if err != nil {
		return nil, converted{}, stalled("render", err)
	}
	return r, cv, nil
}

// partialHint says, on a failure to read a tree that holds only the
// application's path, why files outside it are missing.
func partialHint(err error, rev *source.Revision) error {
	if rev == nil || rev.Partial == "" {
		return err
	}
	return fmt.Errorf("%w (the repository's tree is over the git tree budget, so only %s was written: files outside it are absent)", err, rev.Partial)
}

// previewHint says, when a pull-request preview meets a SOPS file it has no
// key for, that this is by design and where the key would come from.
func previewHint(a *application.Application, err error) error {
	if !a.IsPreview() || !errors.Is(err, sopsage.ErrNoIdentity) {
		return err
	}
	return fmt.Errorf("%w (a pull-request preview decrypts only with the key its set grants under applicationSets[%d].preview.sops)", err, a.Generated.Index)
}
