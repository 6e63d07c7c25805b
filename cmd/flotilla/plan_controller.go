package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// controllerPlan makes the plan of a pull request comment in the format of
// `flotilla plan --format markdown`: the controller (package daemon) posts
// it, and this command owns the format, so both read the same. A deploy's
// plan compares the record it wrote with the one before, so it says what
// the deploy changed however late it is asked; a failed sync's plan is the
// controller's diff of the repository with the swarm (what a sync would
// change, and what the sweep would remove), since nothing was recorded.
func controllerPlan(ctl *reconcile.Controller) func(ctx context.Context, app, commit string, deployed bool) (string, error) {
	return func(ctx context.Context, app, commit string, deployed bool) (string, error) {
		var stack string
		for _, a := range ctl.Applications() {
			if a.Name == app {
				stack = a.Stack
			}
		}
		if stack == "" {
			return "", fmt.Errorf("application %q is no longer configured", app)
		}
		var p appPlan
		var err error
		if deployed {
			p, err = deployPlan(ctx, ctl, app, stack, commit)
		} else {
			p, err = pendingPlan(ctx, ctl, app)
		}
		if err != nil {
			return "", err
		}
		if st, ok := ctl.Status(app); ok {
			for _, d := range st.Drift {
				p.Notes = append(p.Notes, fmt.Sprintf("live drift on %s: %s is %s on the swarm, %s in git", d.Service, d.Field, d.Live, d.Desired))
			}
		}
		var b bytes.Buffer
		printPlanMarkdown(&b, []appPlan{p}, shortSHA(commit))
		return b.String(), nil
	}
}

// deployPlan compares the newest record of commit with the record before
// it (nothing, for a first deploy).
func deployPlan(ctx context.Context, ctl *reconcile.Controller, app, stack, commit string) (appPlan, error) {
	hist, err := ctl.History(ctx, app)
	if err != nil {
		return appPlan{}, fmt.Errorf("application %q: history: %w", app, err)
	}
	var rec *charts.Release
	for i := range hist {
		if hist[i].Commit == commit && (rec == nil || hist[i].Revision > rec.Revision) {
			rec = &hist[i]
		}
	}
	if rec == nil {
		return appPlan{}, fmt.Errorf("application %q: no record of commit %s", app, shortSHA(commit))
	}
	var prev *charts.Release
	for i := range hist {
		if hist[i].Revision < rec.Revision && (prev == nil || hist[i].Revision > prev.Revision) {
			prev = &hist[i]
		}
	}
	after, err := compose.Convert(ctx, rec.Manifest, stack, nil)
	if err != nil {
		return appPlan{}, fmt.Errorf("application %q: convert revision %d: %w", app, rec.Revision, err)
	}
	before := &compose.Stack{Namespace: stack}
	against := "nothing deployed before"
	if prev != nil {
		against = fmt.Sprintf("revision %d (%s)", prev.Revision, shortSHA(prev.Commit))
		if before, err = compose.Convert(ctx, prev.Manifest, stack, nil); err != nil {
			return appPlan{}, fmt.Errorf("application %q: convert revision %d: %w", app, prev.Revision, err)
		}
	}
	return appPlan{App: app, Against: against, Services: compareStacks(before, after)}, nil
}

// pendingPlan is the controller's diff: what a sync of the repository's
// revision would change on the swarm, and what the sweep would remove.
func pendingPlan(ctx context.Context, ctl *reconcile.Controller, app string) (appPlan, error) {
	d, err := ctl.Diff(ctx, app)
	if err != nil {
		return appPlan{}, fmt.Errorf("application %q: diff: %w", app, err)
	}
	p := appPlan{App: app, Against: "the swarm (nothing deployed yet)"}
	if d.Deployed != "" {
		p.Against = "the swarm (deployed " + shortSHA(d.Deployed) + ")"
	}
	for _, s := range d.Services {
		p.Services = append(p.Services, servicePlan{Name: s.Name, Change: s.Change, Fields: s.Fields})
	}
	for _, r := range d.PendingRemovals {
		p.Notes = append(p.Notes, "the sweep would remove "+r)
	}
	p.Notes = append(p.Notes, d.Notes...)
	for _, u := range d.Unavailable {
		p.Notes = append(p.Notes, "unavailable: "+u)
	}
	return p, nil
}
