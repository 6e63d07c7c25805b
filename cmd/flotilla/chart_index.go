package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/chartrepo"
)

// defaultIndexTime is the created time of an index built without
// --created: fixed, so the same packages give the same index.
var defaultIndexTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// chartIndexOptions are the arguments of `flotilla chart index`.
type chartIndexOptions struct {
	// Dir holds the .tgz archives; index.yaml is written there.
	Dir string
	// URL is the base URL the archives are served from; empty means
	// entries name their file relative to the index.
	URL string
	// Created is RFC 3339; empty means defaultIndexTime.
	Created string
}

func newChartIndexCmd() *cobra.Command {
	var o chartIndexOptions
	cmd := &cobra.Command{
		Use:   "index DIR [--url BASE] [--created TIME]",
		Short: "Write the index.yaml of a chart repository",
		Long: `Index reads every NAME-VERSION.tgz in DIR, unpacks and checks it as the
controller would, and writes DIR/index.yaml listing each chart's versions
(newest first) with appVersion, description, sha256 digest and URL. An
entry's URL is BASE/FILE with --url, else the file name relative to the
index. Every entry's created time is --created (RFC 3339), by default
2000-01-01T00:00:00Z, so the same packages always give the same index.
Exit 0 on success, 1 when an archive is invalid or the index cannot be
written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			if code := runChartIndex(o, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.URL, "url", "", "base URL the archives are served from")
	cmd.Flags().StringVar(&o.Created, "created", "", "created time of every entry, RFC 3339 (default 2000-01-01T00:00:00Z)")
	return cmd
}

func runChartIndex(o chartIndexOptions, stdout, stderr io.Writer) int {
	created := defaultIndexTime
	if o.Created != "" {
		t, err := time.Parse(time.RFC3339, o.Created)
		if err != nil {
			fmt.Fprintln(stderr, "flotilla chart index: --created:", err)
			return exitMisuse
		}
		created = t
	}
	data, err := chartrepo.BuildIndex(o.Dir, o.URL, created)
	if err != nil {
		fmt.Fprintln(stderr, formatProblem(err))
		return exitFailed
	}
	out := filepath.Join(o.Dir, "index.yaml")
	// Renamed into place, so a server never serves half an index.
	err = replaceFile(out, ".index-*.yaml", func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		fmt.Fprintln(stderr, "flotilla chart index:", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, out)
	return exitOK
}
