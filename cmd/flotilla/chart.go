package main

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

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

// chartRoot splits a chart directory argument into the root nothing may
// be read outside of and the chart's path in it, so messages name files as
// "shop/templates/web.yaml". The root is the chart's parent unless root
// names another directory holding it, such as the repository a file://
// dependency reaches into.
func chartRoot(dir, root string) (string, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if root == "" {
		if filepath.Dir(abs) == abs {
			return abs, ".", nil
		}
		return filepath.Dir(abs), filepath.Base(abs), nil
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", "", err
	}
	rel, err := filepath.Rel(absRoot, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", "", errors.New("--root must hold the chart directory")
	}
	return absRoot, filepath.ToSlash(rel), nil
}
