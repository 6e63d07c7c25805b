package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/internal/apiwire"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
	"github.com/flotilla-gitops/flotilla/web"
)

// detailStack is the compose file of the live tests, with web's MARK and
// whether worker is declared as its knobs.
func detailStack(mark string, worker bool) map[string]string {
	s := `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    environment:
      MARK: ` + mark + `
    stop_grace_period: 1s
`
	if worker {
		s += `  worker:
    image: flotilla-test/app:1
    environment:
      MARK: worker
    stop_grace_period: 1s
`
	}
	return map[string]string{"deploy/docker-compose.yml": s}
}

// live is the real controller on the real swarm behind the real API and
// the console: one manual application, so nothing is written unless the
// test or the page asks.
type live struct {
	t     *testing.T
	url   string
	app   string
	repo  *gittest.Repo
	ctl   *reconcile.Controller
	be    *backend.Backend
	quiet *slog.Logger
}

func newLive(t *testing.T) *live {
	t.Helper()
	chromiumPath(t)
	stack := swarmtest.Name(t, "ui")
	swarmtest.Cleanup(t, stack)
	quiet := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	be, err := backend.New(ctx, backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	repo := gittest.New(t)
	repo.Commit("mark one", detailStack("one", true))
	app := application.Application{
		Name: stack, Stack: stack, History: 10,
		Source: application.Source{RepoURL: repo.Dir, Revision: "main", Path: "deploy"},
	}
	app.SyncPolicy.Interval.Duration = time.Minute
	broker := events.NewBroker(events.BrokerOptions{})
	ctl, err := reconcile.New(reconcile.Options{
		ControllerID: "ui-" + stack, Backend: be, Logger: quiet, Events: broker,
		Fetcher: source.New(source.Options{CacheDir: filepath.Join(t.TempDir(), "git"), Logger: quiet}),
	}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	srv := httptest.NewServer(api.New(api.Options{
		Controller: apiwire.New(ctl), Events: broker, UI: web.Handler(), Logger: quiet,
		Tokens: api.Tokens{
			{Name: "admin", Role: access.Admin, Secret: adminToken},
			{Name: "viewer", Role: access.Viewer, Secret: readToken},
		},
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop within 30s")
		}
	})
	return &live{t: t, url: srv.URL, app: stack, repo: repo, ctl: ctl, be: be, quiet: quiet}
}

// sync runs an explicit sync and fails the test if it fails.
func (l *live) sync() {
	l.t.Helper()
	ch, err := l.ctl.RequestSyncWith(l.app, reconcile.SyncRequest{By: "test"})
	if err != nil {
		l.t.Fatal(err)
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			l.t.Fatalf("sync: %v", res.Err)
		}
	case <-time.After(4 * time.Minute):
		l.t.Fatal("sync did not finish in 4m")
	}
}

func (l *live) services() map[string]swarm.Service {
	l.t.Helper()
	svcs, err := l.be.LiveServices(context.Background(), l.app)
	if err != nil {
		l.t.Fatal(err)
	}
	out := map[string]swarm.Service{}
	for name, s := range svcs {
		out[strings.TrimPrefix(name, l.app+"_")] = s
	}
	return out
}

// settled waits until the stack is at rest, after which a service's
// version moves only when someone writes it: Swarm's own update-progress
// writes move it too while an update runs.
func (l *live) settled() {
	l.t.Helper()
	swarmtest.Eventually(l.t, 3*time.Minute, func() (bool, string) {
		states, err := l.be.ReadStackServices(context.Background(), l.app)
		if err != nil {
			return false, err.Error()
		}
		return swarmtest.Settled(states)
	})
}

func (l *live) versions() map[string]uint64 {
	out := map[string]uint64{}
	for n, s := range l.services() {
		out[n] = s.Version.Index
	}
	return out
}

func (l *live) mark() string {
	l.t.Helper()
	web, ok := l.services()["web"]
	if !ok {
		return "(no web service)"
	}
	for _, e := range web.Spec.TaskTemplate.ContainerSpec.Env {
		if v, ok := strings.CutPrefix(e, "MARK="); ok {
			return v
		}
	}
	return "(no MARK)"
}

func (l *live) history() []charts.Release {
	l.t.Helper()
	rs, err := l.be.Releases(context.Background(), l.app)
	if err != nil {
		l.t.Fatal(err)
	}
	return rs
}

// TestBrowser_theApplicationViewDiffsRollsBackAfterConfirmingAndPreviewsASync
// drives the application view against a real controller on the swarm:
// revisions 1 (MARK one) and 2 (MARK two) are deployed, and the repository
// then declares MARK three without worker.
func TestBrowser_theApplicationViewDiffsRollsBackAfterConfirmingAndPreviewsASync(t *testing.T) {
	l := newLive(t)
	l.sync()
	l.repo.Commit("mark two", detailStack("two", true))
	l.sync()
	// Settled, the live diff compares every service field by field rather
	// than reporting web's rolling update as in motion.
	l.settled()
	l.repo.Commit("mark three, no worker", detailStack("three", false))
	if got := len(l.history()); got != 2 {
		t.Fatalf("%d release records before the page, want 2", got)
	}

	ctx := newTabFor(t, 12*time.Minute)
	run(t, ctx, chromedp.Navigate(l.url+"/ui/#/app/"+l.app))
	signIn(t, ctx, adminToken)
	waitJSFor(t, ctx, 2*time.Minute, "the history with both revisions", `document.querySelectorAll('button.rollback').length === 1 && document.querySelectorAll('button.diff-rev').length === 2`)
	waitLive(t, ctx)
	shots(t, ctx, "tree", "#tree")

	// The live diff: the deployed manifest against the declared one, and
	// each service field by field.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#diff-show`)))
	start := time.Now()
	waitJSFor(t, ctx, 3*time.Minute, "the live diff", `document.querySelector('#diff-body table.sbs') && document.querySelector('#diff-services')`)
	t.Logf("the live diff took %s", time.Since(start))
	if got := evalString(t, ctx, `document.querySelector('#diff-body table.sbs').getAttribute('aria-label')`); got != "deployed against declared" {
		t.Errorf("the live diff compares %q", got)
	}
	changed := `[...document.querySelectorAll('#diff-body table.sbs tr.row-change')].map(r => r.querySelector('.left').textContent + ' => ' + r.querySelector('.right').textContent)`
	if rows := eval[[]string](t, ctx, changed); !containsLine(rows, "two", "three") {
		t.Errorf("the live diff's changed lines %q lack MARK two => three", rows)
	}
	if n := evalString(t, ctx, `String(document.querySelectorAll('#diff-body table.sbs tr.row-del').length)`); n == "0" {
		t.Error("the live diff marks no line of worker as removed")
	}
	fields := eval[[]string](t, ctx, `[...document.querySelectorAll('#diff-services .svc-change')].map(s => s.querySelector('h5').textContent + ': ' + [...s.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent).join('|')).join(';'))`)
	if !slices.Contains(fields, "update web: env.MARK|three|two") {
		t.Errorf("the field-by-field diff reads %q, want web's env.MARK declared three, live two", fields)
	}
	if !slices.ContainsFunc(fields, func(s string) bool { return strings.HasPrefix(s, "remove worker") }) {
		t.Errorf("the field-by-field diff %q does not say worker would be removed", fields)
	}
	shots(t, ctx, "diff-live", "#diff-heading")

	// Against a recorded revision, chosen from the history.
	run(t, ctx, chromedp.Click(chromedp.CSS(`button.diff-rev[data-revision="1"]`)))
	waitJSFor(t, ctx, time.Minute, "the diff against revision 1", `document.querySelector('#diff-body table.sbs')?.getAttribute('aria-label') === 'revision 1 against declared'`)
	if rows := eval[[]string](t, ctx, changed); !containsLine(rows, "one", "three") {
		t.Errorf("the diff against revision 1 has changed lines %q, want MARK one => three", rows)
	}
	if v := evalString(t, ctx, `document.getElementById('diff-against').value`); v != "1" {
		t.Errorf("the revision picker reads %q after the history's Diff of revision 1", v)
	}
	shots(t, ctx, "diff-revision", "#diff-heading")

	// Rollback: the dialog shows what it would change; Escape cancels.
	timelineEvents := `document.querySelectorAll('#timeline li.tl-event').length`
	before := eval[int](t, ctx, timelineEvents)
	l.settled()
	versions := l.versions()
	run(t, ctx, chromedp.Click(chromedp.CSS(`button.rollback[data-revision="1"]`)))
	waitJSFor(t, ctx, time.Minute, "the rollback's diff in the dialog", `document.getElementById('rollback-dialog')?.open && document.querySelector('#rollback-diff table.sbs') && !document.getElementById('rollback-confirm').disabled`)
	if got := evalString(t, ctx, `document.querySelector('#rollback-diff table.sbs').getAttribute('aria-label')`); got != "deployed (revision 2) against revision 1" {
		t.Errorf("the rollback dialog compares %q", got)
	}
	if rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#rollback-diff tr.row-change')].map(r => r.querySelector('.left').textContent + ' => ' + r.querySelector('.right').textContent)`); !containsLine(rows, "two", "one") {
		t.Errorf("the rollback dialog's changed lines %q lack MARK two => one", rows)
	}
	if !evalBool(t, ctx, `document.getElementById('rollback-dialog').contains(document.activeElement)`) {
		t.Error("the dialog opened without the focus inside it")
	}
	// Tab from the last button wraps to the first: the focus stays inside.
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#rollback-cancel`)), chromedp.KeyEvent("\t"))
	if got := evalString(t, ctx, `document.activeElement.id`); got != "rollback-confirm" {
		t.Errorf("Tab from Cancel moved the focus to %q, want the confirm button", got)
	}
	shots(t, ctx, "rollback-confirm", "#rollback-dialog")
	run(t, ctx, chromedp.KeyEvent("\x1b")) // Escape
	waitJS(t, ctx, "the dialog gone", `!document.getElementById('rollback-dialog')`)
	if got := evalString(t, ctx, `document.activeElement?.className`); got != "rollback" {
		t.Errorf("after Escape the focus is on %q, want the Rollback button back", got)
	}
	time.Sleep(time.Second) // a POST the cancel failed to stop would be under way by now
	if got := len(l.history()); got != 2 {
		t.Fatalf("%d release records after Escape, want still 2", got)
	}
	if got := l.versions(); !maps(got, versions) {
		t.Fatalf("service versions moved after Escape: %v, then %v", versions, got)
	}

	// Confirmed, the rollback happens and the timeline shows it live.
	run(t, ctx, chromedp.Click(chromedp.CSS(`button.rollback[data-revision="1"]`)))
	waitJSFor(t, ctx, time.Minute, "the dialog again", `document.getElementById('rollback-dialog')?.open && !document.getElementById('rollback-confirm').disabled`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#rollback-confirm`)))
	waitJSFor(t, ctx, time.Minute, "the rollback's answer", `document.getElementById('op-result')?.textContent.startsWith('Rollback: Queued')`)
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		rs := l.history()
		return len(rs) == 3 && l.mark() == "one", fmt.Sprintf("%d records, web MARK %s", len(rs), l.mark())
	})
	// The record is written before the pass ends; its sync.succeeded
	// follows once the rollout is confirmed.
	waitJSFor(t, ctx, 3*time.Minute, "the rollback's events and release in the timeline",
		`document.querySelectorAll('#timeline li.tl-event').length > `+fmt.Sprint(before)+
			` && [...document.querySelectorAll('#timeline li.tl-release')].some(li => li.textContent.includes('release 3'))`+
			` && [...document.querySelectorAll('#timeline li.tl-event .tl-type')].some(b => b.textContent === 'sync.succeeded')`)
	shots(t, ctx, "timeline", "#timeline")

	// A dry run with prune previews the writes and removals and writes
	// nothing; its button then syncs for real.
	l.settled()
	versions = l.versions()
	run(t, ctx, chromedp.Click(chromedp.CSS(`#sync-prune`)), chromedp.Click(chromedp.CSS(`#sync-preview`)))
	waitJSFor(t, ctx, 3*time.Minute, "the sync preview", `document.querySelector('#plan-writes') && document.querySelector('#plan-removals')`)
	writes := eval[[]string](t, ctx, `[...document.querySelectorAll('#plan-writes .svc-change')].map(s => s.querySelector('h5').textContent + ': ' + [...s.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent).join('|')).join(';'))`)
	if !slices.Contains(writes, "update web: env.MARK|three|one") {
		t.Errorf("the preview's writes read %q, want web's env.MARK one -> three", writes)
	}
	removals := eval[[]string](t, ctx, `[...document.querySelectorAll('#plan-removals li')].map(l => l.textContent)`)
	if !slices.Contains(removals, "remove service "+l.app+"_worker") {
		t.Errorf("the preview's removals read %q, want worker's service", removals)
	}
	if got := l.versions(); !maps(got, versions) {
		t.Errorf("service versions moved during the dry run: %v, then %v", versions, got)
	}
	if got := len(l.history()); got != 3 {
		t.Errorf("%d release records after the dry run, want still 3", got)
	}
	if l.mark() != "one" {
		t.Errorf("web's MARK is %s after the dry run", l.mark())
	}
	shots(t, ctx, "sync-preview", "#sync-plan")

	run(t, ctx, chromedp.Click(chromedp.CSS(`#plan-apply`)))
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		_, worker := l.services()["worker"]
		return l.mark() == "three" && !worker && len(l.history()) == 4, fmt.Sprintf("web MARK %s, worker still there %v", l.mark(), worker)
	})

	// The logs panel, for its screenshots at every width.
	// Clicked in the page, not through a node id: the sync's events have
	// just re-rendered the view, which moves the persistent panels, and a
	// moved node gets a new id in the DevTools protocol (the click of a
	// stale id fails with "Could not find node").
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('log-start').click()`))
	waitJSFor(t, ctx, time.Minute, "the log lines or their status", `document.getElementById('log-status').textContent !== '' && document.getElementById('log-status').textContent !== 'reading…'`)
	shots(t, ctx, "logs", "#log-output")
}

// TestBrowser_aViewerReadsTheDiffAgainstARevisionButCannotRollBack keeps
// a viewer's rights: diffs are reads, a rollback is refused by the API.
func TestBrowser_aViewerReadsTheDiffAgainstARevisionButCannotRollBack(t *testing.T) {
	l := newLive(t)
	l.sync()
	l.repo.Commit("mark two", detailStack("two", true))
	l.sync()
	ctx := newTabFor(t, 12*time.Minute)
	run(t, ctx, chromedp.Navigate(l.url+"/ui/#/app/"+l.app))
	signIn(t, ctx, readToken)
	waitJSFor(t, ctx, 2*time.Minute, "the history", `document.querySelectorAll('button.rollback').length === 1`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`button.diff-rev[data-revision="1"]`)))
	waitJSFor(t, ctx, time.Minute, "the diff against revision 1", `document.querySelector('#diff-body table.sbs')?.getAttribute('aria-label') === 'revision 1 against declared'`)

	run(t, ctx, chromedp.Click(chromedp.CSS(`button.rollback[data-revision="1"]`)))
	waitJSFor(t, ctx, time.Minute, "the dialog with its diff", `document.querySelector('#rollback-diff table.sbs') && !document.getElementById('rollback-confirm').disabled`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#rollback-confirm`)))
	waitJS(t, ctx, "the 403", `document.getElementById('op-result')?.textContent.startsWith('Rollback refused:')`)
	if !evalBool(t, ctx, `document.querySelector('button.rollback').disabled && document.getElementById('sync-now').disabled`) {
		t.Error("Rollback and Sync stay enabled after the API refused the viewer")
	}
	if got := len(l.history()); got != 2 {
		t.Errorf("%d release records after a viewer's rollback, want 2", got)
	}
}

