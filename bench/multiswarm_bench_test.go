package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	"github.com/flotilla-gitops/flotilla/swarms"
)

// BenchmarkSteadyBatch3Swarms100AppsEach and BenchmarkSteadyBatch1Swarm300Apps
// measure one steady-state round of batches over 300 applications of one
// service (no replicas, self-heal on): spread over three swarms (the local
// one and two single-node swarms of extra daemons in network namespaces,
// made by scripts/swarm-nodes.sh), or all on the local swarm. Each reports
// the wall time of the round and, per swarm, the Docker requests of its one
// batch: reads of the whole swarm (lists and info) and all requests. Side by
// side they show that a swarm's batch reads do not grow with the number of
// swarms, and that the batches of several swarms run side by side.
//
// Need root, a swarm (scripts/swarm-up.sh), the test image and
// scripts/swarm-nodes.sh; they create 300 services.
func BenchmarkSteadyBatch3Swarms100AppsEach(b *testing.B) {
	benchSwarms(b, []string{application.LocalDestination, "east", "west"}, 100)
}

func BenchmarkSteadyBatch1Swarm300Apps(b *testing.B) {
	benchSwarms(b, []string{application.LocalDestination}, 300)
}

func benchSwarms(b *testing.B, dests []string, perSwarm int) {
	ctx := context.Background()
	reg := benchRegistry(b, dests)
	repo := gittest.New(b)
	prefix := swarmtest.Name(b, "ms")
	files := map[string]string{}
	var apps []application.Application
	for _, dest := range dests {
		for i := range perSwarm {
			name := fmt.Sprintf("%s-%s-%03d", prefix, dest, i)
			files[name+"/docker-compose.yml"] = fmt.Sprintf("version: \"3.8\"\nservices:\n  svc:\n    image: %s\n    environment: {APP: \"%d\"}\n    deploy: {replicas: 0}\n", swarmtest.Image, i)
			a := application.Application{Name: name, Stack: name, Destination: dest, History: 10,
				Source: application.Source{RepoURL: repo.Dir, Revision: "main", Path: name}}
			a.SyncPolicy.Automated = &application.Automated{SelfHeal: true}
			a.SyncPolicy.Interval.Duration = time.Hour
			apps = append(apps, a)
			if dest == application.LocalDestination {
				swarmtest.Cleanup(b, name)
			}
		}
	}
	repo.Commit("applications", files)
	ctl, err := reconcile.New(reconcile.Options{Backends: reg.Backends(), Logger: quiet,
		Fetcher: source.New(source.Options{CacheDir: filepath.Join(b.TempDir(), "git"), Logger: quiet})}, apps)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range ctl.RunOnce(ctx) {
		if r.Err != nil {
			b.Fatalf("%s: %v", r.App, r.Err)
		}
	}
	stats := func() map[string]backend.Stats {
		out := map[string]backend.Stats{}
		for _, d := range dests {
			be, _ := reg.Backend(d)
			out[d] = be.Stats()
		}
		return out
	}
	var last map[string]backend.Stats
	var rounds int
	var spent time.Duration
	b.ResetTimer()
	for b.Loop() {
		before := stats()
		began := time.Now()
		results := ctl.RunOnce(ctx)
		spent += time.Since(began)
		rounds++
		for _, r := range results {
			if r.Err != nil || r.Action != charts.Unchanged || r.Deployed != nil {
				b.Fatalf("%s: not a steady pass: %v %s", r.App, r.Err, r.Action)
			}
		}
		after := stats()
		last = map[string]backend.Stats{}
		for _, d := range dests {
			last[d] = after[d].Sub(before[d])
			if last[d].Writes != 0 {
				b.Fatalf("swarm %s: a steady round wrote %d times", d, last[d].Writes)
			}
		}
	}
	b.StopTimer()
	var reads, total int
	for _, d := range dests {
		r := swarmReads(last[d])
		reads += r
		total += last[d].Total()
		b.Logf("swarm %s, %d applications: %d swarm reads, %d requests in its batch: %s", d, perSwarm, r, last[d].Total(), opsOf(last[d]))
	}
	// Logged as well as reported: the cleanup of 300 stacks after the loop
	// can take longer than the loop itself on a busy machine.
	b.Logf("%d swarm(s) x %d applications: %s per steady round (mean of %d)", len(dests), perSwarm, (spent / time.Duration(rounds)).Round(time.Millisecond), rounds)
	b.ReportMetric(float64(reads)/float64(len(dests)), "swarm-reads/batch/swarm")
	b.ReportMetric(float64(total)/float64(len(dests)), "requests/batch/swarm")
}

// swarmReads counts the requests that read the whole swarm rather than one
// object: listings and info.
func swarmReads(s backend.Stats) int {
	n := 0
	for op, c := range s.Requests {
		if strings.HasSuffix(op, ".list") || op == "info" {
			n += c
		}
	}
	return n
}

// benchRegistry connects the local swarm and, for every other destination,
// a fresh single-node swarm of scripts/swarm-nodes.sh, torn down after b.
func benchRegistry(b *testing.B, dests []string) *swarms.Registry {
	b.Helper()
	local, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	var defs []application.Swarm
	for _, d := range dests {
		if d == application.LocalDestination {
			continue
		}
		defs = append(defs, application.Swarm{Name: d, Hosts: []string{benchCluster(b)}})
	}
	reg, err := swarms.New(context.Background(), defs, swarms.Options{Local: local, Logger: quiet, Backend: backend.Options{Logger: quiet}})
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// benchCluster makes a one-node swarm and returns its Docker host.
func benchCluster(b *testing.B) string {
	b.Helper()
	script := filepath.Join("..", "scripts", "swarm-nodes.sh")
	if _, err := os.Stat(script); err != nil || os.Geteuid() != 0 {
		b.Skipf("needs %s and root", script)
	}
	var r [3]byte
	if _, err := rand.Read(r[:]); err != nil {
		b.Fatal(err)
	}
	name := "mb" + hex.EncodeToString(r[:])
	run := func(args ...string) string {
		var out, errb bytes.Buffer
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("swarm-nodes.sh %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	b.Cleanup(func() { run("down", name) })
	run("up", name, "1", "--owner", strconv.Itoa(os.Getpid()))
	f := strings.Fields(run("status", name))
	if len(f) < 3 {
		b.Fatalf("cluster %s: status %q", name, f)
	}
	return f[2]
}
