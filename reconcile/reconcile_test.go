package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/source"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeFetcher serves revisions from directories the test writes.
type fakeFetcher struct {
	mu      sync.Mutex
	commits map[string]string // revision → commit
	dirs    map[string]string // commit → dir
	err     error
	calls   int
}

func newFakeFetcher() *fakeFetcher {
	return &fakeFetcher{commits: map[string]string{}, dirs: map[string]string{}}
}

func (f *fakeFetcher) Fetch(_ context.Context, req source.Request) (*source.Revision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	c, ok := f.commits[req.Revision]
	if !ok {
		return nil, fmt.Errorf("revision %q: %w", req.Revision, source.ErrRevisionNotFound)
	}
	return &source.Revision{Commit: c, Dir: f.dirs[c]}, nil
}

// commit writes files as a new commit of revision "main".
func (f *fakeFetcher) commit(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := fmt.Sprintf("%040d", len(f.dirs)+1)
	f.dirs[c] = dir
	f.commits["main"] = c
	return c
}

const composeV1 = `version: "3.8"
services:
  web:
    image: example/web:1
    environment:
      MESSAGE: one
    networks: [back]
    configs: [{source: conf, target: /etc/app.conf}]
  worker:
    image: example/worker:1
    networks: [back]
networks:
  back: {}
configs:
  conf:
    file: ./app.conf
`

func repoFiles(compose string) map[string]string {
	return map[string]string{"docker-compose.yml": compose, "app.conf": "listen 80\n"}
}

func testApp(name string, automated bool) application.Application {
	a := application.Application{
		Name:    name,
		Stack:   name,
		History: 10,
		Source:  application.Source{RepoURL: "/repo", Revision: "main", Path: "."},
	}
	a.SyncPolicy.Interval.Duration = time.Minute
	if automated {
		a.SyncPolicy.Automated = &application.Automated{}
	}
	return a
}

func newTestController(t *testing.T, b charts.Backend, f Fetcher, apps ...application.Application) *Controller {
	t.Helper()
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet}, apps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shopOnMinimal is the application "shop" at composeV1 on a fresh
// MinimalBackend, not yet reconciled.
func shopOnMinimal(t *testing.T, automated bool) (*chartstest.MinimalBackend, *fakeFetcher, *Controller) {
	t.Helper()
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	return b, f, newTestController(t, b, f, testApp("shop", automated))
}

func mustReconcile(t *testing.T, c *Controller, name string) Result {
	t.Helper()
	res, err := c.Reconcile(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestAutomatedApplicationInstallsThenStaysUnchanged(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	commit := f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))

	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Action != charts.Install || res.Revision != 1 {
		t.Fatalf("first pass: action %s revision %d, want install 1", res.Action, res.Revision)
	}
	if got := res.Deployed.Created; !slices.Equal(got, []string{"web", "worker"}) {
		t.Fatalf("created %v", got)
	}
	st := res.Status
	if st.Sync != application.Synced || st.Revision != commit || st.LastAppliedRevision != 1 {
		t.Fatalf("status after install: %+v", st)
	}
	writes := b.Writes()

	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Unchanged || res.Deployed != nil {
		t.Fatalf("second pass: %+v", res)
	}
	if b.Writes() != writes {
		t.Fatalf("unchanged pass wrote %d times", b.Writes()-writes)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if len(rs) != 1 {
		t.Fatalf("records: %d, want 1", len(rs))
	}
	if rs[0].Owner != "ctl/shop" || rs[0].Commit != commit {
		t.Fatalf("record: %+v", rs[0])
	}
}

func TestCommitChangingOneServiceUpdatesOnlyThatService(t *testing.T) {
	b, f, c := shopOnMinimal(t, true)
	mustReconcile(t, c, "shop")
	workerV := b.ServiceVersion("shop", "shop_worker")

	f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("pass: %+v", res)
	}
	if !slices.Equal(res.Deployed.Updated, []string{"web"}) || res.Deployed.Writes != 1 {
		t.Fatalf("deploy: %+v", res.Deployed)
	}
	if b.ServiceVersion("shop", "shop_worker") != workerV {
		t.Fatal("worker was written")
	}
	if res.Revision != 2 {
		t.Fatalf("revision %d", res.Revision)
	}
}

