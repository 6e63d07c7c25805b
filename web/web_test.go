package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/web"
)

const (
	adminToken = "admin-secret-0123456789"
	readToken  = "read-secret-0123456789"
	xssName    = `<img src=x onerror=alert(1)>`
)

// ---- the served files, without a browser ------------------------------------

func TestUI_filesAreServedWithoutATokenWhileTheAPIStillNeedsOne(t *testing.T) {
	f := newFixture(t, false, sample()...)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp := get(t, noRedirect, f.url+"/")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET / = %d Location %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for path, ctype := range map[string]string{"/ui/": "text/html", "/ui/app.js": "javascript", "/ui/style.css": "text/css"} {
		resp := get(t, http.DefaultClient, f.url+path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s = %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), ctype)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q does not restrict scripts", path, csp)
		}
	}
	if resp := get(t, http.DefaultClient, f.url+"/api/v1/applications"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/applications without a token = %d, want 401", resp.StatusCode)
	}
	if resp := get(t, http.DefaultClient, f.url+"/ui/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nothing.js = %d, want 404", resp.StatusCode)
	}
}

func TestUI_withoutTheOptionTheRootStaysBehindTheToken(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Options{
		Controller: apitest.NewController(), Logger: slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: adminToken}},
	}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/ui/"} {
		if resp := get(t, http.DefaultClient, srv.URL+path); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without Options.UI = %d, want 401", path, resp.StatusCode)
		}
	}
}

// ---- in Chromium ------------------------------------------------------------

func TestBrowser_afterSignInTheListShowsEveryApplicationWithItsSyncAndHealth(t *testing.T) {
	f := newFixture(t, false, sample()...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/"))
	waitJS(t, ctx, "the token form", `!document.getElementById('login').hidden`)
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "three rows", `document.querySelectorAll('#apps tbody tr').length === 3`)

	rows := rowTexts(t, ctx)
	want := map[string][]string{
		"billing": {"billing billing eu Synced", "Healthy", "0123456", "1/1", "Unavailable: sweep: backend lacks Sweeper"},
		"drifty":  {"drifty drifty local OutOfSync (drift)", "Degraded", "web: 0 of 2 tasks running", "1/2", "apply web: update out of sequence", "Pinned: revision 1"},
		"shop":    {"shop shop local OutOfSync (git)", "Progressing", "web: 1 of 3 tasks running", "aaaaaaa", "bbbbbbb", "1/2"},
	}
	for i, name := range []string{"billing", "drifty", "shop"} {
		if !strings.HasPrefix(rows[i], name) {
			t.Fatalf("row %d = %q, want %s (sorted by name)", i, rows[i], name)
		}
		for _, s := range want[name] {
			if !strings.Contains(rows[i], s) {
				t.Errorf("row %s = %q, missing %q", name, rows[i], s)
			}
		}
	}
	if c := evalString(t, ctx, `getComputedStyle(document.querySelector('#apps .health-Degraded')).color`); c != "rgb(207, 34, 46)" {
		t.Errorf("Degraded is drawn in %s, want red", c)
	}

	run(t, ctx, chromedp.SendKeys(chromedp.ID("filter"), "sho"))
	waitJS(t, ctx, "the filter to leave one row", `document.querySelectorAll('#apps tbody tr').length === 1`)
	if rows := rowTexts(t, ctx); !strings.HasPrefix(rows[0], "shop") {
		t.Errorf("filtered rows = %q, want only shop", rows)
	}
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`(f => { f.value = ''; f.dispatchEvent(new Event('input')) })(document.getElementById('filter'))`))
	waitJS(t, ctx, "all rows again", `document.querySelectorAll('#apps tbody tr').length === 3`)
	screenshot(t, ctx, "list")
}