func containsLine(rows []string, left, right string) bool {
	return slices.ContainsFunc(rows, func(r string) bool {
		l, rt, _ := strings.Cut(r, " => ")
		return strings.Contains(l, "MARK: "+left) && strings.Contains(rt, "MARK: "+right)
	})
}

func maps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// waitJSFor is waitJS with a longer deadline, for what waits on the swarm.
func waitJSFor(t *testing.T, ctx context.Context, d time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waiting for %s: %s did not hold (err %v); the page reads:\n%s", what, cond, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shots saves the viewport, scrolled to sel, at every width, as
// NAME-WIDTH.png in the test's artifact directory (kept with go test
// -artifacts) or $FLOTILLA_UI_SCREENSHOTS when set; the viewport is then
// restored to the tab's usual size.
func shots(t *testing.T, ctx context.Context, name, sel string) {
	t.Helper()
	dir := os.Getenv("FLOTILLA_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	for _, w := range widths {
		run(t, ctx, chromedp.EmulateViewport(w, 900),
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s)?.scrollIntoView({block: 'start'})`, quote(sel))))
		// The page has no horizontal scrolling at any width: what does not
		// fit scrolls inside its own box.
		if over := eval[int](t, ctx, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
			wide := evalString(t, ctx, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && ![...e.children].some(c => c.getBoundingClientRect().right > document.documentElement.clientWidth + 1)).slice(0, 5).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`)
			t.Errorf("%s at %dpx: the page is %dpx wider than the viewport; widest: %s", name, w, over, wide)
		}
		buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(buf))
		if err != nil || int64(cfg.Width) != w {
			t.Fatalf("screenshot %s at %d: %dx%d, %v", name, w, cfg.Width, cfg.Height, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, w))
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s (%dx%d)", path, cfg.Width, cfg.Height)
	}
	run(t, ctx, chromedp.EmulateViewport(1280, 860))
}

