package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// chartLintOptions are the arguments of `flotilla chart lint`.
type chartLintOptions struct {
	// Dir is the chart directory.
	Dir string
}

func newChartLintCmd() *cobra.Command {
	var o chartLintOptions
	return &cobra.Command{
		Use:   "lint DIR",
		Short: "Check a chart: Chart.yaml, schema, templates render with the defaults, output is compose",
		Long: `Lint loads the chart in DIR and renders it with its own values.yaml, as the
controller would for a stack named "lint": Chart.yaml must be valid, the
defaults must satisfy values.schema.json, every template must parse and run,
every output must be a compose mapping, and the merged document must load
and convert as compose. Exit 0 when it does, 1 when it does not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			if code := runChartLint(o, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
}

func runChartLint(o chartLintOptions, stdout, stderr io.Writer) int {
	root, rel, err := chartRoot(o.Dir)
	if err != nil {
		fmt.Fprintln(stderr, "flotilla chart lint:", err)
		return exitMisuse
	}
	warns, err := chartengine.Lint(root, rel)
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
