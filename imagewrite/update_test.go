package imagewrite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/imagepolicy"
	"github.com/flotilla-gitops/flotilla/imagewrite"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/regauth"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

// remote is a bare repository on disk, the application's origin.
type remote struct {
	t   *testing.T
	dir string
}

func newRemote(t *testing.T, files map[string]string) *remote {
	t.Helper()
	src := gittest.New(t)
	src.Commit("initial", files)
	dir := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainInit(dir, true); err != nil {
		t.Fatal(err)
	}
	r := &remote{t: t, dir: dir}
	r.pushFrom(src.Dir)
	return r
}

func (r *remote) pushFrom(dir string) {
	r.t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		r.t.Fatal(err)
	}
	rem, err := repo.CreateRemoteAnonymous(&config.RemoteConfig{Name: "anonymous", URLs: []string{r.dir}})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := rem.Push(&git.PushOptions{RemoteName: "anonymous", RefSpecs: []config.RefSpec{"refs/heads/main:refs/heads/main"}}); err != nil {
		r.t.Fatalf("push to origin: %v", err)
	}
}

// commitElsewhere is another writer: it clones origin, commits files and
// pushes, moving main on.
func (r *remote) commitElsewhere(msg string, files map[string]string) {
	r.t.Helper()
	r.commitAs(object.Signature{Name: "Someone", Email: "someone@example.invalid"}, msg, files)
}

// commitAs is commitElsewhere with sig as author and committer.
func (r *remote) commitAs(sig object.Signature, msg string, files map[string]string) {
	r.t.Helper()
	dir := r.t.TempDir()
	repo, err := git.PlainClone(dir, false, &git.CloneOptions{URL: r.dir, ReferenceName: "refs/heads/main"})
	if err != nil {
		r.t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			r.t.Fatal(err)
		}
	}
	sig.When = time.Now()
	if _, err := wt.Commit(msg, &git.CommitOptions{Author: &sig, Committer: &sig}); err != nil {
		r.t.Fatal(err)
	}
	if err := repo.Push(&git.PushOptions{}); err != nil {
		r.t.Fatalf("push elsewhere: %v", err)
	}
}

