package imagewrite_test

import (
	"context"
	"fmt"
	"path/filepath"
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
	runOnce := func(l *imagewrite.Loop) imagewrite.LoopStatus {
		t.Helper()
		st := runOnce(t, l, "shop")
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

// runOnce runs l until it has run for app once; with an interval longer
// than the test, that is its only run.
func runOnce(t *testing.T, l *imagewrite.Loop, app string) imagewrite.LoopStatus {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a run", func() bool { _, ok := l.Status(app); return ok })
	st, _ := l.Status(app)
	return st
}

// sample is the value of the counter or gauge series of family name with
// exactly labels; -1 when there is none.
func sample(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			if len(mt.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range mt.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	return -1
}

// The metrics count each run by result and its marked fields by outcome,
// every outcome label present (0 when none ended so); a run that fails
// as a whole counts as failed and leaves the fields as the last run
// that decided them.
func TestLoop_metricsCountRunsAndFieldsByOutcome(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	for _, p := range []struct{ repo, tag string }{{"shop", "1.0.0"}, {"shop", "1.1.0"}, {"api", "1.0.0"}, {"api", "1.1.0"}, {"db", "1.0.0"}, {"cache", "1.0.0"}} {
		reg.Push(t, p.repo, p.tag, registrytest.Image{Content: p.repo + p.tag})
	}
	compose := fmt.Sprintf(`services:
  web: {image: %[1]s/shop:1.0.0}
  worker: {image: %[1]s/shop:1.1.0}
  cron: {image: %[1]s/shop:1.1.0}
  api: {image: %[1]s/api:1.1.0}
  db: {image: %[1]s/db:1.0.0}
  cache: {image: %[1]s/cache:1.5.0}
`, reg.Host)
	origin := newRemote(t, map[string]string{"compose.yaml": compose})
	target := func(services ...string) []application.ComposeImageTarget {
		return []application.ComposeImageTarget{{File: "compose.yaml", Services: services}}
	}
	a := app(origin.dir,
		// web: update; worker, cron: current; ghost (no such service): error.
		application.ImagePolicy{Image: reg.Host + "/shop", Semver: "^1", Compose: target("web", "worker", "cron", "ghost")},
		// 1.1.0 is listed but outside ~1.0: backwards.
		application.ImagePolicy{Image: reg.Host + "/api", Semver: "~1.0", Compose: target("api")},
		application.ImagePolicy{Image: reg.Host + "/db", Semver: "^3", Compose: target("db")},       // no-candidate
		application.ImagePolicy{Image: reg.Host + "/cache", Semver: "^1", Compose: target("cache")}, // vanished: 1.5.0 is not listed
	)
	a.ImageUpdates.Interval.Duration = time.Hour
	m := metrics.New()
	newLoop := func() *imagewrite.Loop {
		return &imagewrite.Loop{
			Updater: &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{}), ScratchDir: t.TempDir()},
			Apps:    func() []application.Application { return []application.Application{*a} },
			Metrics: m,
			Tick:    20 * time.Millisecond,
		}
	}
	check := func(when string, fields map[string]float64, ok, failed, commits float64) {
		t.Helper()
		for outcome, want := range fields {
			if got := sample(t, m, "flotilla_image_fields", map[string]string{"app": "shop", "outcome": outcome}); got != want {
				t.Errorf("%s: flotilla_image_fields{outcome=%q} = %v, want %v", when, outcome, got, want)
			}
		}
		for result, want := range map[string]float64{"ok": ok, "failed": failed} {
			if got := sample(t, m, "flotilla_image_runs_total", map[string]string{"app": "shop", "result": result}); got != want {
				t.Errorf("%s: flotilla_image_runs_total{result=%q} = %v, want %v", when, result, got, want)
			}
		}
		if got := sample(t, m, "flotilla_image_commits_total", map[string]string{"app": "shop"}); got != commits {
			t.Errorf("%s: flotilla_image_commits_total = %v, want %v", when, got, commits)
		}
	}

	if st := runOnce(t, newLoop(), "shop"); st.Err != nil || st.Result.Commit.Commit == "" {
		t.Fatalf("first run: %v, commit %q; want a commit", st.Err, st.Result.Commit.Commit)
	}
	first := map[string]float64{"update": 1, "current": 2, "backwards": 1, "vanished": 1, "no-candidate": 1, "error": 1}
	// Nothing failed yet: the failed series does not exist.
	check("after a run that committed", first, 1, -1, 1)

	if st := runOnce(t, newLoop(), "shop"); st.Err != nil || st.Result.Commit.Commit != "" {
		t.Fatalf("second run: %v, commit %q; want none", st.Err, st.Result.Commit.Commit)
	}
	second := map[string]float64{"update": 0, "current": 3, "backwards": 1, "vanished": 1, "no-candidate": 1, "error": 1}
	check("after a run with nothing new", second, 2, -1, 1)

	a.Source.RepoURL = filepath.Join(t.TempDir(), "gone.git")
	if st := runOnce(t, newLoop(), "shop"); st.Err == nil {
		t.Fatal("a run on a repository that does not exist did not fail")
	}
	check("after a failed run", second, 2, 1, 1)
}