// TestBrowser_hookStatusIsShownWhenTheStatusHasIt shows each hook job of
// the status, and no hooks section for a status without them.
func TestBrowser_hookStatusIsShownWhenTheStatusHasIt(t *testing.T) {
	apps := sample()
	zero, two := 0, 2
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	apps[1].Hooks = []application.HookStatus{
		{Name: "migrate", Phase: "PreSync", Revision: 3, State: application.HookSucceeded, Message: "1/1 completed",
			StartedAt: start, FinishedAt: start.Add(7 * time.Second), ExitCode: &zero},
		{Name: "smoke", Phase: "PostSync", Wave: 2, Revision: 3, State: application.HookFailed, Message: "task failed: non-zero exit (2)",
			ExitCode: &two, LogTail: []string{"GET /health 500", "giving up"}},
		{Name: "notify", Phase: "SyncFail", State: application.HookSkipped},
	}
	f := newFixture(t, false, apps...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/shop"))
	// A failed hook's log lines are served only to callers who may read
	// logs, which the read token may not.
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "shop's history", `document.getElementById('detail').textContent.includes('No releases recorded.')`)
	if evalBool(t, ctx, `document.getElementById('hooks')`) {
		t.Fatal("a status without hooks shows a hooks section")
	}
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/app/drifty'`))
	waitJS(t, ctx, "the hooks table", `document.querySelectorAll('#hooks tbody tr').length === 3`)
	rows := tableRows(t, ctx, "#hooks table")
	for i, want := range []string{
		"migrate|PreSync|Succeeded|3|7s|1/1 completed (exit 0)",
		"smoke|PostSync wave 2|Failed|3||task failed: non-zero exit (2) (exit 2)Last log linesGET /health 500\ngiving up",
		"notify|SyncFail|Skipped|||",
	} {
		if i >= len(rows) || rows[i] != want {
			t.Errorf("hooks row %d = %q, want %q", i, rows, want)
		}
	}
}