func (r *remote) head() *object.Commit {
	r.t.Helper()
	repo, err := git.PlainOpen(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		r.t.Fatal(err)
	}
	c, err := repo.CommitObject(ref.Hash())
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *remote) file(name string) string {
	r.t.Helper()
	f, err := r.head().File(name)
	if err != nil {
		r.t.Fatalf("%s at origin's head: %v", name, err)
	}
	s, err := f.Contents()
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func app(repoURL string, images ...application.ImagePolicy) *application.Application {
	return &application.Application{
		Name:   "shop",
		Source: application.Source{RepoURL: repoURL, Revision: "main", Path: "."},
		ImageUpdates: &application.ImageUpdates{
			Branch: "main",
			Author: application.CommitAuthor{Name: "Flotilla Bot", Email: "bot@flotilla.invalid"},
			Images: images,
		},
	}
}

const composeV1 = `# the shop
services:
  web:
    image: %[1]s/shop:1.0.0   # released by flotilla
    ports: ["8080:80"]
  worker:
    image: "%[1]s/shop:1.0.0"
  pinned:
    image: '%[1]s/shop:1.0.0' # not marked: stays
`

func TestUpdater_commitsANewSemverTagOnceAndPreservesTheFile(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	for _, tag := range []string{"1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"} {
		reg.Push(t, "shop", tag, registrytest.Image{Content: tag})
	}
	in := strings.ReplaceAll(fmt.Sprintf(composeV1, reg.Host), "\n", "\r\n")
	origin := newRemote(t, map[string]string{"compose.yaml": in, "README": "hello\n"})
	before := origin.head().Hash
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Semver: ">=1.0.0 <2",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web", "worker"}}},
	})
	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{})}

	plan, err := u.Run(context.Background(), a, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Updates()) != 2 || plan.Commit.Commit != "" || origin.head().Hash != before {
		t.Fatalf("dry run: %d updates, commit %q, head moved %v", len(plan.Updates()), plan.Commit.Commit, origin.head().Hash != before)
	}

	res, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.Commit == "" {
		t.Fatalf("nothing committed: %+v", res)
	}
	head := origin.head()
	if head.Hash.String() != res.Commit.Commit || head.ParentHashes[0] != before {
		t.Fatalf("origin's head %s (parent %v), want the new commit %s on %s", head.Hash, head.ParentHashes, res.Commit.Commit, before)
	}
	want := strings.Replace(strings.Replace(in, "shop:1.0.0   #", "shop:1.1.0   #", 1), `shop:1.0.0"`, `shop:1.1.0"`, 1)
	if got := origin.file("compose.yaml"); got != want {
		t.Fatalf("compose.yaml at head:\n%q\nwant\n%q", got, want)
	}
	if head.Author.Name != "Flotilla Bot" || head.Author.Email != "bot@flotilla.invalid" {
		t.Errorf("author %s <%s>", head.Author.Name, head.Author.Email)
	}
	wantMsg := fmt.Sprintf("images: update %[1]s/shop 1.1.0\n\n%[1]s/shop: %[1]s/shop:1.0.0 -> %[1]s/shop:1.1.0\n  compose.yaml services.web.image\n  compose.yaml services.worker.image\n\nFlotilla-Application: shop\n", reg.Host)
	if head.Message != wantMsg {
		t.Errorf("message:\n%s\nwant\n%s", head.Message, wantMsg)
	}
	stats, err := head.Stats()
	if err != nil || len(stats) != 1 || stats[0].Name != "compose.yaml" || stats[0].Addition != 2 || stats[0].Deletion != 2 {
		t.Errorf("diff stats %v, %v: want compose.yaml +2 -2", stats, err)
	}

	// Again, as the next interval would: the update is in git already.
	again, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if again.Commit.Commit != "" || origin.head().Hash != head.Hash || len(again.Updates()) != 0 {
		t.Fatalf("second run committed %q (%d updates)", again.Commit.Commit, len(again.Updates()))
	}
	for _, tg := range again.Targets {
		if tg.Outcome != imagepolicy.Current {
			t.Errorf("second run: %s %s: %s", tg.File, tg.Field, tg.Outcome)
		}
	}
	if again.Reused {
		t.Error("the run right after a commit reused a result: the head moved")
	}
	// Nothing moved since: the third run neither clones nor commits, and
	// says the same.
	third, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !third.Reused || third.Commit.Commit != "" || len(third.Targets) != 2 || third.Targets[0].Outcome != imagepolicy.Current {
		t.Fatalf("third run: reused %v, commit %q, targets %+v", third.Reused, third.Commit.Commit, third.Targets)
	}
	// Someone else moves the branch: the next run looks at the files again.
	origin.commitElsewhere("docs", map[string]string{"README": "changed\n"})
	fourth, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if fourth.Reused || fourth.Commit.Commit != "" || fourth.Commit.Base != origin.head().Hash.String() {
		t.Fatalf("after the branch moved: reused %v, commit %q, base %s", fourth.Reused, fourth.Commit.Commit, fourth.Commit.Base)
	}
}

func TestUpdater_patternPolicyWritesTheTagOfAValuesFile(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	for _, tag := range []string{"build-9", "build-10", "build-8", "feature-99", "build-11-debug"} {
		reg.Push(t, "shop", tag, registrytest.Image{Content: tag})
	}
	values := "image:\n  repository: ignored/by-flotilla\n  tag: build-9 # CI sets this\nreplicas: 2\n"
	origin := newRemote(t, map[string]string{"chart/values.yaml": values})
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Pattern: `build-(?P<n>\d+)`, Capture: "n",
		Values: []application.ValuesImageTarget{{File: "values.yaml", Path: "image.tag", Form: application.FormTag}},
	})
	a.Source.Path = "chart"
	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{})}
	res, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.Commit == "" {
		t.Fatalf("nothing committed: %+v", res.Targets)
	}
	if got, want := origin.file("chart/values.yaml"), strings.Replace(values, "build-9", "build-10", 1); got != want {
		t.Fatalf("values.yaml:\n%s\nwant\n%s", got, want)
	}
}

