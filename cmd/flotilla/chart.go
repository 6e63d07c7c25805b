package main

import (
	"path/filepath"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newChartCmd) }

// newChartCmd groups the offline chart tools. Each subcommand has its own
// file.
func newChartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chart",
		Short: "Check and package charts, offline",
	}
	cmd.AddCommand(newChartLintCmd(), newChartPackageCmd())
	return cmd
}

// chartRoot splits a chart directory argument into the root nothing may be
// read outside of (the directory itself) and the path inside it.
func chartRoot(dir string) (root, rel string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	return abs, ".", nil
}