// TestBrowser_secretRefsAreListedWithVersionAndRotation shows each secret
// the deployed release took from a store, and no such section without any.
func TestBrowser_secretRefsAreListedWithVersionAndRotation(t *testing.T) {
	apps := sample()
	apps[1].SecretRefs = []application.SecretRefStatus{
		{Secret: "db_password", Store: "vault", Path: "kv/data/shop/db", Key: "password", Version: 4,
			SwarmSecret: "drifty_db_password-0123456789", LastRotated: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), RotatedRevision: 7},
		{Secret: "api_key", Store: "vault1", Path: "kv1/shop/api", Key: "key"},
		{Kind: "config", Secret: "app_conf", Store: "vault", Path: "kv/data/shop/app", Key: "conf", Version: 2},
		{Kind: "env", Service: "worker", Secret: "DB_PASSWORD", Store: "vault", Path: "kv/data/shop/db", Key: "password", Version: 4},
		{Secret: "aws_key", Store: "aws", Path: "shop/aws", Key: "key", VersionID: "a1b2c3d4-5e6f-7a8b-9c0d-e1f2a3b4c5d6"},
	}
	f := newFixture(t, false, apps...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/shop"))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "shop's history", `document.getElementById('detail').textContent.includes('No releases recorded.')`)
	if evalBool(t, ctx, `!!document.getElementById('secretrefs')`) {
		t.Fatal("a status without store secrets shows the section")
	}
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/app/drifty'`))
	waitJS(t, ctx, "the store secrets table", `document.querySelectorAll('#secretrefs tbody tr').length === 5`)
	rows := tableRows(t, ctx, "#secretrefs table")
	// An AWS version id is shortened like a commit, whole on hover.
	if len(rows) != 5 || !strings.HasPrefix(rows[0], "db_password|vault|kv/data/shop/db|password|4|") || !strings.HasSuffix(rows[0], "(release 7)") ||
		rows[1] != "api_key|vault1|kv1/shop/api|key|—|never" || rows[2] != "config app_conf|vault|kv/data/shop/app|conf|2|never" ||
		rows[3] != "worker env DB_PASSWORD|vault|kv/data/shop/db|password|4|never" ||
		rows[4] != "aws_key|aws|shop/aws|key|a1b2c3d4|never" {
		t.Fatalf("rows %q", rows)
	}
	if !evalBool(t, ctx, `document.querySelector('#secretrefs tbody tr:nth-child(5) td:nth-child(5) span').title === 'a1b2c3d4-5e6f-7a8b-9c0d-e1f2a3b4c5d6'`) {
		t.Fatal("the whole AWS version id is not on the shortened one's hover")
	}
}
