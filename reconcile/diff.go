package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/sweep"
)

// Diff is what separates the repository from the swarm for one application.
type Diff struct {
	App string
	// Revision is the commit the repository declares now; Deployed the one
	// of the newest release record.
	Revision, Deployed string
	Action             charts.Action
	Services           []ServiceDiff
	// Manifest is a unified diff from the deployed manifest to the
	// declared one, empty when they are equal.
	Manifest        string
	PendingRemovals []string
	Unavailable     []string
	// Notes are the status's warnings about the same services: one that
	// does not settle, a field the daemon does not keep.
	Notes []string
	// Chart and DeployedChart are the chart, version and values digest
	// the repository declares now and the newest record was rendered
	// from; nil for compose.
	Chart, DeployedChart *charts.ChartRef
}

// Service changes beyond create, update, drift and remove.
const (
	changeRolledBack = "rolledBack"
	changeUpdating   = "updating"
	changeNotKept    = "notKept"
)

// ServiceDiff is one service's difference. Change is create, update (the
// repository changed it), drift (the swarm changed), remove, or one of the
// states the status reports too: rolledBack (Swarm reverted a failed update;
// Fields show what it left, which is not healed), updating (in motion within
// what its update config allows; not compared yet) and notKept (fields the
// daemon did not keep after a write; not rewritten).
type ServiceDiff struct {
	Name   string
	Change string
	Fields []drift.Change
}

// Diff fetches and renders the application and compares it, without
// writing anything, with the newest record (the manifest text) and with the
// swarm (service by service, field by field, and what a prune would remove).
// Without LiveDrift the per-service comparison is listed as unavailable.
func (c *Controller) Diff(ctx context.Context, name string) (Diff, error) {
	app, err := c.appNamed(name)
	if err != nil {
		return Diff{}, err
	}
	p, err := c.planOnly(ctx, app)
	defer func() { p.rev.Release(); p.values.Release() }()
	if err != nil {
		return Diff{}, err
	}
	d := Diff{App: name, Revision: p.rev.Commit, Chart: p.chart, Action: p.action, Unavailable: c.unavailable(p.base)}
	old := ""
	if p.latest != nil {
		d.Deployed, d.DeployedChart, old = p.latest.Commit, p.latest.Chart, p.latest.Manifest
	}
	if d.Manifest, err = manifestDiff(old, p.rendered.Manifest, "deployed", "declared"); err != nil {
		return Diff{}, err
	}

	if err := c.liveChanges(ctx, p, &d); err != nil {
		return Diff{}, err
	}
	return d, nil
}

// liveChanges adds to d what applying the pass's manifest would change on
// the swarm: service by service, field by field, and what a prune would
// remove. It only reads; Diff and a dry-run sync share it, so a preview and
// the diff never disagree.
func (c *Controller) liveChanges(ctx context.Context, p *pass, d *Diff) error {
	app := p.app
	cmp, ok, err := readComparison(ctx, p, nil)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	// Task counts, as the status's observation has them: a global
	// service's allowance to settle depends on how many nodes run it.
	if p.snapshot == nil {
		if states, trusted, _ := capability.ReadStack(ctx, p.backend, app.Stack); trusted {
			p.snapshot = &snapshot{stacks: map[string][]charts.ServiceState{app.Stack: states}}
		}
	}
	kind := "update"
	if p.action == charts.Unchanged {
		kind = "drift"
	}
	for _, v := range compareServices(c.compareInput(p, cmp)) {
		switch v.verdict {
		case verdictMissing:
			d.Services = append(d.Services, ServiceDiff{Name: v.short, Change: "create"})
		case verdictDrifted:
			d.Services = append(d.Services, ServiceDiff{Name: v.short, Change: kind, Fields: v.changes})
		case verdictRolledBack:
			d.Services = append(d.Services, ServiceDiff{Name: v.short, Change: changeRolledBack, Fields: v.changes})
		case verdictUpdating:
			d.Services = append(d.Services, ServiceDiff{Name: v.short, Change: changeUpdating})
		case verdictSynced:
		}
		if len(v.notKept) > 0 {
			d.Services = append(d.Services, ServiceDiff{Name: v.short, Change: changeNotKept, Fields: v.notKept})
		}
		if v.notSettling != "" {
			d.Notes = append(d.Notes, v.notSettling)
		}
		d.Notes = append(d.Notes, v.notKeptNotes...)
	}
	rep, err := sweep.Run(ctx, p.backend, sweep.RunInput{
		Stack: app.Stack, Owner: p.owner, Owners: c.previousOwners(p), Current: p.declared,
		RetainRotated: retainRotated(app), DryRun: true,
	})
	if err != nil {
		return fmt.Errorf("pending removals: %w", err)
	}
	for _, it := range rep.Plan.Delete {
		d.PendingRemovals = append(d.PendingRemovals, it.String())
		if it.Kind == sweep.KindService {
			d.Services = append(d.Services, ServiceDiff{Name: strings.TrimPrefix(it.Name, app.Stack+"_"), Change: "remove"})
		}
	}
	return nil
}

func (c *Controller) appNamed(name string) (application.Application, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return application.Application{}, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	return a.app, nil
}

