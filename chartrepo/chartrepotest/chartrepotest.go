// Package chartrepotest publishes charts into a directory that a test
// serves as a chart repository: the archive `flotilla chart package` makes
// and the index `flotilla chart index` writes, so tests exercise the real
// formats rather than hand-written ones.
package chartrepotest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/chartrepo"
)

// Created is the fixed creation time of every index Publish writes, so the
// same archives give the same index.
var Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Publish writes files (paths beginning with the chart's directory, name)
// into a fresh directory, packages the chart there into dir and rebuilds
// dir's index.yaml over every archive dir holds.
func Publish(t testing.TB, dir, name string, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for rel, text := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := chartengine.Load(root, name)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.Package(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, chartengine.ArchiveName(c.Meta)), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := chartrepo.BuildIndex(dir, "", Created)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.yaml"), ix, 0o644); err != nil {
		t.Fatal(err)
	}
}
