package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// render names every field the declared engine API version would drop, and
// nothing for a version that carries them all.
func TestRenderNamesFieldsTheDeclaredAPIVersionDrops(t *testing.T) {
	dir := t.TempDir()
	file := `services:
  probe:
    image: nginx:1.25
    healthcheck:
      test: ["CMD", "true"]
      start_interval: 2s
    deploy:
      resources:
        limits:
          pids: 50
`
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	for version, want := range map[string][]string{
		"1.40": {"healthcheck.start_interval needs engine API 1.44", "deploy.resources.limits.pids needs engine API 1.41"},
		"1.41": {"healthcheck.start_interval needs engine API 1.44 and is dropped for API 1.41"},
		"1.44": nil,
	} {
		var out, errb bytes.Buffer
		opts := renderOptions{Path: dir, Stack: "x", Output: "yaml", APIVersion: version}
		if code := runRender(context.Background(), opts, &out, &errb); code != exitOK {
			t.Fatalf("%s: exit %d: %s", version, code, errb.String())
		}
		if got := strings.Count(errb.String(), "warning:"); got != len(want) {
			t.Errorf("%s: %d warnings, want %d:\n%s", version, got, len(want), errb.String())
		}
		for _, w := range want {
			if !strings.Contains(errb.String(), "warning: service probe: "+w) {
				t.Errorf("%s: stderr does not name %q:\n%s", version, w, errb.String())
			}
		}
	}
	var errb bytes.Buffer
	if code := runRender(context.Background(), renderOptions{Path: dir, Stack: "x", Output: "yaml", APIVersion: "latest"}, &bytes.Buffer{}, &errb); code != exitMisuse {
		t.Errorf("--api-version latest: exit %d, want %d", code, exitMisuse)
	}
}
