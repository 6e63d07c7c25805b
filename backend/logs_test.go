package backend

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestServiceLogTailReturnsTheLastLinesAFailedJobWrote(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "logs")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	file := `version: "3.8"
services:
  job:
    image: ` + swarmtest.Image + `
    command: ["exit", "3"]
    environment:
      ZZ_LAST_WORDS: "migration 42 failed"
    deploy:
      mode: replicated-job
      restart_policy: {condition: none}
`
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir, Files: []string{"compose.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest}); err != nil {
		t.Fatal(err)
	}
	var id string
	var lines []string
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		states, err := b.ReadStackServices(ctx, stack)
		if err != nil || len(states) != 1 {
			return false, "no job yet"
		}
		id = states[0].ID
		lines, err = b.ServiceLogTail(ctx, id, 3)
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "migration 42 failed") }), strings.Join(lines, "\n")
	})
	if len(lines) > 3 {
		t.Errorf("%d lines, asked for 3: %q", len(lines), lines)
	}
}