func TestBrowser_theDetailPageShowsServicesDriftSweepAndHistory(t *testing.T) {
	f := newFixture(t, false, sample()...)
	f.ctl.SetHistory("drifty", []charts.Release{
		{Name: "drifty", Revision: 2, Commit: strings.Repeat("c", 40), Trigger: "sync by admin", Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
			Chart: &charts.ChartRef{Name: "shop", Version: "0.2.0", ValuesDigest: "sha256:0123"}},
		{Name: "drifty", Revision: 1, Commit: strings.Repeat("d", 40), Trigger: "automated", Time: time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)},
	})
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 3`)
	run(t, ctx, chromedp.Click(`//table[@id="apps"]//a[text()="drifty"]`))
	waitJS(t, ctx, "the history", `document.getElementById('detail').textContent.includes('sync by admin')`)

	if h := evalString(t, ctx, `location.hash`); h != "#/app/drifty" {
		t.Errorf("location.hash = %q, want #/app/drifty", h)
	}
	detail := tableRows(t, ctx, "#detail table")
	for _, want := range []string{
		"web|Degraded|0/2|task exited (1)",
		"db|Healthy|1/1|",
		"web|image|nginx:1.27|nginx:1.25",
		"web|env.API_KEY (masked)|***|***",
		"web|env.DEBUG|(none)|1",
		"2|ccccccc|shop-0.2.0|", "1|ddddddd||",
	} {
		if !containsPrefix(detail, want) {
			t.Errorf("detail tables have no row starting %q; rows:\n%s", want, strings.Join(detail, "\n"))
		}
	}
	text := evalString(t, ctx, `document.getElementById('detail').textContent`)
	for _, leak := range []string{"null", "undefined", "NaN", "[object"} {
		if strings.Contains(text, leak) {
			t.Errorf("detail text shows %q:\n%s", leak, text)
		}
	}
	for _, want := range []string{"Chartshop 0.2.0, values sha256:0123", "Pending removals (prune is off)", "config drifty_old-conf", "Unmanaged (never touched)", "network drifty_manual", "Changed by another writer"} {
		if !strings.Contains(text, want) {
			t.Errorf("detail text lacks %q", want)
		}
	}
	screenshot(t, ctx, "detail")
}

