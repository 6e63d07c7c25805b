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

// BenchmarkSteadyStatePass10Apps, BenchmarkSteadyStatePass100Apps and
// BenchmarkSteadyStatePass1000Apps measure one steady-state batch over 10
// and 100 applications of 5 services each, each mounting a config and a
// secret of its own, and over the 1,000 applications of thousandApps, on
// the real swarm, with live drift on: wall time, and the Docker API
// requests the batch sends, in total and per application. Side by side
// they show what a batch's reads grow with.
//
// Need a swarm (scripts/swarm-up.sh) and the test image
// (scripts/build-test-image.sh); they create 50, 500 and 1,100 services
// with no replicas. The 1,000-application one takes minutes to build its
// swarm on two cores (run it alone: -run XXX -bench SteadyStatePass1000Apps
// -benchtime 3x).
func BenchmarkSteadyStatePass10Apps(b *testing.B) {
	benchSteady(b, steadyShape{apps: 10, full: 10, services: 5})
}
func BenchmarkSteadyStatePass100Apps(b *testing.B) {
	benchSteady(b, steadyShape{apps: 100, full: 100, services: 5})
}
func BenchmarkSteadyStatePass1000Apps(b *testing.B) { benchSteady(b, thousandApps) }

func benchSteady(b *testing.B, shape steadyShape) {
	ctx := context.Background()
	f := steadyFixture(b, shape)
	ctl := f.ctl
	// The first batch after a deploy compares every application in full;
	// the steady state is what follows it.
	steadyBatch(ctx, b, ctl, f.be)
	var last backend.Stats
	b.ResetTimer()
	for b.Loop() {
		last = steadyBatch(ctx, b, ctl, f.be)
	}
	b.StopTimer()
	b.ReportMetric(float64(last.Total()), "requests/batch")
	b.ReportMetric(float64(last.Total())/float64(shape.apps), "requests/app")
	b.Logf("requests of one steady batch over %d applications: %s", shape.apps, opsOf(last))
}

// steadyShape is the workload of a steady batch: apps applications, the
// first full of them with services services, a network of their own, and
// a config and a secret mounted into their first service (so a conversion
// has ids to resolve); the others with one service on the swarm's host
// network and nothing else, which keeps 1,000 applications cheap to build
// and tear down on a shared daemon.
type steadyShape struct {
	apps, full, services int
}

// thousandApps is the 1,000-application workload: 100 applications of two
// services with their own network, config and secret, and 900 of one
// service each.
var thousandApps = steadyShape{apps: 1000, full: 100, services: 2}

// steady is a deployed steady workload: the applications in order, the
// controller and backend (and its request metrics) that deployed them.
type steady struct {
	apps    []application.Application
	ctl     *reconcile.Controller
	be      *backend.Backend
	m       *metrics.Metrics
	fetcher reconcile.Fetcher
}

// steadyFixture deploys shape through a controller on the real backend,
// with no replicas and self-heal on, and returns it once that first batch
// has deployed every application.
func steadyFixture(tb testing.TB, shape steadyShape) *steady {
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
	f := &steady{be: be, m: m}
	for i := range shape.apps {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		var c strings.Builder
		c.WriteString("version: \"3.8\"\nservices:\n")
		a := application.Application{Name: name, Stack: name, History: 10,
			Source: application.Source{RepoURL: repo.Dir, Revision: "main", Path: name}}
		if i < shape.full {
			for j := range shape.services {
				fmt.Fprintf(&c, "  svc%d:\n    image: %s\n    environment: {APP: \"%d\"}\n    deploy: {replicas: 0}\n", j, swarmtest.Image, i)
				if j == 0 {
					c.WriteString("    configs: [{source: conf, target: /etc/app.conf}]\n    secrets: [token]\n")
				}
			}
			c.WriteString("configs:\n  conf: {file: ./app.conf}\nsecrets:\n  token: {file: ./token}\n")
			files[name+"/app.conf"] = fmt.Sprintf("app %d\n", i)
			files[name+"/token"] = fmt.Sprintf("token %d\n", i)
		} else {
			fmt.Fprintf(&c, "  svc0:\n    image: %s\n    environment: {APP: \"%d\"}\n    deploy: {replicas: 0}\n    networks: [hostnet]\n", swarmtest.Image, i)
			c.WriteString("networks:\n  hostnet: {external: true, name: host}\n")
			a.Allow.Networks = []string{"host"}
		}
		files[name+"/docker-compose.yml"] = c.String()
		a.SyncPolicy.Automated = &application.Automated{SelfHeal: true}
		a.SyncPolicy.Interval.Duration = time.Hour
		f.apps = append(f.apps, a)
	}
	cleanupPrefix(tb, prefix)
	repo.Commit(fmt.Sprintf("%d applications", shape.apps), files)
	f.fetcher = source.New(source.Options{CacheDir: filepath.Join(tb.TempDir(), "git"), Logger: quiet})
	f.ctl = f.controller(tb, shape.apps)
	for _, r := range f.ctl.RunOnce(ctx) {
		if r.Err != nil {
			tb.Fatalf("%s: %v", r.App, r.Err)
		}
	}
	return f
}

// controller is a controller of its own over the first n applications, as
// a controller with that applications file would be: nothing cached, its
// stacks already deployed. It never sweeps orphans, so the applications it
// does not hold are left alone.
func (f *steady) controller(tb testing.TB, n int) *reconcile.Controller {
	tb.Helper()
	ctl, err := reconcile.New(reconcile.Options{Backend: f.be, Logger: quiet, Fetcher: f.fetcher}, f.apps[:n])
	if err != nil {
		tb.Fatal(err)
	}
	return ctl
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