func TestUpdater_digestPolicyPinsAMovingTagAndNeverFollowsItAway(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	first := reg.PushIndex(t, "shop", "stable",
		registrytest.Image{Content: "a1", OS: "linux", Arch: "amd64"},
		registrytest.Image{Content: "a2", OS: "linux", Arch: "arm64"})
	compose := fmt.Sprintf("services:\n  web:\n    image: %s/shop:stable\n", reg.Host)
	origin := newRemote(t, map[string]string{"compose.yaml": compose})
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Digest: "stable",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}},
	})
	clk := time.Now()
	now := func() time.Time { return clk }
	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{Interval: time.Minute, Now: now})}
	run := func() imagewrite.Result {
		t.Helper()
		clk = clk.Add(2 * time.Minute) // each run is a new interval
		res, err := u.Run(context.Background(), a, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := run(); res.Commit.Commit == "" {
		t.Fatalf("first pin not committed: %+v", res.Targets)
	}
	pinned := fmt.Sprintf("services:\n  web:\n    image: %s/shop:stable@%s\n", reg.Host, first)
	if got := origin.file("compose.yaml"); got != pinned {
		t.Fatalf("compose.yaml %q, want %q", got, pinned)
	}
	head := origin.head().Hash
	if res := run(); res.Commit.Commit != "" || origin.head().Hash != head {
		t.Fatalf("unchanged digest committed %s", res.Commit.Commit)
	}

	second := reg.Push(t, "shop", "stable", registrytest.Image{Content: "b"})
	if res := run(); res.Commit.Commit == "" {
		t.Fatalf("moved tag not committed: %+v", res.Targets)
	}
	if got, want := origin.file("compose.yaml"), strings.Replace(pinned, first, second, 1); got != want {
		t.Fatalf("compose.yaml %q, want %q", got, want)
	}

	// The tag vanishes: reported, the pin stays.
	head = origin.head().Hash
	reg.Delete(t, "shop", second)
	res := run()
	if res.Commit.Commit != "" || origin.head().Hash != head {
		t.Fatalf("vanished tag committed %s", res.Commit.Commit)
	}
	if len(res.Targets) != 1 || res.Targets[0].Outcome != imagepolicy.Vanished {
		t.Fatalf("targets %+v, want one Vanished", res.Targets)
	}
}

func TestUpdater_tagGoingBackwardsIsReportedNotFollowed(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.4.0", registrytest.Image{Content: "old"})
	gone := reg.Push(t, "shop", "1.5.0", registrytest.Image{Content: "new"})
	compose := fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.5.0\n", reg.Host)
	origin := newRemote(t, map[string]string{"compose.yaml": compose})
	reg.Delete(t, "shop", gone)
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Semver: "^1",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}},
	})
	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{})}
	res, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.Commit != "" || len(res.Targets) != 1 || res.Targets[0].Outcome != imagepolicy.Vanished || !strings.Contains(res.Targets[0].Reason, "1.4.0") {
		t.Fatalf("result %+v, want nothing committed and 1.5.0 reported vanished", res)
	}
	if got := origin.file("compose.yaml"); got != compose {
		t.Fatalf("compose.yaml changed: %q", got)
	}
}

// racingRegistry is the real client; on the first listing it lets
// another writer push to origin, as a colleague's merge would land between
// the updater's clone and its push.
type racingRegistry struct {
	*registryclient.Client
	once  sync.Once
	other func()
}

