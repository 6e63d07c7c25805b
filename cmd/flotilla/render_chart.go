package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/compose"
)

// chartFlags are the render flags that only a chart takes.
type chartFlags struct {
	// ValueFiles are relative to the current directory, as helm's -f
	// takes them, merged in order over values.yaml (render_values.go).
	ValueFiles []string
	// Set are KEY=VALUE pairs with dotted keys, over everything else.
	Set []string
	// SetString are KEY=VALUE pairs whose value stays text ("2", "true").
	SetString []string
	// Revision is what templates see as .Release.Revision. Default 1.
	Revision int
	// ExtraValues are value files on this machine, merged after
	// ValueFiles as source.values files are.
	ExtraValues []string
	// Repo, Chart and Version name a chart in a chart repository instead
	// of --path: the newest version matching the constraint Version.
	Repo, Chart, Version string
	// Insecure allows a plain-http Repo, and plain-http dependencies.
	Insecure bool
	// CacheDir holds charts fetched from repositories. Default: the
	// user's cache directory, flotilla/charts.
	CacheDir string
}

func (c *chartFlags) add(f *pflag.FlagSet) {
	f.StringArrayVar(&c.ValueFiles, "values", nil, "chart values file, relative to the current directory as helm -f (repeatable, merged in order)")
	f.StringArrayVar(&c.ExtraValues, "extra-values", nil, "values file on this machine, merged after --values as source.values files are (repeatable)")
	f.StringVar(&c.Repo, "repo", "", "chart repository URL to render --chart from instead of --path")
	f.StringVar(&c.Chart, "chart", "", "chart name in --repo")
	f.StringVar(&c.Version, "version", "", "SemVer constraint for --chart (default: the newest version)")
	addRepoFlags(f, &c.CacheDir, &c.Insecure)
	f.StringArrayVar(&c.Set, "set", nil, "chart value KEY=VALUE, KEY dotted (repeatable, highest precedence)")
	f.StringArrayVar(&c.SetString, "set-string", nil, "like --set, but VALUE is always text (repeatable)")
	f.IntVar(&c.Revision, "revision", 1, "release revision the chart's templates see")
}

// isChart reports whether dir is a chart directory.
func isChart(dir compose.Dir) bool {
	st, err := os.Stat(filepath.Join(dir.Root, dir.Path, chartengine.ChartFile))
	return err == nil && st.Mode().IsRegular()
}

// isArchive reports whether p is a packaged chart file.
func isArchive(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && (strings.HasSuffix(p, ".tgz") || strings.HasSuffix(p, ".tar.gz"))
}

// renderProject renders dir as a chart when it holds Chart.yaml and no
// compose file was named, a packaged chart when --path is a .tgz, a chart
// from a repository with --repo, and as a compose project otherwise.
//
// It returns the stack it rendered for: a packaged or repository chart
// without --stack is named for the chart.
func renderProject(ctx context.Context, stack string, dir compose.Dir, opts renderOptions, stderr io.Writer) (*compose.Rendered, string, error) {
	chartOpts := len(opts.ValueFiles) > 0 || len(opts.Set) > 0 || len(opts.SetString) > 0 || len(opts.ExtraValues) > 0
	packaged := opts.Repo != "" || isArchive(opts.Path)
	if packaged || len(opts.Files) == 0 && isChart(dir) {
		if len(opts.Files) > 0 || len(dir.EnvFiles) > 0 {
			return nil, "", usageError{errors.New("-f and --env-file are for compose projects; a chart takes --values and --set")}
		}
		return renderChartOf(ctx, stack, dir, opts, stderr)
	}
	if chartOpts || opts.Chart != "" || opts.Version != "" {
		return nil, "", usageError{errors.New("--values, --set, --chart and --version need a chart: --path holds no Chart.yaml (and --repo is not given)")}
	}
	r, err := compose.Render(stack, dir)
	return r, stack, err
}

