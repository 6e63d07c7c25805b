package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/compose"
)

// chartTemplate renders the same stack writeStack writes, from a count in
// the values.
const chartTemplate = `version: "3.8"
services:
{{- range $i := until (int .Values.count) }}
  svc{{ printf "%04d" $i }}:
    image: example/app:{{ mod $i 7 }}
    command: ["serve", ":8080"]
    environment:
      INDEX: "{{ $i }}"
      MODE: {{ $.Values.mode }}
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
{{- end }}
networks:
  back: {driver: overlay}
configs:
  shared: {file: files/app.conf}
secrets:
  token: {file: files/token}
`

func writeChart(tb testing.TB, dir string, n int) {
	tb.Helper()
	for name, body := range map[string]string{
		"Chart.yaml":           "apiVersion: v2\nname: bench\nversion: 1.0.0\n",
		"values.yaml":          "count: 1\nmode: production\n",
		"templates/stack.yaml": chartTemplate,
		"files/app.conf":       "listen 8080\n",
		"files/token":          "bench-token\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkRender1000ChartVersusCompose renders a 1,000-service stack from
// a chart (load, values, templates, merge, then the compose render) and the
// equivalent plain compose file, in the same run. The two manifests are
// checked to be identical first, so the figures compare the same output.
func BenchmarkRender1000ChartVersusCompose(b *testing.B) {
	const n = 1000
	composeDir, chartDir := b.TempDir(), b.TempDir()
	writeStack(b, composeDir, n)
	writeChart(b, chartDir, n)
	chartIn := chartengine.Dir{Root: chartDir, Path: ".", Set: map[string]any{"count": n}}
	rel := chartengine.Release{Name: "bench", Revision: 1}
	want, err := compose.Render("bench", compose.Dir{Root: composeDir})
	if err != nil {
		b.Fatal(err)
	}
	got, err := chartengine.Render(chartIn, rel)
	if err != nil {
		b.Fatal(err)
	}
	if got.Manifest != want.Manifest {
		b.Fatal("the chart's manifest differs from the compose file's")
	}
	b.Run("compose", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compose.Render("bench", compose.Dir{Root: composeDir}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chart", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := chartengine.Render(chartIn, rel); err != nil {
				b.Fatal(err)
			}
		}
	})
}
