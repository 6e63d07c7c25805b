package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/source"
)

// ChartFetcher fetches a chart from a chart repository: the newest version
// matching a constraint, unpacked. *chartrepo.Client implements it.
type ChartFetcher interface {
	Fetch(ctx context.Context, req chartrepo.Request) (*chartrepo.Chart, error)
}

// fetchChart is the fetch step of an application whose chart comes from a
// chart repository. The resolved version stands in for a commit,
// "<name>@<version>": a newly published version that matches the
// constraint is a new commit, deployed and recorded like one, and a
// rollback stays pinned until the repository resolves to another version.
//
// A rollback needs no chart, only its record, so a rollback asked for while
// the repository is unreachable goes ahead with the version the newest
// record says the repository resolved to (unless its sealed values need a
// render, see chartSealed).
func (c *Controller) fetchChart(ctx context.Context, p *pass) error {
	ch := p.app.Source.Chart
	if c.opts.Charts == nil {
		return stalled("fetch", fmt.Errorf("chart %s from %s: this controller has no chart repository client", ch.Name, ch.RepoURL))
	}
	req := chartrepo.Request{RepoURL: ch.RepoURL, Name: ch.Name, Version: ch.Version, Insecure: ch.Insecure}
	if cr := ch.Credentials; cr != nil {
		req.Credentials = &chartrepo.Credentials{UsernameFile: cr.UsernameFile, PasswordFile: cr.PasswordFile, TokenFile: cr.TokenFile}
	}
	got, err := c.opts.Charts.Fetch(ctx, req)
	if err != nil {
		if c.rollbackWithoutSource(ctx, p, err) {
			return nil
		}
		for _, bad := range []error{chartrepo.ErrNoVersion, chartrepo.ErrBadIndex, chartrepo.ErrDigest, chartrepo.ErrBadArchive, chartrepo.ErrTooLarge, chartrepo.ErrInsecure, chartengine.ErrInvalidChart} {
			if errors.Is(err, bad) {
				return stalled("fetch", err)
			}
		}
		return transient("fetch", err)
	}
	rev := &source.Revision{
		Commit:  got.Name + "@" + got.Version,
		Dir:     got.Root,
		Author:  ch.RepoURL,
		Message: fmt.Sprintf("chart %s %s (%s)", got.Name, got.Version, got.Digest),
		Fetched: got.Fetched,
	}
	if t, err := time.Parse(time.RFC3339, got.Created); err == nil {
		rev.Time = t
	}
	p.rev, p.status.SeenRevision = rev, rev.Commit
	return nil
}

// isChartRevision reports whether a revision is a chart repository's
// "name@version" rather than a commit SHA; it is shown whole, since its
// end is what tells two apart.
func isChartRevision(c string) bool { return strings.Contains(c, "@") }

// rollbackWithoutSource lets a rollback go ahead when its source (a git
// repository or a chart repository) could not be fetched: a rollback
// redeploys a record and needs no tree, only the commit its pin holds at,
// which is then the one the newest record says the source was at. (A
// chart's record with sealed values this controller has not rendered
// would need the tree, and is refused: see chartSealed.) It reports
// whether it did; any other pass fails on err as usual.
func (c *Controller) rollbackWithoutSource(ctx context.Context, p *pass, err error) bool {
	if p.request == nil || p.request.Rollback <= 0 {
		return false
	}
	rev := c.lastResolved(ctx, p)
	if rev == nil {
		return false
	}
	p.log.Warn("source unavailable; rolling back from the release records alone", "error", err)
	p.rev, p.status.SeenRevision = rev, rev.Commit
	return true
}