// renderChartOf renders a chart directory, a package or a chart from a
// repository, with the flags' values, as the controller renders a chart
// application. Dependencies from chart repositories are fetched into the
// chart cache; a chart from an unreachable repository is rendered from the
// cache when it holds a matching version.
func renderChartOf(ctx context.Context, stack string, dir compose.Dir, opts renderOptions, stderr io.Writer) (*compose.Rendered, string, error) {
	if (opts.Chart != "" || opts.Version != "") && opts.Repo == "" {
		return nil, "", usageError{errors.New("--chart and --version need --repo")}
	}
	if opts.Repo != "" && opts.Chart == "" {
		return nil, "", usageError{errors.New("--repo needs --chart NAME")}
	}
	set, err := parseSetFlags(opts.Set, opts.SetString)
	if err != nil {
		return nil, "", usageError{err}
	}
	d := chartengine.Dir{
		Root: dir.Root, Path: dir.Path, Set: set, Decrypt: dir.Decrypt,
		SealKey: dir.SealKey, Limits: dir.Limits, APIVersion: dir.APIVersion,
	}
	for _, f := range opts.ExtraValues {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, "", usageError{err}
		}
		d.ExtraValueFiles = append(d.ExtraValueFiles, chartengine.ValueFile{Root: filepath.Dir(abs), File: filepath.Base(abs), Origin: "--extra-values"})
	}
	repos := &chartRepos{cacheDir: opts.CacheDir, insecure: opts.Insecure, stderr: stderr}
	d.Resolve = repos.resolver(ctx)

	var chart *chartengine.Chart
	switch {
	case opts.Repo != "":
		cl, err := repos.client()
		if err != nil {
			return nil, "", err
		}
		version := opts.Version
		if version == "" {
			version = "*"
		}
		got, fromCache, err := fetchOrCached(ctx, cl, chartrepo.Request{RepoURL: opts.Repo, Name: opts.Chart, Version: version, Insecure: opts.Insecure}, stderr)
		if err != nil {
			return nil, "", err
		}
		if !fromCache {
			fmt.Fprintf(stderr, "note: chart %s %s (%s) from %s\n", got.Name, got.Version, got.Digest, opts.Repo)
		}
		d.Root, d.Path = got.Root, got.Name
		chart, err = chartengine.Load(d.Root, d.Path)
		if err != nil {
			return nil, "", err
		}
	case isArchive(opts.Path):
		f, err := os.Open(opts.Path)
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		if chart, err = chartengine.LoadArchive(f, filepath.Base(opts.Path)); err != nil {
			return nil, "", err
		}
		d.Root, d.Path = "", chart.Path
	default:
		if chart, err = chartengine.Load(d.Root, d.Path); err != nil {
			return nil, "", err
		}
	}
	if opts.stackDefaulted {
		stack = chart.Meta.Name
	}
	inChart, extra, err := placeValues(opts.ValueFiles, d.Root, d.Path, stderr)
	if err != nil {
		return nil, "", err
	}
	d.ValueFiles, d.ExtraValueFiles = inChart, append(extra, d.ExtraValueFiles...)
	r, err := chart.Render(d, chartengine.Release{Name: stack, Revision: opts.Revision})
	if err != nil {
		return nil, "", err
	}
	return r.Rendered, stack, nil
}

// chartRepos is the chart repository client of one command, made on first
// use: a render, lint or package whose chart has chart-repository
// dependencies fetches them into the chart cache, as the controller does
// into its own.
type chartRepos struct {
	cacheDir string // default: the user cache directory's flotilla/charts
	insecure bool
	stderr   io.Writer
	cl       *chartrepo.Client
}

func (r *chartRepos) client() (*chartrepo.Client, error) {
	if r.cl != nil {
		return r.cl, nil
	}
	cache := r.cacheDir
	if cache == "" {
		uc, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("chart cache: %w (name one with --chart-cache)", err)
		}
		cache = filepath.Join(uc, "flotilla", "charts")
	}
	cl, err := chartrepo.New(chartrepo.Options{CacheDir: cache})
	if err != nil {
		return nil, err
	}
	r.cl = cl
	return cl, nil
}

// resolver fetches dependencies, from the cache when their repository
// cannot be reached.
func (r *chartRepos) resolver(ctx context.Context) chartengine.Resolver {
	return func(repo, name, constraint string) (*chartengine.Chart, error) {
		cl, err := r.client()
		if err != nil {
			return nil, err
		}
		got, _, err := fetchOrCached(ctx, cl, chartrepo.Request{RepoURL: repo, Name: name, Version: constraint, Insecure: r.insecure}, r.stderr)
		if err != nil {
			return nil, err
		}
		return chartengine.LoadFetched(got.Root, got.Name, fmt.Sprintf("chart %s %s from %s", got.Name, got.Version, repo))
	}
}

// addRepoFlags adds the flags of a command whose chart may have
// dependencies in chart repositories.
func addRepoFlags(f *pflag.FlagSet, cacheDir *string, insecure *bool) {
	f.StringVar(cacheDir, "chart-cache", "", "directory for charts fetched from repositories (default: the user cache directory)")
	f.BoolVar(insecure, "insecure", false, "allow plain-http chart repositories")
}

// fetchOrCached fetches a chart, and falls back on the cache when the
// repository cannot be reached, saying so; fromCache reports the fallback.
func fetchOrCached(ctx context.Context, cl *chartrepo.Client, req chartrepo.Request, stderr io.Writer) (_ *chartrepo.Chart, fromCache bool, _ error) {
	got, err := cl.Fetch(ctx, req)
	if err == nil || !errors.Is(err, chartrepo.ErrUnreachable) {
		return got, false, err
	}
	cached, cerr := cl.Cached(req.RepoURL, req.Name, req.Version)
	if cerr != nil {
		return nil, false, err
	}
	fmt.Fprintf(stderr, "note: %v; rendering %s %s (%s) from the chart cache\n", err, cached.Name, cached.Version, cached.Digest)
	return cached, true, nil
}

// parseSetFlags reads KEY=VALUE pairs, --set-string after --set; a later
// pair for the same key wins.
func parseSetFlags(set, setString []string) (map[string]any, error) {
	out := map[string]any{}
	for i, pairs := range [][]string{set, setString} {
		flag := []string{"--set", "--set-string"}[i]
		for _, p := range pairs {
			k, v, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, p)
			}
			if _, err := chartengine.SplitKey(k); err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			if i == 0 {
				out[k] = chartengine.ParseSetValue(v)
			} else {
				out[k] = v
			}
		}
	}
	return out, nil
}
