package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// chartLintOptions are the arguments of `flotilla chart lint`.
type chartLintOptions struct {
	// Dir is the chart directory.
	Dir string
	// Root is the directory nothing is read outside of. Default: Dir's
	// parent.
	Root string
	// CacheDir and Insecure are for dependencies from chart repositories.
	CacheDir string
	Insecure bool
}

func newChartLintCmd() *cobra.Command {
	var o chartLintOptions
	cmd := &cobra.Command{
		Use:   "lint DIR",
		Short: "Check a chart: Chart.yaml, schema, templates render with the defaults, output is compose",
		Long: `Lint loads the chart in DIR and renders it with its own values.yaml, as the
controller would for a stack named "lint": Chart.yaml must be valid, the
defaults must satisfy values.schema.json, every template must parse and run,
every output must be a compose mapping, and the merged document must load
and convert as compose. Subcharts are rendered with it; those from chart
repositories are fetched into the chart cache. Exit 0 when it does, 1 when
it does not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			if code := runChartLint(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Root, "root", "", "directory nothing may be read outside of, such as the repository a file:// dependency is in (default: the chart's parent)")
	addRepoFlags(cmd.Flags(), &o.CacheDir, &o.Insecure)
	return cmd
}

func runChartLint(ctx context.Context, o chartLintOptions, stdout, stderr io.Writer) int {
	if ctx == nil {
		ctx = context.Background()
	}
	root, rel, err := chartRoot(o.Dir, o.Root)
	if err != nil {
		fmt.Fprintln(stderr, "flotilla chart lint:", err)
		return exitMisuse
	}
	repos := &chartRepos{cacheDir: o.CacheDir, insecure: o.Insecure, stderr: stderr}
	warns, err := chartengine.Lint(root, rel, repos.resolver(ctx))
	if err != nil {
		fmt.Fprintln(stderr, formatProblem(err))
		return exitFailed
	}
	for _, w := range warns {
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintf(stdout, "%s: chart is valid\n", o.Dir)
	return exitOK
}
