package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// placeValues reads --values the way helm's -f does: relative to the
// current directory, or absolute. A file inside the chart directory stays
// a chart value file (the controller's valueFiles, shown by their chart
// path); one elsewhere on this machine is read from where it is.
//
// A relative name that is not in the current directory is looked up in
// the chart, as earlier versions of this command did, with a note: the
// chart's own values-eu.yaml keeps working from any directory, and a
// packaged or repository chart can still be given one of its files.
//
// chartDir is the chart's directory on disk, "" for a packaged or fetched
// chart. Order is kept: when any file lies outside the chart, every one
// is read as an extra value file, in the order given.
func placeValues(names []string, chartRoot, chartPath string, stderr io.Writer) (inChart []string, extra []chartengine.ValueFile, err error) {
	chartDir := ""
	if chartRoot != "" {
		chartDir = filepath.Join(chartRoot, chartPath)
	}
	type placed struct {
		chartRel string // relative to the chart, or ""
		abs      string // on this machine, or ""
	}
	all := make([]placed, 0, len(names))
	outside := false
	for _, name := range names {
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("--values %s: %w", name, err)}
		}
		st, statErr := os.Stat(abs)
		switch {
		case statErr == nil && !st.Mode().IsRegular():
			return nil, nil, usageError{fmt.Errorf("--values %s: not a regular file", name)}
		case statErr == nil:
			if rel, ok := under(chartDir, abs); ok {
				all = append(all, placed{chartRel: rel})
				continue
			}
			outside = true
			all = append(all, placed{abs: abs})
		case errors.Is(statErr, fs.ErrNotExist) && !filepath.IsAbs(name):
			fmt.Fprintf(stderr, "note: --values %s is not in the current directory; reading it from the chart\n", name)
			all = append(all, placed{chartRel: filepath.ToSlash(filepath.Clean(name))})
		default:
			return nil, nil, usageError{fmt.Errorf("--values %s: %w", name, statErr)}
		}
	}
	if !outside {
		for _, p := range all {
			inChart = append(inChart, p.chartRel)
		}
		return inChart, nil, nil
	}
	for _, p := range all {
		switch {
		case p.abs != "":
			extra = append(extra, chartengine.ValueFile{Root: filepath.Dir(p.abs), File: filepath.Base(p.abs), Origin: "--values"})
		case chartRoot != "":
			extra = append(extra, chartengine.ValueFile{Root: chartRoot, File: filepath.ToSlash(filepath.Join(chartPath, p.chartRel)), Origin: "--values"})
		default:
			return nil, nil, usageError{fmt.Errorf("--values %s: give it relative to the current directory when other --values files are outside the chart", p.chartRel)}
		}
	}
	return nil, extra, nil
}

// under reports whether abs lies inside dir, and its slash path there.
func under(dir, abs string) (string, bool) {
	if dir == "" {
		return "", false
	}
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(d, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}
