package imagewrite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/imagewrite"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/registryclient"
	"github.com/flotilla-gitops/flotilla/source"
)

// secretFile writes a credential file and returns its path.
func secretFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Against a real Gitea and a real registry: the first run pushes one commit
// to flotilla/images/shop and opens a pull request into main listing the
// update (reported in the status and an image.proposed event, with no pass
// made due); a run with the same newest tag writes nothing; a newer tag
// replaces the branch's commit and edits the same pull request; once a
// human merges it, a run commits and opens nothing; and a commit someone
// else pushes to the branch is never pushed over.
func TestUpdater_proposesInAPullRequestOnARealGitea(t *testing.T) {
	g := forgetest.StartGitea(t)
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.1.0", registrytest.Image{Content: "2"})
	g.CreateRepo("shop")
	compose := fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.0.0 # kept\n", reg.Host)
	g.Write("ann", "ann/shop", "", "main", "compose.yaml", compose)
	mainBefore := g.BranchHead("ann/shop", "main")
	token := g.Token("ann")

	a := app(g.RepoURL("ann/shop"), application.ImagePolicy{
		Image: reg.Host + "/shop", Semver: "^1",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}},
	})
	a.Source.Credentials = &application.Credentials{UsernameFile: secretFile(t, "user", "ann"), PasswordFile: secretFile(t, "git-token", token)}
	a.ImageUpdates.PullRequest = &application.ImagePullRequest{Forge: &application.Forge{
		Kind: forge.Gitea, API: g.API(), Repo: "ann/shop", TokenFile: secretFile(t, "forge-token", token)}}
	a.ImageUpdates.Interval.Duration = time.Hour
	const head = "flotilla/images/shop"

	// The first run, by the controller's loop.
	var mu sync.Mutex
	var published []events.Event
	refreshed := 0
	loop := &imagewrite.Loop{
		Updater: &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{}), ScratchDir: t.TempDir()},
		Apps:    func() []application.Application { return []application.Application{*a} },
		Refresh: func(string) error { mu.Lock(); refreshed++; mu.Unlock(); return nil },
		Publish: func(e events.Event) { mu.Lock(); published = append(published, e); mu.Unlock() },
		Tick:    20 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop.Run(ctx); close(done) }()
	waitFor(t, "the first run", func() bool { _, ok := loop.Status("shop"); return ok })
	cancel()
	<-done
	st, _ := loop.Status("shop")
	if st.Err != nil {
		t.Fatal(st.Err)
	}
	pulls := g.Pulls("shop")
	if len(pulls) != 1 {
		t.Fatalf("%d pull requests after the first run, want 1", len(pulls))
	}
	pr := pulls[0]
	wantTitle := fmt.Sprintf("images: update %s/shop 1.1.0", reg.Host)
	wantLine := fmt.Sprintf("%[1]s/shop: %[1]s/shop:1.0.0 -> %[1]s/shop:1.1.0", reg.Host)
	if pr.State != "open" || pr.Head.Ref != head || pr.Base.Ref != "main" || pr.Title != wantTitle ||
		!strings.Contains(pr.Body, wantLine) || !strings.Contains(pr.Body, "compose.yaml services.web.image") {
		t.Fatalf("pull request %+v\nwant open, %s -> main, title %q, body listing %q", pr, head, wantTitle, wantLine)
	}
	branch1 := g.BranchHead("ann/shop", head)
	if ps := g.Parents("ann/shop", branch1); len(ps) != 1 || ps[0] != mainBefore {
		t.Fatalf("the branch's tip %s has parents %v, want exactly one commit on main's %s", branch1, ps, mainBefore)
	}
	if got := g.BranchHead("ann/shop", "main"); got != mainBefore {
		t.Fatalf("main moved to %s: a proposal must not commit to it", got)
	}
	if got := g.File("ann/shop", head, "compose.yaml"); got != strings.Replace(compose, "1.0.0", "1.1.0", 1) {
		t.Fatalf("compose.yaml on the branch:\n%s", got)
	}
	status := st.Application()
	if status.PullRequest == nil || status.PullRequest.Number != pr.Number || status.PullRequest.URL != pr.URL || status.PullRequest.Branch != head {
		t.Fatalf("status's pullRequest %+v, want #%d at %s", status.PullRequest, pr.Number, pr.URL)
	}
	mu.Lock()
	if refreshed != 0 || len(published) != 1 || published[0].Type != events.ImageProposed ||
		published[0].Data["number"] != pr.Number || published[0].Data["url"] != pr.URL || published[0].Revision != branch1 {
		t.Fatalf("refreshes %d, events %+v: want no refresh and one image.proposed for #%d at %s", refreshed, published, pr.Number, branch1)
	}
	mu.Unlock()

	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{Interval: 10 * time.Millisecond}), ScratchDir: t.TempDir()}
	run := func() (imagewrite.Result, error) {
		t.Helper()
		return u.Run(context.Background(), a, nil, false)
	}

	// The same newest tag: nothing pushed, nothing edited, nothing opened.
	res, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.Commit != "" || res.PullRequest == nil || res.PullRequest.Opened || res.PullRequest.Edited || res.PullRequest.Number != pr.Number {
		t.Fatalf("second run: commit %q, pull request %+v: want nothing written, #%d reported", res.Commit.Commit, res.PullRequest, pr.Number)
	}
	if n := len(g.Pulls("shop")); n != 1 || g.BranchHead("ann/shop", head) != branch1 {
		t.Fatalf("second run: %d pull requests, branch at %s (was %s)", n, g.BranchHead("ann/shop", head), branch1)
	}
	// This updater never pushed (a restarted controller): the last commit
	// is read back from the branch, with the time the loop reported.
	if own := res.Commit.LastOwn; own.Hash != branch1 || !own.Time.Equal(st.LastCommitAt) {
		t.Fatalf("second run: last own commit %+v, want %s at %v", own, branch1, st.LastCommitAt)
	}

	// A newer tag: the same pull request, a new commit on the branch.
	reg.Push(t, "shop", "1.2.0", registrytest.Image{Content: "3"})
	if res, err = run(); err != nil {
		t.Fatal(err)
	}
	pulls = g.Pulls("shop")
	branch2 := g.BranchHead("ann/shop", head)
	if len(pulls) != 1 || pulls[0].Number != pr.Number || !res.PullRequest.Edited || res.PullRequest.Number != pr.Number {
		t.Fatalf("newer tag: pull requests %+v, result %+v: want #%d edited", pulls, res.PullRequest, pr.Number)
	}
	if branch2 == branch1 || res.Commit.Commit != branch2 || pulls[0].Head.SHA != branch2 {
		t.Fatalf("newer tag: branch at %s (was %s), pushed %q, pull request head %s", branch2, branch1, res.Commit.Commit, pulls[0].Head.SHA)
	}
	if ps := g.Parents("ann/shop", branch2); len(ps) != 1 || ps[0] != mainBefore {
		t.Fatalf("the new tip has parents %v, want exactly one commit on main's %s", ps, mainBefore)
	}
	if want := fmt.Sprintf("images: update %s/shop 1.2.0", reg.Host); pulls[0].Title != want ||
		!strings.Contains(pulls[0].Body, fmt.Sprintf("%[1]s/shop:1.0.0 -> %[1]s/shop:1.2.0", reg.Host)) {
		t.Fatalf("edited pull request: %q\n%s", pulls[0].Title, pulls[0].Body)
	}

	// A human merges: the base has the update, nothing is committed or opened.
	g.MergePR("shop", pr.Number)
	merged := g.BranchHead("ann/shop", "main")
	if res, err = run(); err != nil {
		t.Fatal(err)
	}
	if res.Commit.Commit != "" || res.PullRequest != nil || len(res.Updates()) != 0 {
		t.Fatalf("after the merge: commit %q, pull request %+v, %d updates", res.Commit.Commit, res.PullRequest, len(res.Updates()))
	}
	pulls = g.Pulls("shop")
	if len(pulls) != 1 || !pulls[0].Merged || g.BranchHead("ann/shop", "main") != merged || g.BranchHead("ann/shop", head) != branch2 {
		t.Fatalf("after the merge: pull requests %+v, main %s (was %s)", pulls, g.BranchHead("ann/shop", "main"), merged)
	}

	// Someone else pushes to the branch: a newer tag is held, not pushed
	// over their commit, and no pull request is opened.
	theirs := g.Write("ann", "ann/shop", "", head, "NOTES", "mine\n")
	reg.Push(t, "shop", "1.3.0", registrytest.Image{Content: "4"})
	res, err = run()
	if !errors.Is(err, source.ErrForeignCommit) {
		t.Fatalf("a foreign commit on the branch: error %v, want ErrForeignCommit", err)
	}
	if got := g.BranchHead("ann/shop", head); got != theirs || len(g.Pulls("shop")) != 1 || res.PullRequest != nil {
		t.Fatalf("the branch is at %s (their commit %s), %d pull requests", got, theirs, len(g.Pulls("shop")))
	}
}
