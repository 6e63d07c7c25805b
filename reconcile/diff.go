package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/drift"
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
	c.mu.Lock()
	a, ok := c.apps[name]
	if !ok {
		c.mu.Unlock()
		return Diff{}, fmt.Errorf("application %q: %w", name, ErrNotFound)
	}
	app := a.app
	c.mu.Unlock()

	p := &pass{app: app, owner: c.opts.ControllerID + "/" + app.Name, log: c.log.With("app", app.Name)}
	p.backend = c.opts.Backend
	defer func() { p.rev.Release(); p.values.Release() }()
	for _, s := range []step{{"fetch", (*Controller).fetch}, {"render", (*Controller).render}, {"plan", (*Controller).plan}} {
		if err := s.run(c, ctx, p); err != nil {
			return Diff{}, err
		}
	}
	d := Diff{App: name, Revision: p.rev.Commit, Chart: p.chart, Action: p.action, Unavailable: c.unavailable()}
	old := ""
	if p.latest != nil {
		d.Deployed, d.DeployedChart, old = p.latest.Commit, p.latest.Chart, p.latest.Manifest
	}
	if old != p.rendered.Manifest {
		text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(old), B: difflib.SplitLines(p.rendered.Manifest),
			FromFile: "deployed", ToFile: "declared", Context: 3,
		})
		if err != nil {
			return Diff{}, fmt.Errorf("diff manifests: %w", err)
		}
		d.Manifest = text
	}

	cmp, ok, err := readComparison(ctx, p)
	if err != nil {
		return Diff{}, err
	}
	if !ok {
		return d, nil
	}
	// Task counts, as the status's observation has them: a global
	// service's allowance to settle depends on how many nodes run it.
	if states, trusted, _ := capability.ReadStack(ctx, p.backend, app.Stack); trusted {
		p.snapshot = &snapshot{stacks: map[string][]charts.ServiceState{app.Stack: states}}
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
		return Diff{}, fmt.Errorf("pending removals: %w", err)
	}
	for _, it := range rep.Plan.Delete {
		d.PendingRemovals = append(d.PendingRemovals, it.String())
		if it.Kind == sweep.KindService {
			d.Services = append(d.Services, ServiceDiff{Name: strings.TrimPrefix(it.Name, app.Stack+"_"), Change: "remove"})
		}
	}
	return d, nil
}
