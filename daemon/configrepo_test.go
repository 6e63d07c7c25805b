package daemon

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

type recordedEvents struct {
	mu sync.Mutex
	ev []events.Event
}

func (r *recordedEvents) Publish(e events.Event) events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev = append(r.ev, e)
	return e
}

func appFile(names ...string) string {
	s := "apiVersion: flotilla/v1\napplications:\n"
	for _, n := range names {
		s += "  - name: " + n + "\n    source: {repoURL: https://git.example.com/" + n + ".git}\n"
	}
	return s + `applicationSets:
  - name: extra
    generators: [{list: {elements: [{n: x}]}}]
    template: {name: "gen-{{.n}}", source: {repoURL: "https://git.example.com/g.git"}}
`
}

func TestTheApplicationsFileFromGitIsReloadedPerCommitAndAnInvalidCommitIsReportedAndSkipped(t *testing.T) {
	git := gittest.New(t)
	repo := git.Dir
	git.Commit("change", map[string]string{"apps.yaml": appFile("shop")})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := &recordedEvents{}
	o := &Options{ConfigRepo: ConfigRepoOptions{Repo: repo, Revision: "main", Path: "apps.yaml", SetsInterval: time.Minute}}
	fetcher := source.New(source.Options{CacheDir: t.TempDir(), Backoff: source.Backoff{Min: time.Millisecond, Max: time.Millisecond}})
	rl := newControllerReloader(o, fetcher, pub, log)
	file, apps, err := rl.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := reconcile.New(reconcile.Options{Backend: chartstest.NewMinimal(), Fetcher: noFetch{}, Logger: log}, apps)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.attach(ctl, file); err != nil {
		t.Fatal(err)
	}
	if rl.check(context.Background(), false) {
		t.Fatal("an unchanged commit replaced the applications")
	}

	git.Commit("change", map[string]string{"apps.yaml": appFile("shop") + "  - name: Blog\n"})
	if rl.check(context.Background(), false) {
		t.Fatal("an invalid commit replaced the applications")
	}
	if got := names(ctl.Applications()); strings.Join(got, ",") != "gen-x,shop" {
		t.Fatalf("after the invalid commit: %v", got)
	}
	if len(pub.ev) != 1 || pub.ev[0].Type != events.ConfigRejected || !strings.Contains(pub.ev[0].Message, "apps.yaml@") {
		t.Fatalf("events %+v, want one config.rejected naming the file and commit", pub.ev)
	}
	if rl.check(context.Background(), false) || len(pub.ev) != 1 {
		t.Fatal("the same invalid commit was reported again")
	}
	if p := rl.problem(); !strings.Contains(p, "apps.yaml@") || !strings.Contains(p, "invalid") {
		t.Fatalf("problem for the status: %q", p)
	}
	// Expanding the sets of the last valid file again does not hide it.
	rl.check(context.Background(), true)
	if rl.problem() == "" {
		t.Fatal("a forced check of the unchanged invalid commit cleared its problem")
	}

	git.Commit("change", map[string]string{"apps.yaml": appFile("shop", "blog")})
	if !rl.check(context.Background(), false) {
		t.Fatal("a valid new commit was not loaded")
	}
	if got := names(ctl.Applications()); strings.Join(got, ",") != "blog,gen-x,shop" {
		t.Fatalf("after the valid commit: %v", got)
	}
	if p := rl.problem(); p != "" {
		t.Fatalf("a loaded commit still reports a problem: %q", p)
	}
}

func TestControllerFlagsNeedExactlyOneApplicationsFile(t *testing.T) {
	for _, tc := range []struct {
		config string
		c      ConfigRepoOptions
		ok     bool
	}{
		{"", ConfigRepoOptions{SetsInterval: time.Minute}, false},
		{"a.yaml", ConfigRepoOptions{Repo: "/r", Path: "a.yaml", SetsInterval: time.Minute}, false},
		{"", ConfigRepoOptions{Repo: "/r", Path: "../a.yaml", SetsInterval: time.Minute}, false},
		{"", ConfigRepoOptions{Repo: "/r", Path: "deploy/a.yaml", SetsInterval: time.Minute}, true},
		{"a.yaml", ConfigRepoOptions{SetsInterval: time.Minute}, true},
	} {
		if err := tc.c.check(tc.config); (err == nil) != tc.ok {
			t.Errorf("--config %q %+v: %v", tc.config, tc.c, err)
		}
	}
}