func TestCommitThatRendersTheSameManifestDeploysNothing(t *testing.T) {
	_, f, c := shopOnMinimal(t, true)
	mustReconcile(t, c, "shop")

	files := repoFiles("# a comment only a reader sees\n" + composeV1)
	files["README.md"] = "docs changed\n"
	commit := f.commit(t, files)
	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Unchanged || res.Deployed != nil {
		t.Fatalf("pass: %+v", res)
	}
	if res.Status.SeenRevision != commit {
		t.Fatalf("seen revision %q, want %q", res.Status.SeenRevision, commit)
	}
}

func TestManualApplicationIsPlannedButNotAppliedUntilSync(t *testing.T) {
	b, _, c := shopOnMinimal(t, false)

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install || res.Deployed != nil {
		t.Fatalf("manual pass: %+v", res)
	}
	if res.Status.Sync != application.OutOfSync || res.Status.SyncReason != application.ReasonGit {
		t.Fatalf("manual status: %+v", res.Status)
	}
	if b.Writes() != 0 {
		t.Fatal("manual application was applied")
	}

	res, err := c.SyncNow(context.Background(), "shop", "alice")
	if err != nil || res.Err != nil || res.Revision != 1 {
		t.Fatalf("sync: %+v %v", res, err)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].Trigger != "sync by alice" {
		t.Fatalf("trigger %q", rs[0].Trigger)
	}
	if res.Status.Sync != application.Synced {
		t.Fatalf("after sync: %+v", res.Status)
	}
}

func TestRestartedControllerPlansFromTheSwarmAndRedeploysNothing(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	mustReconcile(t, newTestController(t, b, f, testApp("shop", true)), "shop")
	writes := b.Writes()

	res := mustReconcile(t, newTestController(t, b, f, testApp("shop", true)), "shop")
	if res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("restart: %+v, %d writes", res, b.Writes()-writes)
	}
}

func TestBrokenInputIsReportedAndLeavesTheStackRunning(t *testing.T) {
	cases := map[string]map[string]string{
		"invalid yaml":       {"docker-compose.yml": "services: [oops\n"},
		"unknown key":        repoFiles(strings.Replace(composeV1, "    image: example/worker:1", "    image: example/worker:1\n    imagez: x", 1)),
		"missing file":       {"other.yml": composeV1},
		"config out of repo": repoFiles(strings.Replace(composeV1, "./app.conf", "../../etc/passwd", 1)),
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			b := chartstest.NewMinimal()
			f := newFakeFetcher()
			f.commit(t, repoFiles(composeV1))
			c := newTestController(t, b, f, testApp("shop", true))
			mustReconcile(t, c, "shop")
			writes := b.Writes()

			f.commit(t, files)
			res := mustReconcile(t, c, "shop")
			if res.Err == nil {
				t.Fatal("broken input passed")
			}
			if KindOf(res.Err) != Stalled {
				t.Fatalf("kind %s, want stalled", KindOf(res.Err))
			}
			if b.Writes() != writes {
				t.Fatal("broken input wrote to the swarm")
			}
			msg := res.Status.LastError
			if !strings.Contains(msg, `application "shop"`) || !strings.Contains(msg, "docker-compose.yml") {
				t.Fatalf("error does not name application and file: %q", msg)
			}
			if res.Status.LastAppliedRevision != 1 {
				t.Fatalf("applied revision lost: %+v", res.Status)
			}
		})
	}
}

func TestFetchFailuresAreClassified(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	c := newTestController(t, b, f, testApp("shop", true))

	res := mustReconcile(t, c, "shop") // no commit: revision not found
	if !errors.Is(res.Err, source.ErrRevisionNotFound) || KindOf(res.Err) != Stalled {
		t.Fatalf("missing revision: %v (%s)", res.Err, KindOf(res.Err))
	}
	f.err = fmt.Errorf("dial: %w", source.ErrUnreachable)
	res = mustReconcile(t, c, "shop")
	if !errors.Is(res.Err, source.ErrUnreachable) || KindOf(res.Err) != Transient {
		t.Fatalf("unreachable: %v (%s)", res.Err, KindOf(res.Err))
	}
	if res.Status.Sync != application.SyncUnknown {
		t.Fatalf("sync %s, want Unknown", res.Status.Sync)
	}
}