// chartSealed gives the values of the sealed placeholders need of rec, a
// chart application's record, for its rollback. A chart's records are not
// rendered again (the chart version, values commit and store versions they
// name are not fetched back), so each placeholder is taken from a render
// this controller kept (seenSecrets) or else from a render of the chart as
// declared now, which a rollback without its source cannot make. A
// placeholder is a keyed digest of its value, so a match is the exact
// value the revision deployed, whichever render gave it; a placeholder
// neither gives refuses the rollback, naming the revision and where it
// used the value, never the value.
func (c *Controller) chartSealed(ctx context.Context, p *pass, rec *charts.Release, declared *compose.Stack, need []string) (map[string]string, error) {
	out := make(map[string]string, len(need))
	var missing []string
	for _, ph := range need {
		if v, ok := c.seen.sealedValue(p.app.Name, ph); ok {
			out[ph] = v
		} else {
			missing = append(missing, ph)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	var now map[string]string
	why := "the chart's source could not be fetched to render it now"
	if p.rev != nil && p.rev.Dir != "" {
		r, err := c.renderChartNow(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("revision %d: render the chart as declared now for its sealed values: %w", rec.Revision, err)
		}
		now = r.Sealed
		why = "a render of what the chart application declares now does not give it (its files, values, a store's value or the age key changed since)"
	}
	for _, ph := range missing {
		v, ok := now[ph]
		if !ok {
			return nil, stalled("render", fmt.Errorf(
				"revision %d (%s) holds %s that this controller has not rendered since it started, and %s: a chart's revisions are not rendered again, so it cannot be redeployed with its exact values",
				rec.Revision, recordSource(rec), sealedUse(p.app.Stack, declared, ph), why))
		}
		out[ph] = v
	}
	return out, nil
}

// renderChartNow renders the chart as the pass's source declares it, for
// a rollback's sealed values, and leaves the pass as it found it.
func (c *Controller) renderChartNow(ctx context.Context, p *pass) (*compose.Rendered, error) {
	ids, err := c.identities(p)
	if err != nil {
		return nil, err
	}
	rendered, refs, chart, declared, conv := p.rendered, p.refs, p.chart, p.declared, p.conversion
	defer func() {
		p.rendered, p.refs, p.chart, p.declared, p.conversion = rendered, refs, chart, declared, conv
	}()
	if err := c.renderChart(ctx, p, ids); err != nil {
		return nil, err
	}
	return p.rendered, nil
}

// lastResolved is the commit (or chart version) the newest release record
// says the source was at (the pinned one, for a record of a rollback), as
// a revision with no tree; nil without a record.
func (c *Controller) lastResolved(ctx context.Context, p *pass) *source.Revision {
	latest, err := c.latestRelease(ctx, p)
	if err != nil || latest == nil {
		return nil
	}
	commit := latest.Commit
	if latest.PinnedCommit != "" {
		commit = latest.PinnedCommit
	}
	author := p.app.Source.RepoURL
	if p.app.Source.FromRepository() {
		author = p.app.Source.Chart.RepoURL
	}
	return &source.Revision{Commit: commit, Author: redact.Text(author)}
}

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
	p.awaitSnapshot()
	latest, err := c.latestReleaseIn(ctx, p, p.snapshot)
	if err != nil {
		return transient("render", err)
	}
	src := p.app.Source
	dir := src.Path
	if src.FromRepository() {
		// fetchChart checked that the archive unpacks to <name>/.
		dir = src.Chart.Name
	}
	d := chartengine.Dir{
		Root:       p.rev.Dir,
		Path:       dir,
		ValueFiles: src.Chart.ValueFiles,
		Values:     src.Chart.Values,
		Set:        src.Chart.Set,
		Decrypt:    ids.Decrypt,
		SealKey:    ids.SealKey(),
		Limits:     c.opts.RenderLimits,
		Resolve:    c.dependencyResolver(ctx, p),
	}
	// Store references the templates write are resolved by the compose
	// render of their output, under this application's grants.
	res := c.stores.For(ctx, p.app)
	if p.pins != nil {
		res = res.Pinned(p.pins) // a recorded revision's versions (useRecord)
	}
	d.SecretRef = secretRefFunc(res)
	if v := src.Values; v != nil && p.values != nil {
		origin := "values repository " + redact.Text(v.RepoURL)
		for _, f := range v.Files {
			d.ExtraValueFiles = append(d.ExtraValueFiles, chartengine.ValueFile{Root: p.values.Dir, File: f, Origin: origin})
		}
	}
	chart, err := chartengine.Load(d.Root, d.Path)
	if err != nil {
		return stalled("render", partialHint(err, p.rev))
	}
	rel := chartengine.Release{Name: p.app.Stack, Revision: 1}
	if latest != nil {
		rel.Revision = latest.Revision
	}
	r, err := c.renderRelease(ctx, chart, d, rel, latest)
	if err != nil {
		if storeFailure(err) {
			return secretFailed(err)
		}
		return chartRenderFailed(ctx, err)
	}
	p.refs = res.Used()
	cv, err := p.convert(ctx, r.Manifest)
	if err != nil {
		return stalled("render", err)
	}
	p.rendered = r.Rendered
	p.use(cv)
	p.chart = &charts.ChartRef{Name: r.Chart.Name, Version: r.Chart.Version, AppVersion: r.Chart.AppVersion, ValuesDigest: r.ValuesDigest}
	if p.values != nil {
		p.chart.ValuesCommit = p.values.Commit
	}
	return nil
}

// renderRelease renders the chart for rel, in a child process when the
// controller has a render box. The chart is rendered as the newest
// recorded revision, and again as the next one only if the manifest
// differs from the record's.
func (c *Controller) renderRelease(ctx context.Context, chart *chartengine.Chart, d chartengine.Dir, rel chartengine.Release, latest *charts.Release) (*chartengine.Rendered, error) {
	if box := c.opts.RenderBox; box != nil {
		j := renderbox.Job{Chart: chart.Meta.Name, Dir: d, Release: rel}
		if latest != nil {
			j.Recorded = &latest.Manifest
		}
		return box.Render(ctx, j)
	}
	r, err := chart.Render(d, rel)
	if err != nil || latest == nil || r.Manifest == latest.Manifest {
		return r, err
	}
	rel.Revision++
	return chart.Render(d, rel)
}

// chartRenderFailed types a failed chart render: bad input, and a render
// that passed a limit of its render process, wait for a new revision;
// a dependency's chart repository that could not be reached, or a pass
// cancelled under a render, is retried.
func chartRenderFailed(ctx context.Context, err error) error {
	if errors.Is(err, chartrepo.ErrUnreachable) || ctx.Err() != nil {
		return transient("render", err)
	}
	return stalled("render", err)
}

// dependencyResolver fetches a chart's dependencies from chart repositories
// through the controller's chart repository client, with its cache,
// digest checks and backoff. The application's chart credentials go only
// to the application's own chart repository; insecure: true allows
// plain-HTTP dependencies too.
//
// Chart.yaml and the indexes it leads to are untrusted, so a dependency
// repository, and the archive URL its index names, are held to the
// project's sourceRepos like the application's own repository: a chart
// cannot make the controller GET a URL its project does not grant.
func (c *Controller) dependencyResolver(ctx context.Context, p *pass) chartengine.Resolver {
	if c.opts.Charts == nil {
		return nil
	}
	ch := p.app.Source.Chart
	pr := p.app.Project
	return func(repo, name, constraint string) (*chartengine.Chart, error) {
		if !pr.AllowsRepo(repo) {
			return nil, fmt.Errorf("%w: repository %s is outside project %q (sourceRepos %q)", ErrOutsideProject, redact.Text(repo), pr.Name, pr.SourceRepos)
		}
		req := chartrepo.Request{RepoURL: repo, Name: name, Version: constraint, Insecure: ch.Insecure}
		if pr != nil && len(pr.SourceRepos) > 0 {
			req.Archive = func(u *url.URL) error { return archiveAllowed(pr, repo, u) }
		}
		if cr := ch.Credentials; cr != nil && ch.RepoURL != "" && strings.TrimRight(ch.RepoURL, "/") == strings.TrimRight(repo, "/") {
			req.Credentials = &chartrepo.Credentials{UsernameFile: cr.UsernameFile, PasswordFile: cr.PasswordFile, TokenFile: cr.TokenFile}
		}
		got, err := c.opts.Charts.Fetch(ctx, req)
		if err != nil {
			return nil, err
		}
		return chartengine.LoadFetched(got.Root, got.Name, fmt.Sprintf("chart %s %s from %s", got.Name, got.Version, redact.Text(repo)))
	}
}

// fetchValues fetches the git repository of source.values, through the
// same Fetcher as the chart, so its deadlines, backoff and lease hold; the
// pass releases it with p.rev. A rollback redeploys a record and needs no
// values: it fetches them only to learn the commit its pin holds at, and
// goes ahead without it when the repository cannot be reached.
func (c *Controller) fetchValues(ctx context.Context, p *pass) error {
	v := p.app.Source.Values
	if v == nil || p.app.Source.Chart == nil {
		return nil
	}
	began := c.now()
	rev, err := c.opts.Fetcher.Fetch(ctx, source.Request{RepoURL: v.RepoURL, Revision: v.Revision, Credentials: v.Credentials, Path: valuesDir(v.Files)})
	c.opts.Metrics.ObserveGitFetch(v.RepoURL, c.now().Sub(began), err)
	if err != nil && p.request != nil && p.request.Rollback > 0 {
		p.log.Warn("values repository unavailable; the rollback's pin holds until the chart's revision changes", "error", err)
		return nil
	}
	if err != nil {
		err = fmt.Errorf("values repository: %w", err)
		return fetchFailed("fetch", err)
	}
	p.values = rev
	return nil
}

// valuesDir is the deepest directory of the values repository holding
// every one of files: all of it a tree over the git tree budget need hold.
func valuesDir(files []string) string {
	var common []string
	for i, f := range files {
		dir := strings.Split(path.Dir(path.Clean(f)), "/")
		if dir[0] == "." {
			return ""
		}
		if i == 0 {
			common = dir
			continue
		}
		n := 0
		for n < len(common) && n < len(dir) && common[n] == dir[n] {
			n++
		}
		common = common[:n]
	}
	return strings.Join(common, "/")
}

// chartLabel is how status shows the chart of a release: "" for compose.
func chartLabel(r *charts.ChartRef) string {
	if r == nil {
		return ""
	}
	l := r.Name + " " + r.Version + ", values " + r.ValuesDigest
	if r.ValuesCommit != "" {
		l += " from commit " + shortCommit(r.ValuesCommit)
	}
	return l
}

// ErrOutsideProject: a chart dependency's repository or archive is not one
// of its application's project's sourceRepos.
var ErrOutsideProject = errors.New("not granted by the project's sourceRepos")

// archiveAllowed admits an archive URL under the dependency's repository
// (same scheme and host, below its path, with no escaped dot or slash a
// server could decode into another path) or matching the project's
// sourceRepos itself, as an archive on another host must.
func archiveAllowed(pr *application.ProjectTerms, repo string, u *url.URL) error {
	if base, err := url.Parse(strings.TrimRight(repo, "/")); err == nil && base.Scheme == u.Scheme && base.Host == u.Host &&
		strings.HasPrefix(u.EscapedPath(), base.EscapedPath()+"/") && !strings.Contains(u.EscapedPath(), "/..") &&
		!strings.Contains(strings.ToLower(u.EscapedPath()), "%2e") && !strings.Contains(strings.ToLower(u.EscapedPath()), "%2f") {
		return nil
	}
	if pr.AllowsRepo(u.String()) {
		return nil
	}
	return fmt.Errorf("%w: it is neither under the dependency's repository nor in project %q's sourceRepos %q", ErrOutsideProject, pr.Name, pr.SourceRepos)
}
