package imagewrite_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/imagewrite"
	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLoop_commitsEachNewTagOnceAndMakesThePassDue(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.1.0", registrytest.Image{Content: "2"})
	origin := newRemote(t, map[string]string{"compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.0.0\n", reg.Host)})
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Semver: "^1",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}},
	})
	a.ImageUpdates.Interval.Duration = 50 * time.Millisecond

	var mu sync.Mutex
	var refreshed []string
	var published []events.Event
	m := metrics.New()
	loop := &imagewrite.Loop{
		Updater: &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{Interval: 10 * time.Millisecond}), ScratchDir: t.TempDir() + "/scratch"},
		Apps:    func() []application.Application { return []application.Application{*a} },
		Refresh: func(name string) error {
			mu.Lock()
			refreshed = append(refreshed, name)
			mu.Unlock()
			return nil
		},
		Publish: func(e events.Event) {
			mu.Lock()
			published = append(published, e)
			mu.Unlock()
		},
		Metrics: m,
		Tick:    20 * time.Millisecond,
	}
	ofType := func(typ events.Type) []events.Event {
		mu.Lock()
		defer mu.Unlock()
		var out []events.Event
		for _, e := range published {
			if e.Type == typ {
				out = append(out, e)
			}
		}
		return out
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	refreshes := func() int { mu.Lock(); defer mu.Unlock(); return len(refreshed) }
	waitFor(t, "the first commit", func() bool { return strings.Contains(origin.file("compose.yaml"), "shop:1.1.0") })
	waitFor(t, "the refresh", func() bool { return refreshes() == 1 })
	first := origin.head().Hash
	// Several intervals with nothing new: no commit, no refresh.
	runsBefore := loopRuns(loop, "shop")
	waitFor(t, "three more runs", func() bool { return loopRuns(loop, "shop").After(runsBefore.Add(100 * time.Millisecond)) })
	if origin.head().Hash != first || refreshes() != 1 {
		t.Fatalf("an interval with nothing new committed or refreshed (refreshes %d)", refreshes())
	}
	if c := ofType(events.ImageCommitted); len(c) != 1 || c[0].Revision != first.String() || c[0].App != "shop" {
		t.Fatalf("commit events %+v, want one for %s", c, first)
	}
	newest := reg.Push(t, "shop", "1.2.0", registrytest.Image{Content: "3"})
	waitFor(t, "the second commit", func() bool { return strings.Contains(origin.file("compose.yaml"), "shop:1.2.0") })
	waitFor(t, "the second refresh", func() bool { return refreshes() == 2 })
	if st, ok := loop.Status("shop"); !ok || st.LastCommit != origin.head().Hash.String() {
		t.Fatalf("status %+v, want the last commit %s", st, origin.head().Hash)
	}
	if parent, err := origin.head().Parent(0); err != nil || parent.Hash != first {
		t.Fatalf("the second commit is not on the first: %v", err)
	}

	// 1.2.0 vanishes: held back, reported once however many intervals
	// pass, and counted.
	reg.Delete(t, "shop", newest)
	waitFor(t, "the held event", func() bool { return len(ofType(events.ImageHeld)) == 1 })
	runsBefore = loopRuns(loop, "shop")
	waitFor(t, "more runs", func() bool { return loopRuns(loop, "shop").After(runsBefore.Add(100 * time.Millisecond)) })
	held := ofType(events.ImageHeld)
	if len(held) != 1 || held[0].Data["outcome"] != "vanished" || held[0].Data["field"] != "services.web.image" {
		t.Fatalf("held events %+v, want one vanished for services.web.image", held)
	}
	if n := len(ofType(events.ImageCommitted)); n != 2 {
		t.Fatalf("%d commit events, want 2", n)
	}
	if v := gathered(t, m, "flotilla_image_commits_total"); v != 2 {
		t.Errorf("flotilla_image_commits_total = %v, want 2", v)
	}
}

func loopRuns(l *imagewrite.Loop, app string) time.Time {
	st, _ := l.Status(app)
	return st.At
}

// gathered sums the samples of one counter or gauge family.
func gathered(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			sum += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	return sum
}
