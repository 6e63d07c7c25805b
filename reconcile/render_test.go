package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
	"github.com/flotilla-gitops/flotilla/source"
)

// commitFetcher is fakeFetcher that also resolves a full commit, as the
// real fetcher does: what a rollback's re-render asks for.
type commitFetcher struct{ *fakeFetcher }

func (f commitFetcher) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	f.mu.Lock()
	dir, ok := f.dirs[req.Revision]
	f.mu.Unlock()
	if ok {
		return &source.Revision{Commit: req.Revision, Dir: dir}, nil
	}
	return f.fakeFetcher.Fetch(ctx, req)
}

// recordingBackend keeps every deploy request it is given.
type recordingBackend struct {
	*chartstest.MinimalBackend
	mu   sync.Mutex
	reqs []charts.DeployRequest
}

func (b *recordingBackend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	b.mu.Unlock()
	return b.MinimalBackend.DeployStack(ctx, req)
}

func (b *recordingBackend) last(t *testing.T) charts.DeployRequest {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.reqs) == 0 {
		t.Fatal("nothing was deployed")
	}
	return b.reqs[len(b.reqs)-1]
}

// deployedEnv is the env of service web as a deploy of req writes it.
func deployedEnv(t *testing.T, stack string, req charts.DeployRequest) []string {
	t.Helper()
	st, err := compose.Convert(context.Background(), req.Manifest, stack, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := compose.Unseal(st, req.Sealed); err != nil {
		t.Fatalf("deploy request lacks sealed values: %v", err)
	}
	return st.Services[stack+"_web"].TaskTemplate.ContainerSpec.Env
}

// countingRender is compose.Render counting its calls.
type countingRender struct {
	mu    sync.Mutex
	calls int
}

func (r *countingRender) render(stack string, d compose.Dir) (*compose.Rendered, error) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	return compose.Render(stack, d)
}

func (r *countingRender) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func TestAnUnchangedCommitIsNotRenderedAgain(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	r := &countingRender{}
	app := testApp("shop", true)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Render: r.render}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if res := mustReconcile(t, c, "shop"); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := r.count(); n != 1 {
		t.Fatalf("three passes over one commit rendered %d times, want 1", n)
	}

	// A changed application is a new render, though the commit is the same.
	changed := app
	changed.Source.Compose.Files = []string{"docker-compose.yml"}
	c.SetApplications([]application.Application{changed})
	mustReconcile(t, c, "shop")
	if n := r.count(); n != 2 {
		t.Fatalf("a changed application rendered %d times in all, want 2", n)
	}

	// So is a new commit; and the cache keeps a bounded number per app.
	for i := range 4 {
		f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", fmt.Sprintf("MESSAGE: m%d", i), 1)))
		if res := mustReconcile(t, c, "shop"); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := r.count(); n != 6 {
		t.Fatalf("four new commits: %d renders in all, want 6", n)
	}
	c.renders.mu.Lock()
	kept := len(c.renders.entries["shop"])
	c.renders.mu.Unlock()
	if kept > rendersPerApp {
		t.Errorf("the cache keeps %d renders of one application, bound %d", kept, rendersPerApp)
	}
}

func TestADifferentKeyIsADifferentRender(t *testing.T) {
	a, b := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	ka, _ := sopsage.ParseIdentities(a.File)
	kb, _ := sopsage.ParseIdentities(b.File)
	app := testApp("shop", true)
	x := renderKey(app, "c1", ka.Fingerprint(), compose.Limits{})
	if y := renderKey(app, "c1", kb.Fingerprint(), compose.Limits{}); x == y {
		t.Error("two keys give the same render key")
	}
	if y := renderKey(app, "c1", ka.Fingerprint(), compose.Limits{MaxFileBytes: 1}); x == y {
		t.Error("other limits give the same render key")
	}
	if y := renderKey(app, "c1", ka.Fingerprint(), compose.Limits{}); x != y {
		t.Error("the same input gives two render keys")
	}
}

func TestRenderCacheDropsApplicationsThatWereRemoved(t *testing.T) {
	var rc renderCache
	known := map[string]bool{}
	for i := range 3 * minRenderSweep {
		name := fmt.Sprintf("app%d", i)
		known[name] = i%3 == 0 // two in three were removed
		rc.put(name, renderEntry{key: "k"}, func(n string) bool { return known[n] })
	}
	if n := rc.len(); n > 2*minRenderSweep {
		t.Fatalf("%d applications cached after 2/3 of %d were removed", n, 3*minRenderSweep)
	}
	if _, ok := rc.get("app0", "k"); !ok {
		t.Error("a known application's render was dropped")
	}
}

