package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/client"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/source"
)

// planOptions are the flags of `flotilla plan`.
type planOptions struct {
	Repo, Base, Head string
	// App limits the plan to one application of Config, or names the one
	// implicit application without Config. Default: every application of
	// Config whose source is Repo; "app" without Config.
	App string
	// Config is an applications file whose applications sourced from Repo
	// are planned with their own path, compose files and stack.
	Config string
	// Path, Files, EnvFiles and Stack describe the implicit application
	// when Config is not given. Default ".", the standard compose file
	// names, none, and App.
	Path     string
	Files    []string
	EnvFiles []string
	Stack    string
	// Format is text (default) or markdown.
	Format string
	// Server, when set, also compares the head with what the controller at
	// that URL has deployed for each application (its newest release
	// record), and lists the live drift it reports.
	Server  string
	DataDir string
	// Comment, with a number, also posts the markdown plan as a pull
	// request comment, edited in place on later runs.
	Comment planComment
}

func newPlanCmd() *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan --repo URL --base REF --head REF [--app NAME] [--config FILE] [--format text|markdown] [--server URL]",
		Short: "Show which services and fields a change of a repository would change",
		Long: `Plan renders the repository at --base and at --head, offline, exactly as the
controller would, and prints every service the head creates, removes or
changes, with each field that differs. With --config, every application of that
applications file whose source is --repo is planned (or only --app); without
it, --path (and -f, --env-file) is the compose project. With --server, each
application's head is also compared with the manifest the controller last
deployed, and live drift the controller reports is listed.

--format markdown writes a pull-request comment; --comment N posts it on pull
request N (GitLab: merge request), editing the comment of an earlier run in
place.

Exit status: 0 no changes, 2 changes, 1 error (bad flags included).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitError{runPlan(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())}
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintln(c.ErrOrStderr(), "flotilla plan:", err)
		return exitError{exitFailed}
	})
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", "", "repository URL or local path (required)")
	f.StringVar(&o.Base, "base", "", "base revision: branch, tag, ref or commit (required)")
	f.StringVar(&o.Head, "head", "", "head revision: branch, tag, ref (refs/pull/7/head) or commit (required)")
	f.StringVar(&o.App, "app", "", "plan only this application (without --config: its name, default \"app\")")
	f.StringVar(&o.Config, "config", "", "applications file naming the applications of --repo to plan")
	f.StringVar(&o.Path, "path", ".", "compose project directory in the repository, without --config")
	f.StringArrayVarP(&o.Files, "file", "f", nil, "compose file relative to --path (repeatable), without --config")
	f.StringArrayVar(&o.EnvFiles, "env-file", nil, "interpolation env file relative to --path (repeatable), without --config")
	f.StringVar(&o.Stack, "stack", "", "stack name, without --config (default: the application's name)")
	f.StringVar(&o.Format, "format", "text", "output: text or markdown")
	f.StringVar(&o.Server, "server", "", "controller API URL to also compare against what it deployed (token from "+envToken+" or "+envTokenFile+")")
	f.StringVar(&o.DataDir, "data", "", "git cache directory (default: a temporary one)")
	f.IntVar(&o.Comment.Number, "comment", 0, "also post the plan as a comment on this pull request (GitLab: merge request), edited in place on later runs")
	f.StringVar(&o.Comment.Kind, "forge", "", "with --comment: github, gitea or gitlab (default: the application's feedback.forge in --config)")
	f.StringVar(&o.Comment.API, "forge-api", "", "with --comment: the forge's API base URL")
	f.StringVar(&o.Comment.Repo, "forge-repo", "", "with --comment: the repository's owner/name on the forge")
	f.StringVar(&o.Comment.TokenFile, "forge-token-file", "", "with --comment: file holding the forge API token")
	return cmd
}

// planApp is one application to plan.
type planApp struct {
	Name, Stack string
	Source      application.Source
}

// servicePlan is how one service differs.
type servicePlan struct {
	Name   string
	Change string // create, update, remove
	Fields []drift.Change
}

// appPlan is one application's plan against one side.
type appPlan struct {
	App      string
	Against  string // "base abc123" or "deployed revision 4"
	Services []servicePlan
	Notes    []string
}

func (o *planOptions) check() error {
	switch {
	case o.Repo == "" || o.Base == "" || o.Head == "":
		return errors.New("--repo, --base and --head are required")
	case o.Comment.Number < 0:
		return fmt.Errorf("--comment %d: want a pull request number", o.Comment.Number)
	case o.Format != "text" && o.Format != "markdown":
		return fmt.Errorf("--format %q: use text or markdown", o.Format)
	case o.Config != "" && (o.Path != "." || len(o.Files) > 0 || len(o.EnvFiles) > 0 || o.Stack != ""):
		return errors.New("--path, --file, --env-file and --stack describe an application without --config; with --config the file does")
	}
	return nil
}

// runPlan plans and returns the exit code.
func runPlan(ctx context.Context, o planOptions, stdout, stderr io.Writer) int {
	if ctx == nil {
		ctx = context.Background()
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "flotilla plan:", redact.Text(err.Error()))
		return exitFailed
	}
	if err := o.check(); err != nil {
		return fail(err)
	}
	apps, err := o.apps()
	if err != nil {
		return fail(err)
	}
	cache := o.DataDir
	if cache == "" {
		dir, err := os.MkdirTemp("", "flotilla-plan-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		cache = dir
	}
	fetcher := source.New(source.Options{CacheDir: cache, Backoff: source.Backoff{Min: time.Millisecond, Max: time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	base, err := fetcher.Fetch(ctx, source.Request{RepoURL: o.Repo, Revision: o.Base})
	if err != nil {
		return fail(fmt.Errorf("--base %s: %w", o.Base, err))
	}
	defer base.Release()
	head, err := fetcher.Fetch(ctx, source.Request{RepoURL: o.Repo, Revision: o.Head})
	if err != nil {
		return fail(fmt.Errorf("--head %s: %w", o.Head, err))
	}
	defer head.Release()

	var c *client.Client
	if o.Server != "" {
		api := apiOptions{Server: o.Server, Output: outputTable, CredentialsFile: defaultCredentialsFile()}
		if c, err = api.newClient(); err != nil {
			return fail(err)
		}
	}
	var plans []appPlan
	for _, a := range apps {
		headStack, err := renderPlan(ctx, a, head, stderr)
		if err != nil {
			return fail(fmt.Errorf("%s at head %s: %w", a.Name, shortSHA(head.Commit), err))
		}
		baseStack, err := renderPlan(ctx, a, base, stderr)
		if err != nil {
			return fail(fmt.Errorf("%s at base %s: %w", a.Name, shortSHA(base.Commit), err))
		}
		plans = append(plans, appPlan{App: a.Name, Against: "base " + shortSHA(base.Commit), Services: compareStacks(baseStack, headStack)})
		if c != nil {
			p, err := planAgainstServer(ctx, c, a, headStack)
			if err != nil {
				return fail(err)
			}
			plans = append(plans, p)
		}
	}
	if o.Format == "markdown" {
		printPlanMarkdown(stdout, plans, shortSHA(head.Commit))
	} else {
		printPlanText(stdout, plans, shortSHA(head.Commit))
	}
	if o.Comment.Number > 0 {
		if err := postPlanComments(ctx, o, plans, shortSHA(head.Commit), stderr); err != nil {
			return fail(err)
		}
	}
	for _, p := range plans {
		if len(p.Services) > 0 {
			return exitChanges
		}
	}
	return exitOK
}

// apps lists what to plan: the applications of --config sourced from
// --repo (compose projects and charts kept in git), or the implicit one.
func (o *planOptions) apps() ([]planApp, error) {
	if o.Config == "" {
		name := o.App
		if name == "" {
			name = "app"
		}
		stack := o.Stack
		if stack == "" {
			stack = name
		}
		return []planApp{{Name: name, Stack: stack, Source: application.Source{
			Path: path.Clean(o.Path), Compose: application.Compose{Files: o.Files, EnvFiles: o.EnvFiles}}}}, nil
	}
	f, err := application.Load(o.Config)
	if err != nil {
		return nil, err
	}
	var out []planApp
	for _, a := range f.Applications {
		if o.App != "" && a.Name != o.App {
			continue
		}
		if !source.SameRepository(a.Source.RepoURL, o.Repo) {
			if o.App != "" {
				return nil, fmt.Errorf("application %q is sourced from another repository than --repo", a.Name)
			}
			continue
		}
		switch {
		case a.Source.FromRepository():
			return nil, fmt.Errorf("application %q deploys a chart from a chart repository; plan compares two commits of one git repository, so it renders compose projects and charts kept in git only", a.Name)
		case a.Source.Values != nil:
			return nil, fmt.Errorf("application %q takes values from a second repository; plan renders one repository at two commits, so it cannot plan it", a.Name)
		}
		out = append(out, planApp{Name: a.Name, Stack: a.Stack, Source: a.Source})
	}
	if len(out) == 0 {
		if o.App != "" {
			return nil, fmt.Errorf("no application %q in %s", o.App, o.Config)
		}
		return nil, fmt.Errorf("no application of %s is sourced from --repo", o.Config)
	}
	return out, nil
}

// renderPlan renders a at rev and converts it without a daemon, as the
// controller's render step does: a chart kept in git with the
// application's value files, inline values and set, a compose project
// otherwise. Chart dependencies from chart repositories are fetched into
// the user's chart cache, as `flotilla render` does.
func renderPlan(ctx context.Context, a planApp, rev *source.Revision, stderr io.Writer) (*compose.Stack, error) {
	var r *compose.Rendered
	var err error
	if c := a.Source.Chart; c != nil {
		r, err = renderPlanChart(ctx, a, rev, stderr)
	} else {
		r, err = compose.Render(a.Stack, compose.Dir{Root: rev.Dir, Path: a.Source.Path, Files: a.Source.Compose.Files, EnvFiles: a.Source.Compose.EnvFiles})
	}
	if err != nil {
		return nil, err
	}
	return compose.Convert(ctx, r.Manifest, a.Stack, nil)
}

// renderPlanChart renders the chart at a's path in rev. Both sides of a
// plan render as revision 1, so a template that prints .Release.Revision
// does not show as a change.
func renderPlanChart(ctx context.Context, a planApp, rev *source.Revision, stderr io.Writer) (*compose.Rendered, error) {
	c := a.Source.Chart
	repos := &chartRepos{stderr: stderr}
	d := chartengine.Dir{Root: rev.Dir, Path: a.Source.Path, ValueFiles: c.ValueFiles, Values: c.Values, Set: c.Set, Resolve: repos.resolver(ctx)}
	chart, err := chartengine.Load(d.Root, d.Path)
	if err != nil {
		return nil, err
	}
	r, err := chart.Render(d, chartengine.Release{Name: a.Stack, Revision: 1})
	if err != nil {
		return nil, err
	}
	return r.Rendered, nil
}

// compareStacks lists the services head creates, removes or changes
// against base, with the fields of each change, sorted by name. Both are
// desired specs, so networks are matched by name as written.
func compareStacks(base, head *compose.Stack) []servicePlan {
	var out []servicePlan
	short := func(scoped string) string { return strings.TrimPrefix(scoped, head.Namespace+"_") }
	for name, hs := range head.Services {
		bs, ok := base.Services[name]
		if !ok {
			out = append(out, servicePlan{Name: short(name), Change: "create"})
			continue
		}
		if fields := drift.Diff(hs, bs, planDiffOptions); len(fields) > 0 {
			out = append(out, servicePlan{Name: short(name), Change: "update", Fields: fields})
		}
	}
	for name := range base.Services {
		if _, ok := head.Services[name]; !ok {
			out = append(out, servicePlan{Name: short(name), Change: "remove"})
		}
	}
	slices.SortFunc(out, func(a, b servicePlan) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// planAgainstServer compares the head with the manifest the controller
// last deployed for a (its newest release record) and adds the live drift
// its status reports.
func planAgainstServer(ctx context.Context, c *client.Client, a planApp, head *compose.Stack) (appPlan, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	hist, err := c.History(ctx, a.Name)
	if err != nil {
		return appPlan{}, fmt.Errorf("%s: history from --server: %w", a.Name, err)
	}
	p := appPlan{App: a.Name, Against: "the swarm (nothing deployed yet)"}
	deployed := &compose.Stack{Namespace: a.Stack}
	if rs := hist.Items; len(rs) > 0 {
		newest := newestRelease(rs)
		p.Against = fmt.Sprintf("the swarm (revision %d, %s)", newest.Revision, shortSHA(newest.Commit))
		if deployed, err = compose.Convert(ctx, newest.Manifest, a.Stack, nil); err != nil {
			return appPlan{}, fmt.Errorf("%s: convert deployed revision %d: %w", a.Name, newest.Revision, err)
		}
	}
	p.Services = compareStacks(deployed, head)
	st, err := c.Application(ctx, a.Name)
	if err != nil {
		return appPlan{}, fmt.Errorf("%s: status from --server: %w", a.Name, err)
	}
	for _, d := range st.Drift {
		p.Notes = append(p.Notes, fmt.Sprintf("live drift on %s: %s is %s on the swarm, %s in git", d.Service, d.Field, d.Live, d.Desired))
	}
	return p, nil
}

func newestRelease(rs []charts.Release) charts.Release {
	n := rs[0]
	for _, r := range rs[1:] {
		if r.Revision > n.Revision {
			n = r
		}
	}
	return n
}

// planDiffOptions compare two desired specs: networks by the names both
// write, and without the stack's image label, which repeats the image
// field and would report every image change twice.
var planDiffOptions = drift.Options{NetworkNames: map[string]string{}, IgnoreLabels: []string{"com.docker.stack.image"}}

var planMark = map[string]string{"create": "+", "update": "~", "remove": "-"}

func printPlanText(w io.Writer, plans []appPlan, head string) {
	for _, p := range plans {
		fmt.Fprintf(w, "%s: head %s against %s\n", p.App, head, p.Against)
		if len(p.Services) == 0 {
			fmt.Fprintln(w, "  no changes")
		}
		for _, s := range p.Services {
			fmt.Fprintf(w, "  %s %s (%s)\n", planMark[s.Change], s.Name, s.Change)
			tw := newTable(w)
			for _, f := range s.Fields {
				fmt.Fprintf(tw, "      %s:\t%s\t→ %s\n", f.Field, oneLine(f.Live, 60), oneLine(f.Desired, 60))
			}
			_ = tw.Flush()
		}
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		fmt.Fprintln(w, "  "+planSummary(p))
	}
}

func planSummary(p appPlan) string {
	n := map[string]int{}
	for _, s := range p.Services {
		n[s.Change]++
	}
	return fmt.Sprintf("%d to create, %d to update, %d to remove", n["create"], n["update"], n["remove"])
}

func printPlanMarkdown(w io.Writer, plans []appPlan, head string) {
	for i, p := range plans {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "### `%s`: head `%s` against %s\n\n", mdCode(p.App), head, mdText(p.Against))
		if len(p.Services) == 0 {
			fmt.Fprintln(w, "No changes.")
		} else {
			fmt.Fprintln(w, "| service | change | field | before | after |")
			fmt.Fprintln(w, "|---|---|---|---|---|")
			for _, s := range p.Services {
				if len(s.Fields) == 0 {
					fmt.Fprintf(w, "| `%s` | %s | | | |\n", mdCode(s.Name), s.Change)
				}
				for _, f := range s.Fields {
					fmt.Fprintf(w, "| `%s` | %s | `%s` | `%s` | `%s` |\n", mdCode(s.Name), s.Change, mdCode(f.Field), mdCode(oneLine(f.Live, 80)), mdCode(oneLine(f.Desired, 80)))
				}
			}
		}
		for _, n := range p.Notes {
			fmt.Fprintf(w, "\n> %s\n", mdText(n))
		}
		fmt.Fprintf(w, "\n%s\n", planSummary(p))
	}
}

// mdCode makes s safe inside a code span in a table cell.
func mdCode(s string) string {
	return strings.NewReplacer("`", "'", "|", `\|`, "\n", " ").Replace(s)
}

// mdText makes s safe as table or quote text.
func mdText(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