func TestBrowser_aPublishedEventUpdatesThePageWithoutReload(t *testing.T) {
	f := newFixture(t, false, sample()...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/shop"))
	signIn(t, ctx, readToken)
	waitJS(t, ctx, "shop's detail", `document.querySelector('#detail h2')?.textContent.includes('Progressing')`)
	waitLive(t, ctx)
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	st := sample()[2]
	st.Sync, st.SyncReason, st.Health, st.HealthMessage = application.Synced, application.ReasonNone, application.Healthy, ""
	st.Revision = st.SeenRevision
	st.Services[0].Health, st.Services[0].Running = application.Healthy, 3
	f.setStatus(st)
	f.broker.Publish(events.Event{Type: events.SyncSucceeded, App: "shop", Stack: "shop", Revision: st.Revision})

	waitJS(t, ctx, "shop to show Synced and Healthy",
		`(t => t.includes('Synced') && t.includes('Healthy') && !t.includes('Progressing'))(document.querySelector('#detail h2').textContent)`)
	waitJS(t, ctx, "web 3/3", `document.getElementById('detail').textContent.includes('3/3')`)
	if !evalBool(t, ctx, `window.notReloaded === true`) {
		t.Fatal("the page reloaded")
	}

	// Back on the list, a dropped stream resumes with Last-Event-ID: an event
	// published while the page is disconnected still arrives.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 3`)
	f.srv.CloseClientConnections()
	billing := sample()[0]
	billing.Health, billing.HealthMessage = application.Degraded, "api: 0 of 2 tasks running"
	f.setStatus(billing)
	f.broker.Publish(events.Event{Type: events.HealthChanged, App: "billing", Stack: "billing"})
	waitJS(t, ctx, "billing to turn Degraded after reconnecting",
		`document.querySelector('#apps tbody tr').textContent.includes('api: 0 of 2 tasks running')`)
	waitLive(t, ctx)
	if !evalBool(t, ctx, `window.notReloaded === true`) {
		t.Fatal("the page reloaded")
	}
}

func TestBrowser_anAdminSyncIsQueuedAndItsOutcomeArrivesLive(t *testing.T) {
	f := newFixture(t, true, sample()...)
	st := sample()[1]
	st.Sync, st.SyncReason, st.Health, st.HealthMessage = application.Synced, application.ReasonNone, application.Healthy, ""
	st.Drift = nil
	f.next(st)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/drifty"))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "drifty's detail", `document.querySelector('#detail h2')?.textContent.includes('Degraded')`)
	waitLive(t, ctx)

	run(t, ctx, chromedp.Click(`//div[@class="actions"]/button[text()="Sync"]`))
	waitJS(t, ctx, "the sync answer", `document.getElementById('op-result')?.textContent.startsWith('Sync: Queued')`)
	waitJS(t, ctx, "drifty to show Synced and Healthy",
		`(t => t.includes('Synced') && t.includes('Healthy'))(document.querySelector('#detail h2').textContent)`)
	if syncs := f.ctl.Syncs(); len(syncs) != 1 || syncs[0].By != "admin" {
		t.Errorf("syncs = %+v, want one by admin", syncs)
	}

	run(t, ctx, chromedp.Click(`//div[@class="actions"]/button[text()="Refresh"]`))
	waitJS(t, ctx, "the refresh answer", `document.getElementById('op-result')?.textContent.startsWith('Refresh: Queued')`)
	if got := f.ctl.Refreshed(); len(got) != 1 || got[0] != "drifty" {
		t.Errorf("refreshed = %q, want [drifty]", got)
	}
}

func TestBrowser_aReadOnlyTokensSyncShowsTheAPIs403Message(t *testing.T) {
	f := newFixture(t, false, sample()...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/shop"))
	signIn(t, ctx, readToken)
	waitJS(t, ctx, "shop's detail", `document.querySelector('#detail h2')?.textContent.includes('shop')`)

	run(t, ctx, chromedp.Click(`//div[@class="actions"]/button[text()="Sync"]`))
	waitJS(t, ctx, "the 403 message", `document.getElementById('op-result')?.textContent.includes('this request needs operator')`)
	if !evalBool(t, ctx, `[...document.querySelectorAll('.actions button')].every(b => b.disabled)`) {
		t.Error("Sync and Refresh stay enabled after a 403")
	}
	if syncs := f.ctl.Syncs(); len(syncs) != 0 {
		t.Errorf("a read-only token started syncs: %+v", syncs)
	}
}

func TestBrowser_aWrongTokenIsAskedForAgain(t *testing.T) {
	f := newFixture(t, false, sample()...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"))
	signIn(t, ctx, "not-a-token")
	waitJS(t, ctx, "the refusal", `document.getElementById('login-error').textContent === 'invalid bearer token'`)
	if evalBool(t, ctx, `sessionStorage.length > 0`) {
		t.Error("a rejected token stays in session storage")
	}
	signIn(t, ctx, readToken)
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 3`)
}

func TestBrowser_withoutAuthNoTokenIsAsked(t *testing.T) {
	ctl := apitest.NewController(sample()...)
	srv := httptest.NewServer(api.New(api.Options{
		Controller: ctl, NoAuth: true, UI: web.Handler(),
		Events: events.NewBroker(events.BrokerOptions{}), Logger: slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(srv.URL+"/"))
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 3`)
	waitLive(t, ctx)
	if !evalBool(t, ctx, `document.getElementById('login').hidden && document.getElementById('signout').hidden`) {
		t.Error("the token form or the sign-out button shows although the API needs no token")
	}
}

func TestBrowser_anApplicationNamedLikeMarkupRendersAsText(t *testing.T) {
	evil := application.Status{
		Name: xssName, Stack: "evil", Sync: application.OutOfSync, SyncReason: application.ReasonDrift,
		Health: application.Degraded, HealthMessage: `<b onmouseover=alert(2)>bold</b>`,
		LastError: `<script>alert(3)</script>`,
		Services:  []application.ServiceStatus{{Name: `<svg onload=alert(4)>`, Health: application.Degraded, Message: "<i>x</i>"}},
		Drift:     []application.Drift{{Service: "web", Field: "labels.x", Desired: `<img src=y onerror=alert(5)>`, Live: "a"}},
	}
	f := newFixture(t, false, append(sample(), evil)...)
	ctx := newTab(t)
	var dialogs atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"))
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.alert = () => { window.alerted = true }`))
	signIn(t, ctx, readToken)
	waitJS(t, ctx, "four rows", `document.querySelectorAll('#apps tbody tr').length === 4`)

	// "<" sorts before letters, so the evil row comes first.
	if got := evalString(t, ctx, `document.querySelector('#apps tbody tr td a').textContent`); got != xssName {
		t.Errorf("first name cell = %q, want the name as text", got)
	}
	assertNoMarkup(t, ctx)
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#apps tbody tr td a').click()`))
	waitJS(t, ctx, "the evil detail", `document.getElementById('detail').textContent.includes('<svg onload=alert(4)>')`)
	if got := evalString(t, ctx, `decodeURIComponent(location.hash)`); got != "#/app/"+xssName {
		t.Errorf("location.hash decodes to %q", got)
	}
	assertNoMarkup(t, ctx)
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// assertNoMarkup checks that no element an injected string could have made
// exists anywhere in the page.
func assertNoMarkup(t *testing.T, ctx context.Context) {
	t.Helper()
	if n := evalString(t, ctx, `String(document.querySelectorAll('main img, main svg, main b, main i, main script').length)`); n != "0" {
		t.Errorf("%s elements were created from application data", n)
	}
	if evalBool(t, ctx, `window.alerted === true`) {
		t.Error("injected script ran")
	}
}

// ---- fixture ----------------------------------------------------------------

// fixture is the API with the UI mounted, over a fake controller whose
// statuses a test changes through next and setStatus.
type fixture struct {
	t      *testing.T
	url    string
	srv    *httptest.Server
	ctl    *apitest.Controller
	broker *events.Broker

	mu    sync.Mutex
	after map[string]application.Status // what the next sync of an app leaves
}

// newFixture serves statuses. When publish is set the fake itself publishes
// what a sync does, as the controller would; otherwise only the test
// publishes.
func newFixture(t *testing.T, publish bool, statuses ...application.Status) *fixture {
	t.Helper()
	f := &fixture{t: t, ctl: apitest.NewController(statuses...), after: map[string]application.Status{},
		broker: events.NewBroker(events.BrokerOptions{})}
	if publish {
		f.ctl.Events = f.broker
	}
	f.ctl.Result = func(app string, _ api.SyncOptions) api.SyncResult {
		f.mu.Lock()
		defer f.mu.Unlock()
		return api.SyncResult{Action: "upgrade", Status: f.after[app]} // a zero status keeps the old one
	}
	f.srv = httptest.NewServer(api.New(api.Options{
		Controller: f.ctl, Events: f.broker, UI: web.Handler(), Logger: slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{
			{Name: "admin", Role: access.Admin, Secret: adminToken},
			{Name: "viewer", Role: access.Viewer, Secret: readToken},
		},
	}))
	// The page's event stream holds a connection open; Close alone would
	// wait for it.
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	f.url = f.srv.URL
	return f
}

// next sets what the next sync of st.Name leaves behind.
func (f *fixture) next(st application.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after[st.Name] = st
}

// setStatus replaces an application's status in the fake, by a sync the
// page does not see unless the fake publishes.
func (f *fixture) setStatus(st application.Status) {
	f.t.Helper()
	f.next(st)
	done, err := f.ctl.RequestSync(st.Name, api.SyncOptions{By: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	<-done
}

// sample is apitest.Sample plus an application with drift, a sweep, a
// pinned rollback and an error, sorted by name.
func sample() []application.Status {
	s := apitest.Sample()
	s[0].Unavailable = []string{"sweep: backend lacks Sweeper"}
	drifty := application.Status{
		Name: "drifty", Stack: "drifty", Sync: application.OutOfSync, SyncReason: application.ReasonDrift,
		Health: application.Degraded, HealthMessage: "web: 0 of 2 tasks running",
		Revision: strings.Repeat("c", 40), SeenRevision: strings.Repeat("c", 40), LastAppliedRevision: 2,
		Pinned:    "revision 1 until the next commit",
		Chart:     "shop 0.2.0, values sha256:0123",
		LastError: "apply web: update out of sequence",
		Services: []application.ServiceStatus{
			{Name: "web", Health: application.Degraded, Running: 0, Desired: 2, Message: "task exited (1)"},
			{Name: "db", Health: application.Healthy, Running: 1, Desired: 1},
		},
		Drift: []application.Drift{
			{Service: "web", Field: "image", Desired: "nginx:1.27", Live: "nginx:1.25"},
			{Service: "web", Field: "env.API_KEY", Desired: "***", Live: "***", Masked: true},
			{Service: "web", Field: "env.DEBUG", Desired: "(none)", Live: "1"},
		},
		OutOfBand: []string{"web"},
		Sweep: &application.SweepStatus{DryRun: true, Pending: []string{"config drifty_old-conf"},
			Unmanaged: []string{"network drifty_manual"}},
	}
	return []application.Status{s[0], drifty, s[1]}
}

// ---- browser ----------------------------------------------------------------

var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	dir    string
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel() // waits for Chromium to exit
		os.RemoveAll(browser.dir)
	}
	os.Exit(code)
}

// chromiumPath finds Debian's Chromium. Missing, the browser tests skip on
// a developer machine and fail in CI, where scripts/test.sh installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("FLOTILLA_REQUIRE_SWARM") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI requires the browser tests")
	}
	t.Skip("chromium is not installed; apt-get install chromium to run the browser tests")
	return ""
}

