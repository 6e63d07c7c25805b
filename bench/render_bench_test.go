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

// BenchmarkRenderConvertPlan1000 measures what a pass does before touching
// the swarm for a 1,000-service stack: load and render the compose project,
// convert the manifest to swarm specs, and plan it against a record.
func BenchmarkRenderConvertPlan1000(b *testing.B) {
	dir := b.TempDir()
	writeStack(b, dir, 1000)
	ctx := context.Background()
	first, err := compose.Render("bench", compose.Dir{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	rec := &charts.Release{Name: "bench", Revision: 1, Owner: "ctl/bench", Manifest: first.Manifest}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := compose.Render("bench", compose.Dir{Root: dir})
		if err != nil {
			b.Fatal(err)
		}
		st, err := compose.Convert(ctx, r.Manifest, "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Services) != 1000 {
			b.Fatalf("%d services", len(st.Services))
		}
		if charts.Plan(r.Manifest, "ctl/bench", rec) != charts.Unchanged {
			b.Fatal("identical render planned as a change")
		}
	}
}

// BenchmarkRenderConvertPlan1000Changed is BenchmarkRenderConvertPlan1000
// for a commit that changed the stack: one service's environment differs
// in every iteration, so nothing of an earlier render can be reused and the
// loader reads the whole project, the manifest is written and converted, and
// the plan is an upgrade. What a pass costs when git moved.
func BenchmarkRenderConvertPlan1000Changed(b *testing.B) {
	// changes counts across runs of the benchmark in one process, so no run
	// renders what an earlier one did.
	dir := b.TempDir()
	writeStack(b, dir, 1000)
	path := filepath.Join(dir, "docker-compose.yml")
	base, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	first, err := compose.Render("bench", compose.Dir{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	rec := &charts.Release{Name: "bench", Revision: 1, Owner: "ctl/bench", Manifest: first.Manifest}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		changes++
		changed := strings.Replace(string(base), `INDEX: "0"`, fmt.Sprintf(`INDEX: "changed-%d"`, changes), 1)
		if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, err := compose.Render("bench", compose.Dir{Root: dir})
		if err != nil {
			b.Fatal(err)
		}
		st, err := compose.Convert(ctx, r.Manifest, "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Services) != 1000 {
			b.Fatalf("%d services", len(st.Services))
		}
		if charts.Plan(r.Manifest, "ctl/bench", rec) != charts.Upgrade {
			b.Fatal("changed render not planned as an upgrade")
		}
	}
}

var changes int
