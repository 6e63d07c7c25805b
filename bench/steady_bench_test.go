package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// BenchmarkSteadyStatePass100Apps measures one steady-state batch over 100
// applications of 5 services each, on the real swarm, with live drift on:
// wall time, and the Docker API requests the batch sends, in total and per
// application. The whole-swarm reads (service and task lists for health)
// happen once per batch; what grows with the number of applications is only
// what live drift needs per application (its stack's services, and the
// config, secret and network listings its conversion resolves against).
//
// Needs a swarm (scripts/swarm-up.sh) and the test image
// (scripts/build-test-image.sh); it creates 500 services with no replicas.
func BenchmarkSteadyStatePass100Apps(b *testing.B) {
	const apps, services = 100, 5
	ctx := context.Background()
	be, err := backend.New(ctx, backend.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	repo := gittest.New(b)
	prefix := swarmtest.Name(b, "st")
	files := map[string]string{}
	var list []application.Application
	for i := range apps {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		var c strings.Builder
		c.WriteString("version: \"3.8\"\nservices:\n")
		for j := range services {
			fmt.Fprintf(&c, "  svc%d:\n    image: %s\n    environment: {APP: \"%d\"}\n    deploy: {replicas: 0}\n", j, swarmtest.Image, i)
		}
		files[name+"/docker-compose.yml"] = c.String()
		a := application.Application{Name: name, Stack: name, History: 10,
			Source: application.Source{RepoURL: repo.Dir, Revision: "main", Path: name}}
		a.SyncPolicy.Automated = &application.Automated{SelfHeal: true}
		a.SyncPolicy.Interval.Duration = time.Hour
		list = append(list, a)
		swarmtest.Cleanup(b, name)
	}
	repo.Commit("100 applications", files)
	ctl, err := reconcile.New(reconcile.Options{Backend: be, Logger: quiet,
		Fetcher: source.New(source.Options{CacheDir: filepath.Join(b.TempDir(), "git"), Logger: quiet})}, list)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range ctl.RunOnce(ctx) {
		if r.Err != nil {
			b.Fatalf("%s: %v", r.App, r.Err)
		}
	}
	var last backend.Stats
	b.ResetTimer()
	for b.Loop() {
		before := be.Stats()
		for _, r := range ctl.RunOnce(ctx) {
			if r.Err != nil || r.Action != charts.Unchanged || r.Deployed != nil {
				b.Fatalf("%s: not a steady pass: %v %s", r.App, r.Err, r.Action)
			}
		}
		last = be.Stats().Sub(before)
	}
	b.StopTimer()
	if last.Writes != 0 {
		b.Fatalf("steady batch wrote %d times: %v", last.Writes, last.Requests)
	}
	b.ReportMetric(float64(last.Total()), "requests/batch")
	b.ReportMetric(float64(last.Total())/apps, "requests/app")
	ops := make([]string, 0, len(last.Requests))
	for op, n := range last.Requests {
		ops = append(ops, fmt.Sprintf("%s=%d", op, n))
	}
	slices.Sort(ops)
	b.Logf("requests of one steady batch over %d applications: %s", apps, strings.Join(ops, " "))
}
