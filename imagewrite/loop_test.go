package imagewrite_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

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

// The last commit is read back from git by a loop that never made it (a
// restarted controller, a standby taking over): the newest commit of this
// application's updater on the branch, with its time, and not a later one
// by a human or by another application's updater, even one that copies
// the trailer.
func TestLoop_aNewLoopReadsTheLastCommitFromGit(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.1.0", registrytest.Image{Content: "2"})
	origin := newRemote(t, map[string]string{"compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.0.0\n", reg.Host)})
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Semver: "^1",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}},
	})
	a.ImageUpdates.Interval.Duration = time.Hour
	newLoop := func() *imagewrite.Loop {
		return &imagewrite.Loop{
			Updater: &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{}), ScratchDir: t.TempDir()},
			Apps:    func() []application.Application { return []application.Application{*a} },
			Tick:    20 * time.Millisecond,
		}
	}
	// runOnce runs l until it has run for the application once.
	runOnce := func(l *imagewrite.Loop) imagewrite.LoopStatus {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		waitFor(t, "a run", func() bool { _, ok := l.Status("shop"); return ok })
		st, _ := l.Status("shop")
		if st.Err != nil {
			t.Fatalf("run: %v", st.Err)
		}
		return st
	}

	first := runOnce(newLoop())
	head := origin.head()
	if first.LastCommit == "" || first.LastCommit != head.Hash.String() || !first.LastCommitAt.Equal(head.Committer.When) {
		t.Fatalf("first loop: last commit %s at %v, want origin's head %s at %v", first.LastCommit, first.LastCommitAt, head.Hash, head.Committer.When)
	}

	// Later commits that are not this updater's for this application.
	bot := object.Signature{Name: a.ImageUpdates.Author.Name, Email: a.ImageUpdates.Author.Email}
	origin.commitElsewhere("docs\n\nFlotilla-Application: shop\n", map[string]string{"README": "a human copied the trailer\n"})
	origin.commitAs(bot, "images: update other 2\n\nFlotilla-Application: other\n", map[string]string{"OTHER": "another application\n"})
	origin.commitAs(bot, "images: update other 3\n\nFlotilla-Application: shop-eu\n", map[string]string{"OTHER": "a prefix of its name\n"})
	origin.commitElsewhere("a human's change", map[string]string{"NOTES": "meanwhile\n"})

	restarted := runOnce(newLoop())
	if restarted.Result.Commit.Commit != "" {
		t.Fatalf("the restarted loop committed %s; 1.1.0 is already in git", restarted.Result.Commit.Commit)
	}
	if restarted.LastCommit != first.LastCommit || !restarted.LastCommitAt.Equal(first.LastCommitAt) {
		t.Fatalf("restarted loop: last commit %s at %v, want %s at %v", restarted.LastCommit, restarted.LastCommitAt, first.LastCommit, first.LastCommitAt)
	}
	got, want := restarted.Application(), first.Application()
	if got.LastCommit != want.LastCommit || !got.LastCommitTime.Equal(want.LastCommitTime) || got.LastCommitTime.Location() != time.UTC {
		t.Fatalf("status: %s at %v, want %s at %v in UTC", got.LastCommit, got.LastCommitTime, want.LastCommit, want.LastCommitTime)
	}

	// An application whose updater never committed has no last commit.
	fresh := newRemote(t, map[string]string{"compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.1.0\n", reg.Host)})
	fresh.commitAs(bot, "images: update other 2\n\nFlotilla-Application: other\n", map[string]string{"compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.1.0\n# other\n", reg.Host)})
	a.Source.RepoURL = fresh.dir
	if st := runOnce(newLoop()); st.LastCommit != "" || !st.LastCommitAt.IsZero() {
		t.Fatalf("no commit of this application's: last commit %s at %v", st.LastCommit, st.LastCommitAt)
	}
}