func TestAFileOverTheRenderLimitFailsThePassAndDeploysNothing(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	files := repoFiles(composeV1)
	files["app.conf"] = strings.Repeat("x", 4096)
	f.commit(t, files)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet,
		RenderLimits: compose.Limits{MaxFileBytes: 1024}}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	res := mustReconcile(t, c, "shop")
	var fe *fault.Error
	if !errors.As(res.Err, &fe) || !errors.Is(res.Err, compose.ErrTooLarge) || fe.Field != "configs.conf.file" || KindOf(res.Err) != Stalled {
		t.Fatalf("pass error %v: want a stalled ErrTooLarge naming configs.conf.file", res.Err)
	}
	if !strings.Contains(res.Err.Error(), "app.conf") {
		t.Errorf("error %q does not name the file", res.Err)
	}
	if b.Writes() != 0 {
		t.Errorf("%d writes after a refused render", b.Writes())
	}
	if rs, _ := b.Releases(context.Background(), "shop"); len(rs) != 0 {
		t.Errorf("%d releases recorded", len(rs))
	}
}

// sealedRepo is composeV1 with web's env from an encrypted env_file.
func sealedRepo(t *testing.T, token string, recipients ...string) map[string]string {
	files := repoFiles(strings.Replace(composeV1, "    environment:\n      MESSAGE: one\n", "    env_file: ./web.env\n", 1))
	files["web.env"] = string(sopsagetest.Encrypt(t, "web.env", []byte("API_TOKEN="+token+"\n"), recipients...))
	return files
}

func TestRollbackOfASealedRevisionDeploysItsExactValues(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	const oldToken, newToken = "old-token-3f9a", "new-token-c27e"
	b := &recordingBackend{MinimalBackend: chartstest.NewMinimal()}
	f := commitFetcher{newFakeFetcher()}
	f.commit(t, sealedRepo(t, oldToken, id.Recipient))
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: ids}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: revision %d: %v", res.Revision, res.Err)
	}
	if env := deployedEnv(t, "shop", b.last(t)); !slices.Contains(env, "API_TOKEN="+oldToken) {
		t.Fatalf("deployed env %q", env)
	}
	f.commit(t, sealedRepo(t, newToken, id.Recipient))
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: revision %d: %v", res.Revision, res.Err)
	}

	// A fresh controller (a restart: nothing cached) rolls back to 1.
	c2, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: ids}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c2.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1, By: "test"})
	if err != nil || res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: revision %d: %v %v", res.Revision, err, res.Err)
	}
	if env := deployedEnv(t, "shop", b.last(t)); !slices.Contains(env, "API_TOKEN="+oldToken) {
		t.Fatalf("rollback deployed env %q, want the old token", env)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	for _, r := range rs {
		if strings.Contains(r.Manifest, oldToken) || strings.Contains(r.Manifest, newToken) {
			t.Fatalf("release %d holds a decrypted value:\n%s", r.Revision, r.Manifest)
		}
	}
	// The pinned record is used by the next automated pass, which needs the
	// values too and finds nothing to do.
	if res := mustReconcile(t, c2, "shop"); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("pinned pass: %s: %v", res.Action, res.Err)
	}
}

func TestRollbackRefusesASealedRevisionItCannotReproduce(t *testing.T) {
	first, second := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	both, _ := sopsage.ParseIdentities(append(append([]byte{}, first.File...), second.File...))
	onlySecond, _ := sopsage.ParseIdentities(second.File)
	b := &recordingBackend{MinimalBackend: chartstest.NewMinimal()}
	f := commitFetcher{newFakeFetcher()}
	f.commit(t, sealedRepo(t, "old-token-1", first.Recipient, second.Recipient))
	c, _ := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: both}, []application.Application{testApp("shop", true)})
	mustReconcile(t, c, "shop")
	f.commit(t, sealedRepo(t, "new-token-2", first.Recipient, second.Recipient))
	mustReconcile(t, c, "shop")
	writes := b.Writes()

	// The operator dropped one identity: the files still decrypt, but the
	// seal key differs, so revision 1's digests cannot be matched.
	c2, _ := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: onlySecond}, []application.Application{testApp("shop", true)})
	res, _ := c2.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1})
	if res.Err == nil || KindOf(res.Err) != Stalled || !strings.Contains(res.Err.Error(), "no longer reproduces") {
		t.Fatalf("rollback: %v; want a stalled refusal", res.Err)
	}
	if b.Writes() != writes {
		t.Errorf("a refused rollback wrote %d times", b.Writes()-writes)
	}
}

// A deploy is handed the render's conversion of exactly the manifest it
// deploys, so the backend converts nothing again: on an install, on an
// upgrade of a cached controller, and on a rollback, whose manifest comes
// from the record.
func TestEveryDeployIsHandedTheConversionOfItsManifest(t *testing.T) {
	b := &recordingBackend{MinimalBackend: chartstest.NewMinimal()}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	handed := func(what string) {
		t.Helper()
		req := b.last(t)
		if !req.Conversion.Of(req.Manifest, req.Stack) {
			t.Fatalf("%s: the deploy was not handed the conversion of its manifest (%v)", what, req.Conversion != nil)
		}
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: revision %d: %v", res.Revision, res.Err)
	}
	handed("install")
	f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: revision %d: %v", res.Revision, res.Err)
	}
	handed("upgrade")
	res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1, By: "test"})
	if err != nil || res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: revision %d: %v %v", res.Revision, err, res.Err)
	}
	handed("rollback")
	if len(b.reqs) != 3 {
		t.Fatalf("%d deploys, want 3", len(b.reqs))
	}
}
