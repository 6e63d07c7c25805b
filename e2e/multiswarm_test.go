package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// One controller, several swarms: the local one and swarms of extra daemons
// in network namespaces (swarmnodes_test.go), each an application's
// destination.

const multiStack = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    environment: {MSG: %s}
    stop_grace_period: 1s
`

func multiFiles(msg string) map[string]string {
	return map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(multiStack, msg)}
}

// multi is one controller's swarms and applications.
type multi struct {
	t     *testing.T
	id    string
	reg   *swarms.Registry
	apps  []application.Application
	repos map[string]*gittest.Repo // by application
	cache string
}

func newMulti(t *testing.T, clusters map[string]*nodeCluster) *multi {
	t.Helper()
	local, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var defs []application.Swarm
	for name, c := range clusters {
		defs = append(defs, application.Swarm{Name: name, Hosts: c.hosts})
	}
	reg, err := swarms.New(context.Background(), defs, swarms.Options{
		Local: local, Logger: quiet,
		Backend: backend.Options{Logger: quiet, RequestTimeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &multi{t: t, id: "e2e-" + swarmtest.Name(t, "ms"), reg: reg, repos: map[string]*gittest.Repo{}, cache: t.TempDir()}
}

// add declares an application of stack on dest, committed at MSG one.
func (m *multi) add(name, dest, stack string, interval time.Duration) {
	m.t.Helper()
	if dest == application.LocalDestination {
		swarmtest.Cleanup(m.t, stack)
	}
	repo := gittest.New(m.t)
	repo.Commit("initial", multiFiles("one"))
	app := application.Application{
		Name: name, Stack: stack, Destination: dest, History: 10,
		Source: application.Source{RepoURL: repo.Dir, Revision: "main", Path: "deploy"},
	}
	app.SyncPolicy.Interval.Duration = interval
	app.SyncPolicy.Automated = &application.Automated{}
	m.apps = append(m.apps, app)
	m.repos[name] = repo
}

func (m *multi) controller() *reconcile.Controller {
	m.t.Helper()
	c, err := reconcile.New(reconcile.Options{
		ControllerID:     m.id,
		Backends:         m.reg.Backends(),
		Fetcher:          source.New(source.Options{CacheDir: filepath.Join(m.cache, "git"), Logger: quiet}),
		Logger:           quiet,
		Tick:             200 * time.Millisecond,
		SwarmReadTimeout: 10 * time.Second,
	}, m.apps)
	if err != nil {
		m.t.Fatal(err)
	}
	return c
}

// writes counts the requests that may have changed each swarm so far.
func (m *multi) writes() map[string]int {
	out := map[string]int{}
	for _, name := range m.reg.Names() {
		b, _ := m.reg.Backend(name)
		out[name] = b.Stats().Writes
	}
	return out
}

// converge runs batches until every application is synced and healthy.
func (m *multi) converge(ctl *reconcile.Controller) {
	m.t.Helper()
	swarmtest.Eventually(m.t, 90*time.Second, func() (bool, string) {
		var bad []string
		for _, r := range ctl.RunOnce(context.Background()) {
			if r.Err != nil || r.Status.Sync != application.Synced || r.Status.Health != application.Healthy {
				bad = append(bad, fmt.Sprintf("%s: %v %s %s %s", r.App, r.Err, r.Status.Sync, r.Status.Health, r.Status.HealthMessage))
			}
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	})
}

func TestOneControllerDrivesThreeSwarmsAndACommitTouchesOnlyItsSwarm(t *testing.T) {
	t.Parallel()
	clusters := map[string]*nodeCluster{"east": upCluster(t, 1), "west": upCluster(t, 1)}
	m := newMulti(t, clusters)
	// One stack name on all three swarms: three applications.
	stack := swarmtest.Name(t, "ms")
	m.add("l-"+stack, application.LocalDestination, stack, time.Minute)
	m.add("e-"+stack, "east", stack, time.Minute)
	m.add("w-"+stack, "west", stack, time.Minute)
	ctl := m.controller()
	for _, r := range ctl.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Install {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
	}
	m.converge(ctl)
	for _, a := range m.apps {
		if st, _ := ctl.Status(a.Name); st.Destination != a.Destination {
			t.Errorf("%s: status destination %q, want %q", a.Name, st.Destination, a.Destination)
		}
	}

	before := m.writes()
	m.repos["e-"+stack].Commit("east only", multiFiles("two"))
	for _, r := range ctl.RunOnce(context.Background()) {
		want := charts.Unchanged
		if r.App == "e-"+stack {
			want = charts.Upgrade
		}
		if r.Err != nil || r.Action != want {
			t.Errorf("%s: %v %s, want %s", r.App, r.Err, r.Action, want)
		}
	}
	after := m.writes()
	t.Logf("writes per swarm for one commit to east: local %d, east %d, west %d",
		after["local"]-before["local"], after["east"]-before["east"], after["west"]-before["west"])
	if after["east"] == before["east"] {
		t.Error("the commit wrote nothing to its swarm")
	}
	if after["local"] != before["local"] || after["west"] != before["west"] {
		t.Errorf("a commit to east's application wrote to another swarm: before %v, after %v", before, after)
	}
}

func TestASwarmWhoseDaemonStopsGoesUnknownWhileTheOthersKeepSyncing(t *testing.T) {
	t.Parallel()
	east := upCluster(t, 1)
	m := newMulti(t, map[string]*nodeCluster{"east": east})
	stack := swarmtest.Name(t, "ms")
	const interval = 3 * time.Second
	m.add("l-"+stack, application.LocalDestination, stack, interval)
	m.add("e-"+stack, "east", stack, interval)
	ctl := m.controller()
	m.converge(ctl)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	eastWrites := m.writes()["east"]
	east.kill(1)
	stopped := time.Now()
	swarmtest.Eventually(t, 2*interval+5*time.Second, func() (bool, string) {
		st, _ := ctl.Status("e-" + stack)
		return st.Health == application.HealthUnknown, fmt.Sprintf("east's application: %s %s", st.Health, st.HealthMessage)
	})
	took := time.Since(stopped)
	t.Logf("east's application Unknown %s after its daemon stopped (interval %s)", took.Round(100*time.Millisecond), interval)
	if took > interval+2*time.Second {
		t.Errorf("Unknown only after %s, more than one interval (%s)", took, interval)
	}

	m.repos["l-"+stack].Commit("local goes on", multiFiles("two"))
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		st, _ := ctl.Status("l-" + stack)
		return st.LastAppliedRevision == 2 && st.Sync == application.Synced && st.Health == application.Healthy,
			fmt.Sprintf("local: revision %d %s %s %s", st.LastAppliedRevision, st.Sync, st.Health, st.LastError)
	})
	if st, _ := ctl.Status("e-" + stack); st.Health != application.HealthUnknown {
		t.Errorf("east's application is %s while its daemon is down", st.Health)
	}

	east.start()
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		st, _ := ctl.Status("e-" + stack)
		return st.Health == application.Healthy && st.Sync == application.Synced,
			fmt.Sprintf("east's application: %s %s %s %s", st.Sync, st.Health, st.HealthMessage, st.LastError)
	})
	if w := m.writes()["east"]; w != eastWrites {
		t.Errorf("east was written to %d times across its outage and return, want 0", w-eastWrites)
	}
}

func TestAThreeManagerSwarmThatLosesTheManagerInHostsZeroIsDrivenThroughAnother(t *testing.T) {
	t.Parallel()
	raft := upCluster(t, 3)
	m := newMulti(t, map[string]*nodeCluster{"raft": raft})
	stack := swarmtest.Name(t, "ms")
	m.add("r-"+stack, "raft", stack, time.Minute)
	ctl := m.controller()
	m.converge(ctl)
	st := m.reg.Check(context.Background())
	if len(st) != 2 || st[1].Name != "raft" || !st[1].Reachable || st[1].Nodes != 3 || st[1].Managers != 3 || st[1].Host != raft.hosts[0] {
		t.Fatalf("before: %+v", st)
	}

	raft.kill(1)
	m.repos["r-"+stack].Commit("while hosts[0] is gone", multiFiles("two"))
	// The remaining two managers elect a leader within seconds; until then
	// a pass may fail, and is retried.
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		r := ctl.RunOnce(context.Background())[0]
		return r.Err == nil && r.Status.LastAppliedRevision == 2 && r.Status.Health == application.Healthy,
			fmt.Sprintf("%v revision %d %s %s", r.Err, r.Status.LastAppliedRevision, r.Status.Health, r.Status.HealthMessage)
	})
	host, _ := m.reg.Host("raft")
	if host == raft.hosts[0] {
		t.Errorf("the controller still reports %s, whose daemon is gone, as the host in use", host)
	}
	st = m.reg.Check(context.Background())
	if !st[1].Reachable || st[1].Host != host {
		t.Errorf("after: %+v", st[1])
	}
	t.Logf("after losing %s: driven through %s; swarm list: %+v", raft.hosts[0], host, st[1])
}
