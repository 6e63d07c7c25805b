package chartengine

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/flotilla-gitops/flotilla/fault"
)

// LintStack is the stack name Lint renders a chart for.
const LintStack = "lint"

// Lint checks what a chart needs to deploy with its own defaults:
// Chart.yaml, the schema and values.yaml against it, every template parses
// and renders, every output is a compose mapping, and the merged document
// loads and converts as compose. It returns the render's warnings.
// Dependencies from chart repositories are fetched through resolve; nil
// refuses them.
func Lint(root, dir string, resolve Resolver) ([]string, error) {
	c, err := Load(root, dir)
	if err != nil {
		return nil, err
	}
	r, err := c.Render(Dir{Root: root, Path: dir, Resolve: resolve}, Release{Name: LintStack, Revision: 1})
	if err != nil {
		return nil, err
	}
	return r.Warnings, nil
}

// packageFiles is c's files with every file:// dependency that is not
// vendored added under charts/<name>/.
func (c *Chart) packageFiles(depth int) (map[string][]byte, error) {
	all := maps.Clone(c.all)
	if depth >= maxDepth && len(c.Meta.Dependencies) > 0 {
		return nil, &fault.Error{File: c.rel(ChartFile), Field: "dependencies", Err: fmt.Errorf("%w: chart %s: subcharts nest more than %d deep", ErrInvalidChart, c.Meta.Name, maxDepth)}
	}
	var archives []*Chart
	for _, dep := range c.Meta.Dependencies {
		if !strings.HasPrefix(dep.Repository, "file://") {
			continue
		}
		if archives == nil {
			var err error
			if archives, err = c.vendoredArchives(); err != nil {
				return nil, err
			}
		}
		constraint, _ := semver.NewConstraint(dep.Version)
		bad := func(format string, args ...any) error {
			return &fault.Error{File: c.rel(ChartFile), Field: "dependencies", Err: fmt.Errorf("%w: chart %s: dependency %s: %s", ErrInvalidChart, c.Meta.Name, dep.Name, fmt.Sprintf(format, args...))}
		}
		sub, err := c.findDep(dep, constraint, archives, Dir{}, bad)
		if err != nil {
			return nil, err
		}
		dir := ChartsDir + "/" + dep.Name
		if _, vendored := all[dir+"/"+ChartFile]; vendored || sub.root == "" {
			continue // in charts/ already, as a directory or an archive
		}
		files, err := sub.packageFiles(depth + 1)
		if err != nil {
			return nil, err
		}
		for name, data := range files {
			all[dir+"/"+name] = data
		}
	}
	return all, nil
}

// packageTime is every archive entry's modification time: a package's bytes
// depend on the chart's content only, not on when or where it was made.
var packageTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ArchiveName is the file name a package of m is written to.
func ArchiveName(m Metadata) string { return m.Name + "-" + m.Version + ".tgz" }

// Package writes c as a gzipped tar, every file under "<name>/", in path
// order, with fixed times, owners and modes, and returns the archive's
// sha256 in hex. The same chart gives the same bytes on every machine.
//
// A dependency at a file:// path is written into the package under
// charts/<name>/, since the repository it points into does not travel with
// the package; a vendored one is there already, and one from a chart
// repository is fetched at render as for the chart in git.
func (c *Chart) Package(w io.Writer) (string, error) {
	all, err := c.packageFiles(0)
	if err != nil {
		return "", err
	}
	names := sortedKeys(all)
	h := sha256.New()
	gz, err := gzip.NewWriterLevel(io.MultiWriter(w, h), gzip.BestCompression)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(gz)
	for _, name := range names {
		data := all[name]
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     c.Meta.Name + "/" + name,
			Mode:     0o644,
			Size:     int64(len(data)),
			ModTime:  packageTime,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", fmt.Errorf("package %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return "", fmt.Errorf("package %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