func TestMinimalBackendReportsEveryLostFeature(t *testing.T) {
	_, _, c := shopOnMinimal(t, true)
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, want := range []string{
		"live drift unavailable: backend lacks LiveDrift",
		"trusted health reads unavailable: backend lacks StackServicesReader",
		"batched swarm reads unavailable: backend lacks StacksReader",
	} {
		if !slices.Contains(res.Status.Unavailable, want) {
			t.Errorf("status does not say %q: %v", want, res.Status.Unavailable)
		}
	}
	if res.Status.Health != application.Healthy {
		t.Fatalf("health %s (%s)", res.Status.Health, res.Status.HealthMessage)
	}
}

func TestUnreadableSwarmIsUnknownNotMissing(t *testing.T) {
	b, _, c := shopOnMinimal(t, true)
	mustReconcile(t, c, "shop")

	b.FailReads = true
	res := mustReconcile(t, c, "shop")
	if res.Status.Health != application.HealthUnknown {
		t.Fatalf("health %s, want Unknown", res.Status.Health)
	}
}

func TestStackOwnedByAnotherControllerIsRefused(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	other, err := New(Options{ControllerID: "other", Backend: b, Fetcher: f, Logger: quiet}, []application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, other, "shop")
	writes := b.Writes()

	res := mustReconcile(t, newTestController(t, b, f, testApp("shop", true)), "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), `owned by "other/shop"`) {
		t.Fatalf("takeover: %v", res.Err)
	}
	if b.Writes() != writes {
		t.Fatal("takeover wrote")
	}
}

func TestRenamedApplicationTakesOverItsStack(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	mustReconcile(t, newTestController(t, b, f, testApp("shop", true)), "shop")

	renamed := testApp("store", true)
	renamed.Stack = "shop"
	res := mustReconcile(t, newTestController(t, b, f, renamed), "store")
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("rename: %+v", res)
	}
	if len(res.Deployed.Updated)+len(res.Deployed.Created) != 0 {
		t.Fatalf("rename rewrote services: %+v", res.Deployed)
	}
}

func TestRunLoopSyncsEveryApplicationAndServesSyncRequests(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	auto, manual := testApp("auto", true), testApp("manual", false)
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{auto, manual})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := c.Status("auto")
		if st.Sync == application.Synced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("auto never synced: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ch, err := c.RequestSync("manual", "bob")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		if res.Err != nil || res.Revision != 1 {
			t.Fatalf("sync result: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sync request not served")
	}
	if _, err := c.RequestSync("nope", "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown app: %v", err)
	}
}

// countingStacksReader is MinimalBackend plus StacksReader, counting how
// often the swarm is read for stacks.
type countingStacksReader struct {
	*chartstest.MinimalBackend
	reads int
	mu    sync.Mutex
}

func (b *countingStacksReader) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	out := map[string][]charts.ServiceState{}
	for _, s := range stacks {
		out[s] = b.StackServices(ctx, s)
	}
	return out, nil
}

var _ capability.StacksReader = (*countingStacksReader)(nil)

// numberedApps is n automated applications, app00, app01 and so on.
func numberedApps(n int) []application.Application {
	apps := make([]application.Application, 0, n)
	for i := range n {
		apps = append(apps, testApp(fmt.Sprintf("app%02d", i), true))
	}
	return apps
}

func TestOneBatchReadsTheSwarmOnceForEveryApplication(t *testing.T) {
	b := &countingStacksReader{MinimalBackend: chartstest.NewMinimal()}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	apps := numberedApps(20)
	c := newTestController(t, b, f, apps...)
	res := c.RunOnce(context.Background())
	if len(res) != 20 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.Err != nil || r.Action != charts.Install {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
	}
	b.reads = 0
	res = c.RunOnce(context.Background())
	for _, r := range res {
		if r.Action != charts.Unchanged {
			t.Fatalf("%s: %s on the second batch", r.App, r.Action)
		}
	}
	if b.reads != 1 {
		t.Fatalf("a steady batch of 20 applications read the swarm %d times, want 1", b.reads)
	}
}

// racingBackend is MinimalBackend plus OutOfBand: every deploy reports that
// it lost a compare-and-swap on the web service, as the moby backend does
// when another writer changes a service between its read and its write.
type racingBackend struct {
	*chartstest.MinimalBackend
	notify func(string)
}

