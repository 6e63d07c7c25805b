package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/source"
)

// History returns the application's recorded revisions, newest first, from
// the swarm's release records.
func (c *Controller) History(ctx context.Context, name string) ([]charts.Release, error) {
	app, err := c.application(name)
	if err != nil {
		return nil, err
	}
	b, err := c.backendOf(application.Application{Destination: app.Destination})
	if err != nil {
		return nil, fmt.Errorf("application %q: %w", name, err)
	}
	rs, err := b.Releases(ctx, app.Stack)
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

func (c *Controller) application(name string) (appConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return appConfig{}, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	return appConfig{Stack: a.app.Stack, Destination: a.app.Destination}, nil
}

type appConfig struct{ Stack, Destination string }

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

// useRecord makes a stored record's manifest the pass's manifest.
//
// A record holds no plaintext: secrets appear by name, values decrypted
// with SOPS as sealed placeholders. A compose application's record with
// placeholders is deployed with the values a render of its own commit
// gives, with the key in use now; each placeholder carries a keyed digest
// of its value, so a render that reproduces it reproduces the exact value,
// and one that does not (the key or the application's source changed
// since) refuses the redeploy rather than write a service with something
// else. That render also supplies the plaintext of the record's secrets,
// should a sweep have removed one from the swarm. A record without
// placeholders relies, as before, on its secrets still being on the swarm,
// which rotation retention provides.
//
// A chart application's record is not rendered again (the chart version,
// values commit and store versions it names are not fetched back): its
// placeholders are matched against the renders this controller kept and a
// render of the chart as declared now (chartSealed), and a placeholder
// neither gives refuses the redeploy the same way; its secrets rely on
// retention.
//
// A compose application's record that took values from secret stores is
// rendered again with the versions it names (secretstore.Pinned): a store
// that keeps versions gives the value the revision deployed, even after a
// rotation, so its sealed placeholders match and its secrets can be made
// again if swept. The render's references become the pass's, so the record
// of the rollback lists them with their versions.
func (c *Controller) useRecord(ctx context.Context, p *pass, rec *charts.Release) error {
	// What the record's source declared is what is deployed again: the
	// rollout step then decides its colours, so a rollback goes through
	// the same steps and analysis as a commit.
	manifest := rec.Manifest
	if rec.Desired != "" {
		manifest = rec.Desired
	} else {
		p.asRecorded = strings.Contains(manifest, rollout.LabelPrefix)
	}
	cv, err := p.convert(ctx, manifest)
	if err != nil {
		return stalled("render", fmt.Errorf("revision %d: %w", rec.Revision, err))
	}
	r := &compose.Rendered{Manifest: manifest}
	// Store values are read again at their recorded versions where the
	// record's commit can be rendered as a compose project; a chart's
	// record relies, as before, on retention for its secrets.
	againRefs := len(rec.SecretRefs) > 0 && rec.Commit != "" && p.app.Source.Chart == nil
	need := compose.SealedValues(manifest)
	if p.app.Source.Chart != nil {
		if len(need) > 0 {
			if r.Sealed, err = c.chartSealed(ctx, p, rec, cv.declared, need); err != nil {
				return err
			}
		}
	} else if len(need) > 0 || againRefs {
		at, err := c.renderRecordCommit(ctx, p, rec)
		if err != nil {
			return err
		}
		r.Sealed = make(map[string]string, len(need))
		for _, ph := range need {
			v, ok := at.Sealed[ph]
			if !ok {
				return stalled("render", fmt.Errorf(
					"revision %d holds sealed values (decrypted with SOPS, or environment values and configs read from a secret store) that a render of its commit %s no longer reproduces (the age key, the application's source settings or the store's value changed since): it cannot be redeployed with its exact values",
					rec.Revision, shortCommit(rec.Commit)))
			}
			r.Sealed[ph] = v
		}
		r.Secrets = make(map[string][]byte, len(cv.declared.Secrets))
		for name := range cv.declared.Secrets {
			if data, ok := at.Secrets[name]; ok {
				r.Secrets[name] = data
			}
		}
		// The references whose names the record holds: the same version,
		// so the same value (a store without versions that rotated since
		// names another, and the record's own secret on the swarm serves).
		for _, ref := range at.Refs {
			if recordNames(rec, ref.Name) {
				r.Refs = append(r.Refs, ref)
			}
		}
	}
	p.rendered = r
	p.chart = rec.Chart
	p.use(cv)
	return nil
}

// renderRecordCommit renders the commit a record was made from: the pass's
// own render when it is that commit, otherwise a fetch and render of it.
func (c *Controller) renderRecordCommit(ctx context.Context, p *pass, rec *charts.Release) (*compose.Rendered, error) {
	if rec.Commit == "" {
		return nil, stalled("render", fmt.Errorf("revision %d holds sealed values and names no commit to render them from", rec.Revision))
	}
	var pins map[string]secretstore.Pin
	if p.app.Source.Chart == nil {
		pins = recordPins(rec)
	}
	if p.rendered != nil && p.rev != nil && p.rev.Commit == rec.Commit && len(pins) == 0 {
		return p.rendered, nil
	}
	rev, err := c.opts.Fetcher.Fetch(ctx, source.Request{
		RepoURL:     p.app.Source.RepoURL,
		Revision:    rec.Commit,
		Credentials: p.app.Source.Credentials,
		Path:        p.app.Source.Path,
	})
	if err != nil {
		err = fmt.Errorf("revision %d: fetch its commit %s for its sealed values: %w", rec.Revision, shortCommit(rec.Commit), err)
		return nil, fetchFailed("render", err)
	}
	// The render holds what it needs in memory; the tree may go.
	defer rev.Release()
	p.pins = pins
	defer func() { p.pins = nil }()
	at, _, err := c.renderAt(ctx, p, rev)
	if err != nil {
		return nil, fmt.Errorf("revision %d: render its commit %s for its sealed values: %w", rec.Revision, shortCommit(rec.Commit), err)
	}
	return at, nil
}

// pinned reports whether the newest record is a rollback that still holds:
// git points where it pointed when the rollback was made.
func pinned(latest *charts.Release, p *pass) bool {
	return latest != nil && latest.PinnedCommit != "" && p.rev != nil &&
		latest.PinnedCommit == p.rev.Commit &&
		(latest.PinnedValuesCommit == "" || p.values == nil || latest.PinnedValuesCommit == p.values.Commit)
}

func pinMessage(r *charts.Release) string {
	by := ""
	if strings.HasPrefix(r.Trigger, "rollback") {
		by = " (" + r.Trigger + ")"
	}
	return fmt.Sprintf("rolled back to revision %d (commit %s)%s; automated sync resumes at the next commit or an explicit sync",
		r.Revision, shortCommit(r.Commit), by)
}