func (r *racingRegistry) Tags(ctx context.Context, image string, cred registryclient.Credential) ([]string, error) {
	r.once.Do(r.other)
	return r.Client.Tags(ctx, image, cred)
}

func TestUpdater_rejectedPushIsRetriedOnTheNewHead(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.0.1", registrytest.Image{Content: "2"})
	compose := fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.0.0\n", reg.Host)
	origin := newRemote(t, map[string]string{"compose.yaml": compose})
	a := app(origin.dir, application.ImagePolicy{
		Image: reg.Host + "/shop", Semver: "~1.0",
		Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}},
	})
	rr := &racingRegistry{Client: registryclient.New(registryclient.Options{})}
	rr.other = func() {
		origin.commitElsewhere("docs: a colleague's change", map[string]string{"NOTES": "meanwhile\n"})
	}
	u := &imagewrite.Updater{Registry: rr}
	res, err := u.Run(context.Background(), a, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.Attempts != 2 || res.Commit.Commit == "" {
		t.Fatalf("attempts %d, commit %q: want the push retried once", res.Commit.Attempts, res.Commit.Commit)
	}
	head := origin.head()
	parent, err := head.Parent(0)
	if err != nil || parent.Message != "docs: a colleague's change" {
		t.Fatalf("the update is not on top of the colleague's commit: parent %v, %v", parent, err)
	}
	if origin.file("NOTES") != "meanwhile\n" || !strings.Contains(origin.file("compose.yaml"), "shop:1.0.1") {
		t.Fatalf("head lacks one of the two changes")
	}
}

func TestUpdater_hundredServicesOfOneImageCostOneQueryPerInterval(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Token: true, User: "ci", Password: "pw"})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.1.0", registrytest.Image{Content: "2"})
	var b strings.Builder
	b.WriteString("services:\n")
	var names []string
	for i := range 100 {
		name := fmt.Sprintf("svc%03d", i)
		names = append(names, name)
		fmt.Fprintf(&b, "  %s:\n    image: %s/shop:1.0.0\n", name, reg.Host)
	}
	// Two applications, 50 services each, in two repositories, sharing
	// one client as the controller does.
	policy := func(svcs []string) application.ImagePolicy {
		return application.ImagePolicy{Image: reg.Host + "/shop", Semver: "^1",
			Compose: []application.ComposeImageTarget{{File: "compose.yaml", Services: svcs}}}
	}
	originA := newRemote(t, map[string]string{"compose.yaml": b.String()})
	originB := newRemote(t, map[string]string{"compose.yaml": b.String()})
	appA, appB := app(originA.dir, policy(names[:50])), app(originB.dir, policy(names[50:]))
	appB.Name = "shop-b"
	// The credential comes the way an application's registryAuth file
	// gives it.
	creds, err := regauth.FromDockerConfig([]byte(fmt.Sprintf(`{"auths":{%q:{"username":"ci","password":"pw"}}}`, reg.Host)))
	if err != nil {
		t.Fatal(err)
	}
	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{Interval: time.Hour})}
	reg.ResetHits()
	for _, a := range []*application.Application{appA, appB} {
		res, err := u.Run(context.Background(), a, creds, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Updates()) != 50 || res.Commit.Commit == "" {
			t.Fatalf("%s: %d updates, commit %q", a.Name, len(res.Updates()), res.Commit.Commit)
		}
	}
	var listings int
	for _, h := range reg.Hits() {
		if h.Method == "GET" && strings.Contains(h.Path, "/tags/list") && h.Status == 200 {
			listings++
		}
	}
	if listings != 1 || reg.TokenRequests() != 1 {
		t.Fatalf("100 services: %d tag listings and %d tokens, want 1 and 1; hits %v", listings, reg.TokenRequests(), reg.Hits())
	}
	if got := strings.Count(originA.file("compose.yaml"), "shop:1.1.0"); got != 50 {
		t.Fatalf("%d services of A moved to 1.1.0, want its 50", got)
	}
}
