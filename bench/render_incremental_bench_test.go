package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
)

// benchChangedAlternating renders, converts and plans the 1,000-service
// stack of writeStack after editing one service per iteration, the first
// and the last in turn, each time to a value never rendered before. prep
// may rewrite the stack's file first. Every iteration checks that the
// edited service's spec carries the edit, so a render that reused too much
// would fail the benchmark rather than look fast.
func benchChangedAlternating(b *testing.B, prep func(string) string) {
	dir, path, base, rec := renderStack(b, prep)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		alternations++
		svc, index := "bench_svc0000", `INDEX: "0"`
		if alternations%2 == 0 {
			svc, index = "bench_svc0999", `INDEX: "999"`
		}
		value := fmt.Sprintf("edit-%d", alternations)
		changed := strings.Replace(base, index, fmt.Sprintf("INDEX: %q", value), 1)
		if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st := renderConvertPlan(b, dir, rec, charts.Upgrade)
		b.StopTimer()
		env := strings.Join(st.Services[svc].TaskTemplate.ContainerSpec.Env, " ")
		if !strings.Contains(env, "INDEX="+value) {
			b.Fatalf("%s has env %s, want INDEX=%s", svc, env, value)
		}
		b.StartTimer()
	}
}

// alternations counts across runs of the benchmarks in one process, so no
// iteration renders what an earlier one did.
var alternations int

// BenchmarkRenderConvertPlan1000ChangedAlternating is
// BenchmarkRenderConvertPlan1000Changed with the edit moving between two
// services: the cost of a commit that changed one service, whichever.
func BenchmarkRenderConvertPlan1000ChangedAlternating(b *testing.B) {
	benchChangedAlternating(b, unchanged)
}

// BenchmarkRenderConvertPlan1000ChangedAnchors is the same for a stack
// whose services merge a YAML anchor (x-common: &common, <<: *common), the
// shape that makes the compose file be parsed whole: the services are
// still loaded and converted only when they changed.
func BenchmarkRenderConvertPlan1000ChangedAnchors(b *testing.B) {
	benchChangedAlternating(b, func(s string) string {
		hc := "    healthcheck:\n      test: [\"CMD\", \"/app\", \"healthcheck\"]\n      interval: 10s\n"
		s = strings.ReplaceAll(s, hc, "    <<: *common\n")
		return strings.Replace(s, "services:\n", "x-common: &common\n  healthcheck:\n    test: [\"CMD\", \"/app\", \"healthcheck\"]\n    interval: 10s\nservices:\n", 1)
	})
}