// newTab opens a tab in the one Chromium the package's tests share. Tabs
// keep separate session storage, so each test signs in on its own.
func newTab(t *testing.T) context.Context {
	t.Helper()
	return newTabFor(t, 60*time.Second)
}

// newTabFor is newTab for a test that may take up to d, such as one that
// waits on the swarm.
func newTabFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	path := chromiumPath(t)
	browser.once.Do(func() {
		browser.dir, browser.err = os.MkdirTemp("", "flotilla-chromium-")
		if browser.err != nil {
			return
		}
		// The flags this machine needs: as root no sandbox, and no
		// background connections, which the closed network refuses.
		actx, acancel := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path),
			chromedp.Flag("headless", true),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.NoFirstRun,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(browser.dir),
			chromedp.WindowSize(1280, 860),
		)
		bctx, bcancel := chromedp.NewContext(actx)
		browser.ctx = bctx
		browser.cancel = func() { bcancel(); acancel() }
		// No timeout here: the context of the first call bounds the
		// browser's life.
		browser.err = chromedp.Do(bctx)
	})
	if browser.err != nil {
		t.Fatalf("start chromium: %v", browser.err)
	}
	tab, cancelTab := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancel := context.WithTimeout(tab, d)
	t.Cleanup(cancel)

	// An uncaught exception or a Content-Security-Policy refusal is a bug in
	// the page even when the assertions pass. 401s and 403s are logged by
	// the browser too, but those are answers the tests ask for.
	var mu sync.Mutex
	var problems []string
	console := chromedp.Console(tab)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("browser console: %s", p)
		}
	})
	return ctx
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for _, step := range steps {
		// The console redraws a view when the event stream or a refresh
		// brings news: a node found by a query can be replaced before the
		// click reaches it ("Could not find node with given id"). A click
		// that met a replaced node did nothing, so it is made again on a
		// fresh query; on a busy machine this happened in CI.
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			if err = chromedp.Do(ctx, step); err == nil || !staleNode(err) || ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// staleNode reports whether err says a node was replaced between its query
// and its use.
func staleNode(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") || strings.Contains(msg, "Node is detached from document")
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func evalString(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	return eval[string](t, ctx, expr)
}

func evalBool(t *testing.T, ctx context.Context, expr string) bool {
	t.Helper()
	return eval[bool](t, ctx, `!!(`+expr+`)`)
}

func signIn(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	waitJS(t, ctx, "the token form", `!document.getElementById('login').hidden`)
	run(t, ctx,
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
}

func waitLive(t *testing.T, ctx context.Context) {
	t.Helper()
	waitJS(t, ctx, "the live indicator", `document.getElementById('live').textContent === 'live'`)
}

// waitJS polls a JavaScript condition until it holds, and fails with the
// page's text if it does not within ten seconds.
func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waiting for %s: %s did not hold (err %v); the page reads:\n%s", what, cond, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rowTexts returns the application rows' cells, space-joined.
func rowTexts(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll('#apps tbody tr')].map(r => [...r.cells].map(c => c.textContent).join(' '))`)
}

// tableRows returns every body row of the tables matching sel, cells joined
// by "|".
func tableRows(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	return eval[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%s)].flatMap(t => [...t.tBodies[0].rows]).map(r => [...r.cells].map(c => c.textContent).join('|'))`, quote(sel)))
}

func containsPrefix(rows []string, prefix string) bool {
	for _, r := range rows {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

// screenshot saves the tab as PNG, to $FLOTILLA_UI_SCREENSHOTS when set (to
// look at the layout) and to the test's temp directory otherwise.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil || cfg.Width < 320 || cfg.Height < 300 {
		t.Fatalf("screenshot: %dx%d, %v", cfg.Width, cfg.Height, err)
	}
	dir := os.Getenv("FLOTILLA_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%dx%d)", path, cfg.Width, cfg.Height)
}

func get(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
