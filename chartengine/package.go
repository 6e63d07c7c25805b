package chartengine

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// LintStack is the stack name Lint renders a chart for.
const LintStack = "lint"

// Lint checks what a chart needs to deploy with its own defaults:
// Chart.yaml, the schema and values.yaml against it, every template parses
// and renders, every output is a compose mapping, and the merged document
// loads and converts as compose. It returns the render's warnings.
func Lint(root, dir string) ([]string, error) {
	c, err := Load(root, dir)
	if err != nil {
		return nil, err
	}
	r, err := c.Render(Dir{Root: root, Path: dir}, Release{Name: LintStack, Revision: 1})
	if err != nil {
		return nil, err
	}
	return r.Warnings, nil
}

// packageTime is every archive entry's modification time: a package's bytes
// depend on the chart's content only, not on when or where it was made.
var packageTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ArchiveName is the file name a package of m is written to.
func ArchiveName(m Metadata) string { return m.Name + "-" + m.Version + ".tgz" }

// Package writes c as a gzipped tar, every file under "<name>/", in path
// order, with fixed times, owners and modes, and returns the archive's
// sha256 in hex. The same chart gives the same bytes on every machine.
func (c *Chart) Package(w io.Writer) (string, error) {
	h := sha256.New()
	gz, err := gzip.NewWriterLevel(io.MultiWriter(w, h), gzip.BestCompression)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(gz)
	for _, name := range c.Files() {
		data := c.all[name]
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