// planOnly runs the steps of a pass that write nothing (fetch, render,
// plan). The caller releases the pass's trees, even after an error.
func (c *Controller) planOnly(ctx context.Context, app application.Application) (*pass, error) {
	p := &pass{app: app, owner: c.opts.ControllerID + "/" + app.Name, log: c.log.With("app", app.Name)}
	b, err := c.backendOf(app)
	if err != nil {
		return p, err
	}
	p.base, p.backend = b, b
	for _, s := range []step{{name: "fetch", run: (*Controller).fetch}, {name: "render", run: (*Controller).render}, {name: "plan", run: (*Controller).plan}} {
		if err := s.run(c, ctx, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Sides of a revision diff (DiffRevision).
const (
	// AgainstDeclared compares a record with what the repository declares
	// now.
	AgainstDeclared = "declared"
	// AgainstDeployed compares the newest record with an older one: what a
	// rollback to it would change.
	AgainstDeployed = "deployed"
)

// DiffRevision compares the manifest of recorded revision with another
// manifest, by text only: with the one the repository declares now
// (against AgainstDeclared; the record is the old side), or with the newest
// record's (AgainstDeployed; the newest is the old side, so the diff reads
// as what a rollback to revision would do). Records hold no plaintext, and
// the sealed placeholders they do hold read "***".
func (c *Controller) DiffRevision(ctx context.Context, name string, revision int, against string) (Diff, error) {
	app, err := c.appNamed(name)
	if err != nil {
		return Diff{}, err
	}
	if against != AgainstDeclared && against != AgainstDeployed {
		return Diff{}, fmt.Errorf("application %q: diff against %q: want %q or %q", name, against, AgainstDeclared, AgainstDeployed)
	}
	b, err := c.backendOf(app)
	if err != nil {
		return Diff{}, err
	}
	rs, err := b.Releases(ctx, app.Stack)
	if err != nil {
		return Diff{}, fmt.Errorf("application %q: read history: %w", name, err)
	}
	var rec *charts.Release
	for i := range rs {
		if rs[i].Revision == revision {
			rec = &rs[i]
		}
	}
	if rec == nil {
		return Diff{}, fmt.Errorf("application %q: revision %d is not in the kept history of %s: %w", name, revision, app.Stack, ErrNoRevision)
	}
	label := fmt.Sprintf("revision %d", revision)
	d := Diff{App: name}
	if against == AgainstDeployed {
		newest := latestRecord(rs)
		d.Revision, d.Chart = rec.Commit, rec.Chart
		d.Deployed, d.DeployedChart = newest.Commit, newest.Chart
		d.Manifest, err = manifestDiff(newest.Manifest, rec.Manifest, fmt.Sprintf("deployed (revision %d)", newest.Revision), label)
		return d, err
	}
	p, err := c.planOnly(ctx, app)
	defer func() { p.rev.Release(); p.values.Release() }()
	if err != nil {
		return Diff{}, err
	}
	d.Revision, d.Chart, d.Action = p.rev.Commit, p.chart, p.action
	d.Deployed, d.DeployedChart = rec.Commit, rec.Chart
	d.Manifest, err = manifestDiff(rec.Manifest, p.rendered.Manifest, label, "declared")
	return d, err
}

// latestRecord is the record with the highest revision of a non-empty list.
func latestRecord(rs []charts.Release) *charts.Release {
	n := &rs[0]
	for i := range rs {
		if rs[i].Revision > n.Revision {
			n = &rs[i]
		}
	}
	return n
}

// manifestDiff is the unified diff from old to new, empty when they are
// equal. It is computed on the text as stored, so a sealed value that
// changed still shows as a changed line, and then every sealed placeholder
// reads "***": its digest is nobody's business.
func manifestDiff(old, new, from, to string) (string, error) {
	if old == new {
		return "", nil
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(old), B: difflib.SplitLines(new),
		FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		return "", fmt.Errorf("diff manifests: %w", err)
	}
	if sealed := compose.SealedValues(text); len(sealed) > 0 {
		pairs := make([]string, 0, 2*len(sealed))
		for _, v := range sealed {
			pairs = append(pairs, v, redact.Mark)
		}
		text = strings.NewReplacer(pairs...).Replace(text)
	}
	return text, nil
}

// dryRunPlan works out what the pass would write and remove, for the
// answer of a dry-run sync; it never fails the pass.
func (c *Controller) dryRunPlan(ctx context.Context, p *pass) *Diff {
	d := &Diff{App: p.app.Name, Revision: p.rev.Commit, Chart: p.chart, Action: p.action, Unavailable: c.unavailable(p.base)}
	old := ""
	if p.latest != nil {
		d.Deployed, d.DeployedChart, old = p.latest.Commit, p.latest.Chart, p.latest.Manifest
	}
	var err error
	if d.Manifest, err = manifestDiff(old, p.rendered.Manifest, "deployed", "declared"); err == nil {
		err = c.liveChanges(ctx, p, d)
	}
	if err != nil {
		d.Unavailable = append(d.Unavailable, "plan: "+redact.Text(err.Error()))
	}
	return d
}
