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
	cmd.AddCommand(newChartLintCmd(), newChartPackageCmd(), newChartIndexCmd())
	return cmd
}

// chartRoot splits a chart directory argument into its parent, the root
// nothing may be read outside of, and the directory's name, so messages
// name files as "shop/templates/web.yaml". A chart reads nothing outside
// itself anyway: lint and package take no value files.
func chartRoot(dir string) (root, rel string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if filepath.Dir(abs) == abs {
		return abs, ".", nil
	}
	return filepath.Dir(abs), filepath.Base(abs), nil
}
