package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// chartPackageOptions are the arguments of `flotilla chart package`.
type chartPackageOptions struct {
	// Dir is the chart directory.
	Dir string
	// Destination is the directory the archive is written to. Default ".".
	Destination string
	// Root, CacheDir and Insecure are as for chart lint.
	Root, CacheDir string
	Insecure       bool
}

func newChartPackageCmd() *cobra.Command {
	var o chartPackageOptions
	cmd := &cobra.Command{
		Use:   "package DIR [--destination DIR]",
		Short: "Write a chart as NAME-VERSION.tgz and print its sha256",
		Long: `Package lints the chart in DIR and writes it as NAME-VERSION.tgz: every file
under NAME/, in path order, with fixed times, owners and modes, so the same
chart gives the same bytes, and the same sha256, on every machine. It prints
the archive's path and sha256. A file:// dependency is written into the
package under charts/NAME/, so the package renders on its own. Exit 0 on success, 1 when the chart is invalid
or the archive cannot be written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			if code := runChartPackage(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.Destination, "destination", "d", ".", "directory the archive is written to")
	cmd.Flags().StringVar(&o.Root, "root", "", "directory nothing may be read outside of, such as the repository a file:// dependency is in (default: the chart's parent)")
	addRepoFlags(cmd.Flags(), &o.CacheDir, &o.Insecure)
	return cmd
}

func runChartPackage(ctx context.Context, o chartPackageOptions, stdout, stderr io.Writer) int {
	if ctx == nil {
		ctx = context.Background()
	}
	root, rel, err := chartRoot(o.Dir, o.Root)
	if err != nil {
		fmt.Fprintln(stderr, "flotilla chart package:", err)
		return exitMisuse
	}
	repos := &chartRepos{cacheDir: o.CacheDir, insecure: o.Insecure, stderr: stderr}
	if _, err := chartengine.Lint(root, rel, repos.resolver(ctx)); err != nil {
		fmt.Fprintln(stderr, formatProblem(err))
		return exitFailed
	}
	c, err := chartengine.Load(root, rel)
	if err != nil {
		fmt.Fprintln(stderr, formatProblem(err))
		return exitFailed
	}
	out := filepath.Join(o.Destination, chartengine.ArchiveName(c.Meta))
	var sum string
	err = replaceFile(out, ".chart-*.tgz", func(w io.Writer) (err error) {
		sum, err = c.Package(w)
		return err
	})
	if err != nil {
		fmt.Fprintln(stderr, "flotilla chart package:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\nsha256:%s\n", out, sum)
	return exitOK
}

// replaceFile writes path through write into a temporary file beside it
// (named by pattern, as os.CreateTemp takes it), made world-readable, and
// renames it into place: a failed or interrupted write never leaves a
// truncated file under the name a repository would serve.
func replaceFile(path, pattern string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = write(tmp)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}