func (b racingBackend) WithOutOfBandNotifier(fn func(string)) charts.Backend {
	return racingBackend{MinimalBackend: b.MinimalBackend, notify: fn}
}

func (b racingBackend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	if b.notify != nil {
		b.notify(req.Stack + "_web")
	}
	return b.MinimalBackend.DeployStack(ctx, req)
}

var _ capability.OutOfBand = racingBackend{}

func TestLostCompareAndSwapIsReportedAsOutOfBand(t *testing.T) {
	b := racingBackend{MinimalBackend: chartstest.NewMinimal()}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if !slices.Equal(res.Status.OutOfBand, []string{"web"}) {
		t.Fatalf("out-of-band %v, want [web]", res.Status.OutOfBand)
	}
	if slices.ContainsFunc(res.Status.Unavailable, func(s string) bool { return strings.Contains(s, "OutOfBand") }) {
		t.Fatalf("OutOfBand listed as unavailable: %v", res.Status.Unavailable)
	}
	// The next pass, with no write, has nothing to report.
	res = mustReconcile(t, c, "shop")
	if len(res.Status.OutOfBand) != 0 {
		t.Fatalf("stale out-of-band report: %v", res.Status.OutOfBand)
	}
}

func TestSetApplicationsAddsChangesAndRemoves(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	keep, gone := testApp("keep", true), testApp("gone", true)
	c := newTestController(t, b, f, keep, gone)
	c.RunOnce(context.Background())

	added := testApp("added", true)
	changed := keep
	changed.History = 3
	c.SetApplications([]application.Application{changed, added})
	names := []string{}
	for _, a := range c.Applications() {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"added", "keep"}) {
		t.Fatalf("applications %v", names)
	}
	if _, ok := c.Status("gone"); ok {
		t.Fatal("removed application still has a status")
	}
	if st, _ := c.Status("keep"); st.LastAppliedRevision != 1 {
		t.Fatalf("kept application lost its status: %+v", st)
	}
	res := c.RunOnce(context.Background())
	if len(res) != 2 || res[0].App != "added" || res[0].Action != charts.Install || res[1].Action != charts.Unchanged {
		t.Fatalf("after reload: %+v", res)
	}
}

// releaseListing is MinimalBackend plus ReleaseLister, DeclaredLister (so
// records prove what they declared) and a ResourceRemover that only counts,
// so a sweep would really delete.
type releaseListing struct {
	*chartstest.MinimalBackend
	removals *int
}

func (b releaseListing) DeclaredResources(ctx context.Context, manifest, stack string) (*compose.Stack, error) {
	return compose.Convert(ctx, manifest, stack, nil)
}

func (b releaseListing) RemoveService(context.Context, string) error { *b.removals++; return nil }
func (b releaseListing) RemoveNetwork(context.Context, string) error { *b.removals++; return nil }
func (b releaseListing) RemoveConfig(context.Context, string) error  { *b.removals++; return nil }
func (b releaseListing) RemoveSecret(context.Context, string) error  { *b.removals++; return nil }

func (b releaseListing) ReleaseOwners(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, stack := range b.ReleaseNames() {
		if rs, _ := b.Releases(ctx, stack); len(rs) > 0 {
			out[stack] = rs[0].Owner
		}
	}
	return out, nil
}

var (
	_ capability.ReleaseLister   = releaseListing{}
	_ capability.ResourceRemover = releaseListing{}
	_ capability.DeclaredLister  = releaseListing{}
)

func TestAnEmptyApplicationsFilePrunesNothing(t *testing.T) {
	removals := 0
	b := releaseListing{chartstest.NewMinimal(), &removals}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true), testApp("blog", true))
	c.RunOnce(context.Background())

	empty, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, PruneOrphans: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := empty.SweepOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 2 {
		t.Fatalf("orphans %+v", orphans)
	}
	for _, o := range orphans {
		if o.Sweep == nil || !o.Sweep.DryRun {
			t.Fatalf("%s was swept for real from an empty applications file: %+v", o.Stack, o.Sweep)
		}
	}
	if removals != 0 {
		t.Fatalf("%d removals from an empty applications file", removals)
	}

	// With an application left in the file, the other stack is pruned.
	one, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, PruneOrphans: true},
		[]application.Application{testApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.SweepOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	if removals == 0 {
		t.Fatal("the removed application's stack was not pruned")
	}
}
