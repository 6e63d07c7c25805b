// Package bench holds Flotilla's benchmarks. Performance claims come from
// here, compared side by side with `docker stack deploy` in one run
// (compare.sh), never from timed assertions in tests.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// writeStack writes a compose project of n services sharing one network,
// one config and one secret, shaped like a real stack rather than n copies
// of the smallest service.
func writeStack(tb testing.TB, dir string, n int) {
	tb.Helper()
	var b strings.Builder
	b.WriteString("version: \"3.8\"\nservices:\n")
	for i := range n {
		fmt.Fprintf(&b, `  svc%04d:
    image: example/app:%d
    command: ["serve", ":8080"]
    environment:
      INDEX: "%d"
      MODE: production
    networks: [back]
    configs: [{source: shared, target: /etc/app.conf}]
    secrets: [token]
    healthcheck:
      test: ["CMD", "/app", "healthcheck"]
      interval: 10s
    deploy:
      replicas: 0
      resources:
        limits: {cpus: "0.5", memory: 64M}
      placement:
        constraints: [node.role == manager]
`, i, i%7, i)
	}
	b.WriteString("networks:\n  back: {driver: overlay}\nconfigs:\n  shared: {file: ./app.conf}\nsecrets:\n  token: {file: ./token}\n")
	for name, body := range map[string]string{
		"docker-compose.yml": b.String(),
		"app.conf":           "listen 8080\n",
		"token":              "bench-token\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// renderStack writes the 1,000-service stack of writeStack, rewritten by
// prep, into a new directory and renders it once. It returns the
// directory, the compose file, its text and a record of that first render,
// which the benchmarks' iterations plan against.
func renderStack(b *testing.B, prep func(string) string) (dir, path, text string, rec *charts.Release) {
	b.Helper()
	dir = b.TempDir()
	writeStack(b, dir, 1000)
	path = filepath.Join(dir, "docker-compose.yml")
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	text = prep(string(raw))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	first, err := compose.Render("bench", compose.Dir{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	return dir, path, text, &charts.Release{Name: "bench", Revision: 1, Owner: "ctl/bench", Manifest: first.Manifest}
}

// renderConvertPlan is what the benchmarks time: render dir, convert the
// manifest and plan it against rec. It fails b unless every service was
// converted and the plan is want.
func renderConvertPlan(b *testing.B, dir string, rec *charts.Release, want charts.Action) *compose.Stack {
	b.Helper()
	r, err := compose.Render("bench", compose.Dir{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	st, err := compose.Convert(context.Background(), r.Manifest, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(st.Services) != 1000 {
		b.Fatalf("%d services", len(st.Services))
	}
	if got := charts.Plan(r.Manifest, "ctl/bench", rec); got != want {
		b.Fatalf("planned as %s, want %s", got, want)
	}
	return st
}

func unchanged(s string) string { return s }

// BenchmarkRenderConvertPlan1000 measures what a pass does before touching
// the swarm for a 1,000-service stack: load and render the compose project,
// convert the manifest to swarm specs, and plan it against a record.
func BenchmarkRenderConvertPlan1000(b *testing.B) {
	dir, _, _, rec := renderStack(b, unchanged)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		renderConvertPlan(b, dir, rec, charts.Unchanged)
	}
}

// BenchmarkRenderConvertPlan1000Changed is BenchmarkRenderConvertPlan1000
// for a commit that changed the stack: one service's environment differs
// in every iteration, so nothing of an earlier render can be reused and the
// loader reads the whole project, the manifest is written and converted, and
// the plan is an upgrade. What a pass costs when git moved.
func BenchmarkRenderConvertPlan1000Changed(b *testing.B) {
	dir, path, base, rec := renderStack(b, unchanged)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		changes++
		changed := strings.Replace(base, `INDEX: "0"`, fmt.Sprintf(`INDEX: "changed-%d"`, changes), 1)
		if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		renderConvertPlan(b, dir, rec, charts.Upgrade)
	}
}

// changes counts across runs of the benchmark in one process, so no run
// renders what an earlier one did.
var changes int
