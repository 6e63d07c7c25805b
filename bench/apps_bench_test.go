package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	flmetrics "github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// BenchmarkSetApplications10000 loads 10,000 applications into a controller
// that already runs one, lets each run its first pass (so each has a status
// and metric series, as in a running controller), and removes them again.
// It reports the wall time of the load, of the 10,000 first passes and of the
// removal, how long after the passes began the one application already
// running had its own pass done, the longest an API read (Statuses) waited
// during the load or the removal, and the process's resident memory and live
// heap with the 10,000 loaded and after their removal.
//
// The passes run against the in-memory backend with one two-service tree for
// every application; no swarm is touched. The heap figures include that
// in-memory swarm: the loaded one holds 10,000 stacks, the removed one only
// their release records.
func BenchmarkSetApplications10000(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	compose := "version: \"3.8\"\nservices:\n  web: {image: example/web:1}\n  worker: {image: example/worker:1}\n"
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(compose), 0o644); err != nil {
		b.Fatal(err)
	}
	app := func(name string) application.Application {
		a := application.Application{Name: name, Stack: name, History: 10,
			Source: application.Source{RepoURL: "/repo", Revision: "main", Path: "."}}
		a.SyncPolicy.Automated = &application.Automated{}
		a.SyncPolicy.Interval.Duration = time.Hour
		return a
	}
	other := app("other")
	many := []application.Application{other}
	for i := range n {
		many = append(many, app(fmt.Sprintf("app-%05d", i)))
	}
	swarm := chartstest.NewMinimal()
	ctl, err := reconcile.New(reconcile.Options{Backend: swarm, Fetcher: oneTree{dir},
		Logger: quiet, Metrics: flmetrics.New()}, []application.Application{other})
	if err != nil {
		b.Fatal(err)
	}
	ctl.RunOnce(context.Background())
	runtime.GC()
	baseRSS, baseHeap := rssBytes(b), heapBytes()

	var load, remove, passes, otherPass, apiLoad, apiRemove time.Duration
	var loadedRSS, loadedHeap, afterRSS, afterHeap uint64
	for b.Loop() {
		probe := startProbe(ctl)
		start := time.Now()
		ctl.SetApplications(many)
		load += time.Since(start)
		apiLoad = max(apiLoad, probe.stop())

		start = time.Now()
		for _, r := range ctl.RunOnce(context.Background()) {
			if r.Err != nil {
				b.Fatalf("%s: %v", r.App, r.Err)
			}
		}
		passes += time.Since(start)
		st, _ := ctl.Status("other")
		otherPass = max(otherPass, st.LastPass.Sub(start))
		runtime.GC()
		loadedRSS, loadedHeap = rssBytes(b), heapBytes()

		probe = startProbe(ctl)
		start = time.Now()
		ctl.SetApplications([]application.Application{other})
		remove += time.Since(start)
		apiRemove = max(apiRemove, probe.stop())
		if got := len(ctl.Statuses()); got != 1 {
			b.Fatalf("%d applications left after the removal", got)
		}
		// The in-memory swarm still runs the removed applications' stacks
		// (they are orphans, not pruned); drop them so that what remains is
		// the controller's own memory (and the fake's release records).
		for _, a := range many[1:] {
			if err := swarm.RemoveStack(context.Background(), a.Stack); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		afterRSS, afterHeap = rssBytes(b), heapBytes()
	}
	iters := float64(b.N)
	b.ReportMetric(load.Seconds()/iters, "load-s")
	b.ReportMetric(remove.Seconds()/iters, "remove-s")
	b.ReportMetric(passes.Seconds()/iters, "first-passes-s")
	b.ReportMetric(otherPass.Seconds(), "other-pass-done-s")
	b.ReportMetric(float64(apiLoad.Microseconds())/1000, "max-api-wait-load-ms")
	b.ReportMetric(float64(apiRemove.Microseconds())/1000, "max-api-wait-remove-ms")
	b.ReportMetric(mib(baseRSS), "base-rss-MiB")
	b.ReportMetric(mib(loadedRSS), "loaded-rss-MiB")
	b.ReportMetric(mib(afterRSS), "removed-rss-MiB")
	b.ReportMetric(mib(baseHeap), "base-heap-MiB")
	b.ReportMetric(mib(loadedHeap), "loaded-heap-MiB")
	b.ReportMetric(mib(afterHeap), "removed-heap-MiB")
}

// probe calls Statuses in a loop, as API clients would, and keeps the
// longest call.
type probe struct {
	done    chan struct{}
	wg      sync.WaitGroup
	longest time.Duration
}

func startProbe(ctl *reconcile.Controller) *probe {
	p := &probe{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case <-p.done:
				return
			default:
			}
			start := time.Now()
			ctl.Statuses()
			p.longest = max(p.longest, time.Since(start))
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

func (p *probe) stop() time.Duration {
	close(p.done)
	p.wg.Wait()
	return p.longest
}

// rssBytes is the process's resident set size from /proc/self/status.
func rssBytes(b *testing.B) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// heapBytes is the live heap (objects not yet freed) from runtime/metrics.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }
