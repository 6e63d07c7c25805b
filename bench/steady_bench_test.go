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
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// BenchmarkSteadyStatePass10Apps and BenchmarkSteadyStatePass100Apps
// measure one steady-state batch over 10 and 100 applications of 5 services
// each, on the real swarm, with live drift on: wall time, and the Docker API
// requests the batch sends, in total and per application. Side by side they
// show what a batch's reads grow with.
//
// Need a swarm (scripts/swarm-up.sh) and the test image
// (scripts/build-test-image.sh); they create 50 and 500 services with no
// replicas.
func BenchmarkSteadyStatePass10Apps(b *testing.B)  { benchSteady(b, 10) }
func BenchmarkSteadyStatePass100Apps(b *testing.B) { benchSteady(b, 100) }

func benchSteady(b *testing.B, apps int) {
	ctx := context.Background()
	ctl, be, _ := steadyFixture(b, apps, 5)
	var last backend.Stats
	b.ResetTimer()
	for b.Loop() {
		last = steadyBatch(ctx, b, ctl, be)
	}
	b.StopTimer()
	b.ReportMetric(float64(last.Total()), "requests/batch")
	b.ReportMetric(float64(last.Total())/float64(apps), "requests/app")
	b.Logf("requests of one steady batch over %d applications: %s", apps, opsOf(last))
}

// steadyFixture deploys apps applications of services services each, with
// no replicas and self-heal on, through a controller on the real backend,
// and returns both, with the metrics the backend counts its requests into,
// once the first batch has deployed them all.
func steadyFixture(tb testing.TB, apps, services int) (*reconcile.Controller, *backend.Backend, *metrics.Metrics) {
	tb.Helper()
	ctx := context.Background()
	m := metrics.New()
	be, err := backend.New(ctx, backend.Options{Logger: quiet, OnRequest: m.DockerRequests(metrics.LocalSwarm)})
	if err != nil {
		tb.Fatal(err)
	}
	repo := gittest.New(tb)
	prefix := swarmtest.Name(tb, "st")
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
		swarmtest.Cleanup(tb, name)
	}
	repo.Commit(fmt.Sprintf("%d applications", apps), files)
	ctl, err := reconcile.New(reconcile.Options{Backend: be, Logger: quiet,
		Fetcher: source.New(source.Options{CacheDir: filepath.Join(tb.TempDir(), "git"), Logger: quiet})}, list)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range ctl.RunOnce(ctx) {
		if r.Err != nil {
			tb.Fatalf("%s: %v", r.App, r.Err)
		}
	}
	return ctl, be, m
}

// steadyBatch runs one batch, fails unless every pass of it was steady and
// wrote nothing, and returns the requests it sent.
func steadyBatch(ctx context.Context, tb testing.TB, ctl *reconcile.Controller, be *backend.Backend) backend.Stats {
	tb.Helper()
	before := be.Stats()
	for _, r := range ctl.RunOnce(ctx) {
		if r.Err != nil || r.Action != charts.Unchanged || r.Deployed != nil {
			tb.Fatalf("%s: not a steady pass: %v %s", r.App, r.Err, r.Action)
		}
	}
	d := be.Stats().Sub(before)
	if d.Writes != 0 {
		tb.Fatalf("steady batch wrote %d times: %s", d.Writes, opsOf(d))
	}
	return d
}

// opsOf lists s's requests as sorted "op=n" pairs.
func opsOf(s backend.Stats) string {
	ops := make([]string, 0, len(s.Requests))
	for op, n := range s.Requests {
		ops = append(ops, fmt.Sprintf("%s=%d", op, n))
	}
	slices.Sort(ops)
	return strings.Join(ops, " ")
}
