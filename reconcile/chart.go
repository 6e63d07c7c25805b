package reconcile

import (
	"context"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/sopsage"
)

// renderChart is the render step for an application whose source is a
// chart. It yields the same compose.Rendered the compose renderer does, so
// every later step is the same for both.
//
// A template may use .Release.Revision, the revision being written. Which
// one that is depends on whether anything changes: the chart is rendered as
// the newest recorded revision first, and if that gives the recorded
// manifest nothing is written and the pass is unchanged. Only a manifest
// that differs is rendered again as the next revision. Rendering with the
// next number every time would make a chart that prints its revision
// differ on every pass, and redeploy forever.
func (c *Controller) renderChart(ctx context.Context, p *pass, ids *sopsage.Identities) error {
	latest, err := c.latestReleaseIn(ctx, p.snapshot, p.app.Stack)
	if err != nil {
		return transient("render", err)
	}
	src := p.app.Source
	d := chartengine.Dir{
		Root:       p.rev.Dir,
		Path:       src.Path,
		ValueFiles: src.Chart.ValueFiles,
		Values:     src.Chart.Values,
		Set:        src.Chart.Set,
		Decrypt:    ids.Decrypt,
	}
	chart, err := chartengine.Load(d.Root, d.Path)
	if err != nil {
		return stalled("render", err)
	}
	rel := chartengine.Release{Name: p.app.Stack, Revision: 1}
	if latest != nil {
		rel.Revision = latest.Revision
	}
	r, err := chart.Render(d, rel)
	if err != nil {
		return stalled("render", err)
	}
	if latest != nil && r.Manifest != latest.Manifest {
		rel.Revision++
		if r, err = chart.Render(d, rel); err != nil {
			return stalled("render", err)
		}
	}
	declared, err := compose.Convert(ctx, r.Manifest, p.app.Stack, nil)
	if err != nil {
		return stalled("render", err)
	}
	p.rendered, p.declared = r.Rendered, declared
	p.chart = &charts.ChartRef{Name: r.Chart.Name, Version: r.Chart.Version, AppVersion: r.Chart.AppVersion, ValuesDigest: r.ValuesDigest}
	return nil
}

// chartLabel is how status shows the chart of a release: "" for compose.
func chartLabel(r *charts.ChartRef) string {
	if r == nil {
		return ""
	}
	return r.Name + " " + r.Version + ", values " + r.ValuesDigest
}
