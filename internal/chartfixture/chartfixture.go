// Package chartfixture lays out a chart for tests: a copy of an example
// chart in a fresh directory, with edits over it, as a repository would
// hold it. Tests of every package that renders charts start from it, so the
// chart they render is the one the examples ship.
package chartfixture

import (
	"os"
	"path/filepath"
	"testing"
)

// Copy copies the chart at src to <root>/chart in a fresh temporary
// directory, lays edits over the repository (slash path from root to
// content; "" deletes the file), and returns root.
func Copy(t testing.TB, src string, edits map[string]string) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return Write(filepath.Join(root, "chart", rel), string(data))
	})
	if err != nil {
		t.Fatalf("copy chart %s: %v", src, err)
	}
	for name, content := range edits {
		p := filepath.Join(root, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := Write(p, content); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Write writes content to p, making its directories.
func Write(p, content string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}
