package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --values is read as helm -f reads it: from the current directory, or
// absolute. Before, an absolute path lost its leading slash and was
// reported missing from the chart.
func TestRenderValuesAreRelativeToTheCurrentDirectory(t *testing.T) {
	chart := copyChart(t)
	work := t.TempDir()
	writeFile := func(p, s string) string {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	abs := writeFile(filepath.Join(work, "mine.yaml"), "web:\n  message: absolute\n")
	writeFile(filepath.Join(work, "replicas.yaml"), "web:\n  replicas: 5\n")
	t.Chdir(work)

	cases := []struct {
		name   string
		values []string
		want   []string
		note   bool
	}{
		{"absolute path outside the chart", []string{abs}, []string{"APP_MESSAGE: absolute"}, false},
		{"relative to the current directory", []string{"mine.yaml"}, []string{"APP_MESSAGE: absolute"}, false},
		{"inside the chart by a path from here", []string{filepath.Join(chart, "values-eu.yaml")}, []string{"APP_MESSAGE: hallo"}, false},
		{"order kept across chart and machine files", []string{filepath.Join(chart, "values-eu.yaml"), "mine.yaml", "replicas.yaml"}, []string{"APP_MESSAGE: absolute", "replicas: 5"}, false},
		{"later chart file wins over an earlier machine file", []string{"mine.yaml", filepath.Join(chart, "values-eu.yaml")}, []string{"APP_MESSAGE: hallo"}, false},
		{"a chart file named as before still works, with a note", []string{"values-eu.yaml"}, []string{"APP_MESSAGE: hallo"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs := renderOut(t, renderOptions{Path: chart, Stack: "shop", chartFlags: chartFlags{ValueFiles: c.values}})
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if got := strings.Contains(errs, "reading it from the chart"); got != c.note {
				t.Errorf("note printed %v, want %v: %s", got, c.note, errs)
			}
		})
	}

	t.Run("a missing absolute file is named", func(t *testing.T) {
		var out, errb bytes.Buffer
		missing := filepath.Join(work, "nope.yaml")
		code := runRender(context.Background(), renderOptions{Path: chart, Output: "yaml", chartFlags: chartFlags{ValueFiles: []string{missing}, Revision: 1}}, &out, &errb)
		if code != exitMisuse || !strings.Contains(errb.String(), missing) {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	})
}
