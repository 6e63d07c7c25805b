package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/web"
)

// fleet is twelve applications across two projects, two swarms and a set,
// in every sync and most health states, so each filter leaves something
// and drops something.
func fleet() []application.Status {
	type row struct {
		name, swarm, set string
		sync             application.Sync
		health           application.Health
	}
	rows := []row{
		{"shop-api", "local", "", application.Synced, application.Healthy},
		{"shop-web", "local", "", application.OutOfSync, application.Degraded},
		{"shop-worker", "eu", "", application.Synced, application.Progressing},
		{"shop-cache", "eu", "", application.SyncUnknown, application.HealthUnknown},
		{"bank-ledger", "eu", "", application.Synced, application.Healthy},
		{"bank-gateway", "local", "", application.OutOfSync, application.Missing},
		{"bank-audit", "local", "", application.Synced, application.Suspended},
		{"edge-a", "local", "edge", application.Synced, application.Healthy},
		{"edge-b", "eu", "edge", application.OutOfSync, application.Degraded},
		{"edge-c", "eu", "edge", application.Synced, application.Healthy},
		{"tools", "local", "", application.Synced, application.Healthy},
		{"zeta", "local", "", application.OutOfSync, application.Healthy},
	}
	out := make([]application.Status, 0, len(rows))
	for i, r := range rows {
		st := application.Status{Name: r.name, Stack: "st-" + r.name, Destination: r.swarm, Set: r.set,
			Sync: r.sync, Health: r.health, Revision: fmt.Sprintf("%040x", i+1), SeenRevision: fmt.Sprintf("%040x", i+1),
			Services: []application.ServiceStatus{{Name: "main", Health: r.health, Running: 1, Desired: 1}}}
		if r.sync == application.OutOfSync {
			st.SyncReason = application.ReasonDrift
		}
		if r.health == application.Degraded {
			st.HealthMessage = "main: 0 of 1 tasks running"
			st.Services[0].Running = 0
		}
		out = append(out, st)
	}
	return out
}

var fleetProjects = []application.Project{
	{Name: "shop", Applications: []string{"shop-*"}},
	{Name: "bank", Applications: []string{"bank-*"}},
}

// openFleet opens the console of a new fleet fixture at hash, signed in
// with token, and waits until the list shows rows rows.
func openFleet(t *testing.T, hash, token string, rows int) (*fixture, context.Context) {
	t.Helper()
	f := newFleetFixture(t)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"+hash))
	signIn(t, ctx, token)
	waitJS(t, ctx, fmt.Sprintf("%d rows", rows), rowCount(rows))
	return f, ctx
}

// newFleetFixture is newFixture with fleetProjects as the policy's projects.
func newFleetFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctl: apitest.NewController(fleet()...), after: map[string]application.Status{},
		broker: events.NewBroker(events.BrokerOptions{})}
	f.ctl.Result = func(app string, _ api.SyncOptions) api.SyncResult {
		f.mu.Lock()
		defer f.mu.Unlock()
		return api.SyncResult{Action: "upgrade", Status: f.after[app]}
	}
	f.srv = httptest.NewServer(api.New(api.Options{
		Controller: f.ctl, Events: f.broker, UI: web.Handler(), Logger: slog.New(slog.DiscardHandler),
		Policy: access.NewPolicy(fleetProjects),
		Tokens: api.Tokens{{Name: "viewer", Role: access.Viewer, Secret: readToken}, {Name: "admin", Role: access.Admin, Secret: adminToken}},
	}))
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	f.url = f.srv.URL
	return f
}

const (
	rowNames   = `[...document.querySelectorAll('#apps tbody tr')].map(r => r.dataset.name).join(',')`
	listHashJS = `decodeURIComponent(location.hash)`
)

func rowCount(n int) string {
	return fmt.Sprintf(`document.querySelectorAll('#apps tbody tr').length === %d`, n)
}

func TestBrowser_filtersSearchAndSortLiveInTheURLSoReloadAndBackRestoreTheView(t *testing.T) {
	_, ctx := openFleet(t, "", readToken, 12)

	// The counts cover every application, by sync and by health.
	counts := eval[string](t, ctx, `[...document.querySelectorAll('#counts button')].map(b => b.dataset.dim + ':' + b.dataset.value + '=' + b.querySelector('.count-n').textContent).join(' ')`)
	if want := "sync:OutOfSync=4 sync:Unknown=1 sync:Synced=7 health:Degraded=2 health:Missing=1 health:Progressing=1 health:Unknown=1 health:Suspended=1 health:Healthy=6"; counts != want {
		t.Errorf("counts = %q, want %q", counts, want)
	}
	if got := evalString(t, ctx, `document.getElementById('count').textContent`); got != "12 of 12" {
		t.Errorf("count = %q", got)
	}

	// A count is a filter: clicking Degraded shows the two Degraded ones.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#counts button[data-value="Degraded"]`)))
	waitJS(t, ctx, "the Degraded filter", rowCount(2))
	if h := evalString(t, ctx, listHashJS); h != "#/?health=Degraded" {
		t.Errorf("hash = %q, want #/?health=Degraded", h)
	}
	if got := evalString(t, ctx, rowNames); got != "edge-b,shop-web" {
		t.Errorf("Degraded rows = %q", got)
	}
	if !evalBool(t, ctx, `document.querySelector('#counts button[data-value="Degraded"]').getAttribute('aria-pressed') === 'true'`) {
		t.Error("the active count is not pressed")
	}

	// The project menu, chosen with the keyboard (All, bank, shop): bank
	// has nothing Degraded.
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#f-project`)), chromedp.KeyEvent(kb.ArrowDown))
	waitJS(t, ctx, "the project filter", rowCount(0)+` && !document.getElementById('empty').hidden`)
	if h := evalString(t, ctx, listHashJS); h != "#/?health=Degraded&project=bank" {
		t.Errorf("hash = %q", h)
	}
	if got := evalString(t, ctx, `document.getElementById('empty').textContent`); got != "No application matches the filters." {
		t.Errorf("empty list says %q", got)
	}

	// Back undoes the project, then the health filter; forward redoes one.
	run(t, ctx, chromedp.NavigateBack())
	waitJS(t, ctx, "back to the Degraded filter", rowCount(2)+` && document.getElementById('f-project').value === ''`)
	run(t, ctx, chromedp.NavigateBack())
	waitJS(t, ctx, "back to everything", rowCount(12))
	run(t, ctx, chromedp.NavigateForward())
	waitJS(t, ctx, "forward to Degraded", rowCount(2))
	run(t, ctx, chromedp.Click(chromedp.CSS(`#counts button[data-value="Degraded"]`))) // pressed again: off
	waitJS(t, ctx, "the filter off", rowCount(12))
	if h := evalString(t, ctx, listHashJS); h != "#/" {
		t.Errorf("hash after unpressing = %q", h)
	}

	// Sorting by a header's click: health puts the worst first; a second
	// click reverses it.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#apps th[data-sort="health"] button`)))
	waitJS(t, ctx, "the health sort", `document.querySelector('#apps tbody tr').dataset.name === 'edge-b'`)
	if got := evalString(t, ctx, rowNames); !strings.HasPrefix(got, "edge-b,shop-web,bank-gateway,shop-worker,shop-cache,bank-audit,") {
		t.Errorf("rows by health = %q", got)
	}
	if h := evalString(t, ctx, listHashJS); h != "#/?sort=health" {
		t.Errorf("hash = %q", h)
	}
	if got := evalString(t, ctx, `[...document.querySelectorAll('#apps th[aria-sort]')].map(th => th.dataset.sort + '=' + th.getAttribute('aria-sort')).join()`); got != "health=ascending" {
		t.Errorf("aria-sort = %q", got)
	}
	// The same header by keyboard: Enter on its focused button.
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#apps th[data-sort="health"] button`)), chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "the reversed sort", `document.querySelector('#apps th[data-sort="health"]').getAttribute('aria-sort') === 'descending'`)
	if h := evalString(t, ctx, listHashJS); h != "#/?sort=health&dir=desc" {
		t.Errorf("hash = %q", h)
	}

	// Search: "/" jumps to the box, typing narrows by name or stack.
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#apps tbody a`)))
	pressSlash(t, ctx)
	waitJS(t, ctx, "the search box focused", `document.activeElement.id === 'filter'`)
	run(t, ctx, chromedp.KeyEvent("st-edge"))
	waitJS(t, ctx, "the search", rowCount(3))
	if h := evalString(t, ctx, listHashJS); h != "#/?q=st-edge&sort=health&dir=desc" {
		t.Errorf("hash = %q", h)
	}
	if got := evalString(t, ctx, rowNames); got != "edge-a,edge-c,edge-b" {
		t.Errorf("searched rows, healthiest first = %q", got)
	}
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#f-set`)), chromedp.KeyEvent(kb.ArrowDown))
	waitJS(t, ctx, "the set filter in the URL", `location.hash.includes('set=edge')`)

	// A reload, or the link opened anew, shows the same view.
	run(t, ctx, chromedp.Reload())
	waitJS(t, ctx, "the restored view", rowCount(3)+` && document.getElementById('filter').value === 'st-edge'`)
	if got := evalString(t, ctx, rowNames); got != "edge-a,edge-c,edge-b" {
		t.Errorf("rows after reload = %q", got)
	}
	if !evalBool(t, ctx, `document.querySelector('#apps th[data-sort="health"]').getAttribute('aria-sort') === 'descending' && document.getElementById('f-set').value === 'edge'`) {
		t.Error("the sort or the set menu is not restored")
	}

	// Rows by keyboard: arrows move between row links, Enter opens one.
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#apps tbody a`)), chromedp.KeyEvent(kb.ArrowDown))
	waitJS(t, ctx, "the second row focused", `document.activeElement.closest('tr').dataset.name === 'edge-c'`)
	run(t, ctx, chromedp.KeyEvent(kb.End))
	waitJS(t, ctx, "the last row focused", `document.activeElement.closest('tr').dataset.name === 'edge-b'`)
	run(t, ctx, chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "edge-b opened", `location.hash === '#/app/edge-b' && !document.getElementById('detail').hidden`)

	// Clear filters empties the query but keeps nothing else hidden.
	run(t, ctx, chromedp.NavigateBack())
	waitJS(t, ctx, "the list again", rowCount(3))
	run(t, ctx, chromedp.Click(chromedp.CSS(`#f-clear`)))
	waitJS(t, ctx, "all rows", rowCount(12))
	if h := evalString(t, ctx, listHashJS); h != "#/?sort=health&dir=desc" {
		t.Errorf("hash after clear = %q (the sort stays)", h)
	}
}

func TestBrowser_anEventRewritesOnlyItsOwnRowAndMovesItInTheSortedList(t *testing.T) {
	f, ctx := openFleet(t, "#/?sort=health", readToken, 12)
	waitLive(t, ctx)
	// Mark every row element and every first cell.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('#apps tbody tr').forEach(r => { r.mark = r.dataset.name; r.cells[0].mark = r.dataset.name })`))

	// zeta (Healthy, last) turns Degraded: its row moves to the top.
	st := fleet()[11]
	st.Health, st.HealthMessage = application.Degraded, "main: crash looping"
	f.setStatus(st)
	f.broker.Publish(events.Event{Type: events.HealthChanged, App: "zeta", Stack: st.Stack})
	waitJS(t, ctx, "zeta's row updated", `document.querySelector('#apps tr[data-name="zeta"]').textContent.includes('crash looping')`)

	if got := evalString(t, ctx, rowNames); !strings.HasPrefix(got, "edge-b,shop-web,zeta,") {
		t.Errorf("rows by health after the event = %q, want zeta with the Degraded ones", got)
	}
	if got := evalString(t, ctx, `[...document.querySelectorAll('#apps tbody tr')].filter(r => r.mark !== r.dataset.name).map(r => r.dataset.name).join()`); got != "" {
		t.Errorf("row elements re-created: %s", got)
	}
	if got := evalString(t, ctx, `[...document.querySelectorAll('#apps tbody tr')].filter(r => r.cells[0].mark !== r.dataset.name).map(r => r.dataset.name).join()`); got != "zeta" {
		t.Errorf("rows whose cells were rebuilt = %q, want only zeta", got)
	}
	counts := evalString(t, ctx, `[...document.querySelectorAll('#counts [data-dim="health"] button')].map(b => b.dataset.value + '=' + b.querySelector('.count-n').textContent).join(' ')`)
	if !strings.Contains(counts, "Degraded=3") || !strings.Contains(counts, "Healthy=5") {
		t.Errorf("health counts after the event = %q", counts)
	}
}

// pressSlash presses "/" as a keyboard does: one keyDown carrying its text,
// so a handler that prevents the keydown also keeps the character out.
// (chromedp's KeyEvent sends the character as an event of its own.)
func pressSlash(t *testing.T, ctx context.Context) {
	t.Helper()
	down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "/", Code: "Slash", Text: "/", UnmodifiedText: "/",
		WindowsVirtualKeyCode: 191, NativeVirtualKeyCode: 191}
	up := down
	up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
	for _, p := range []input.DispatchKeyEventParams{down, up} {
		if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, p); err != nil {
			t.Fatal(err)
		}
	}
}

// pageScreenshot grows the viewport to the page's height first: rows off
// screen are not painted (content-visibility), and a full-page capture
// does not count as on screen.
func pageScreenshot(t *testing.T, ctx context.Context, name string, w int64) {
	t.Helper()
	h := eval[int64](t, ctx, `document.documentElement.scrollHeight`)
	run(t, ctx, chromedp.EmulateViewport(w, h))
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`, chromedp.EvalAwaitPromise))
	screenshot(t, ctx, name)
	run(t, ctx, chromedp.EmulateViewport(w, 900))
}

// The widths a console is used at: a phone, a laptop, a wide screen.
var widths = []int64{360, 1024, 1920}

func TestBrowser_theListLaysOutAtPhoneLaptopAndWideWidthsInLightAndDark(t *testing.T) {
	_, ctx := openFleet(t, "", readToken, 12)
	for _, scheme := range []string{"light", "dark"} {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		}); err != nil {
			t.Fatal(err)
		}
		wantBg := map[string]string{"light": "rgb(255, 255, 255)", "dark": "rgb(13, 17, 23)"}[scheme]
		wantRed := map[string]string{"light": "rgb(207, 34, 46)", "dark": "rgb(248, 81, 73)"}[scheme]
		for _, w := range widths {
			name := fmt.Sprintf("list-%d-%s", w, scheme)
			run(t, ctx, chromedp.EmulateViewport(w, 900))
			waitJS(t, ctx, name+" laid out", fmt.Sprintf(`innerWidth === %d`, w))
			if bg := evalString(t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != wantBg {
				t.Errorf("%s: background %s, want %s", name, bg, wantBg)
			}
			if c := evalString(t, ctx, `getComputedStyle(document.querySelector('#apps .health-Degraded')).color`); c != wantRed {
				t.Errorf("%s: Degraded drawn in %s, want %s", name, c, wantRed)
			}
			if sw := eval[[]int64](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); sw[0] > sw[1] {
				t.Errorf("%s: the page scrolls sideways (%dpx in %dpx)", name, sw[0], sw[1])
			}
			// A phone stacks a row's cells into a card; wider screens keep
			// each application on one line, one column per field.
			nameTop, healthTop := eval[float64](t, ctx, `document.querySelector('#apps tbody .c-name').getBoundingClientRect().top`),
				eval[float64](t, ctx, `document.querySelector('#apps tbody .c-health').getBoundingClientRect().top`)
			if stacked := healthTop > nameTop+5; stacked != (w < 720) {
				t.Errorf("%s: health cell at %.0f, name at %.0f; stacked=%v", name, healthTop, nameTop, stacked)
			}
			pageScreenshot(t, ctx, name, w)
		}
	}
}

func TestBrowser_everyListControlShowsKeyboardFocus(t *testing.T) {
	_, ctx := openFleet(t, "#/?set=edge", readToken, 3)
	// Tab from the page's start through every control up to the first row.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	seen := map[string]bool{}
	for i := 0; i < 40; i++ {
		run(t, ctx, chromedp.KeyEvent(kb.Tab))
		got := eval[[]string](t, ctx, `(e => [e.id || e.dataset.value || e.closest('th, tr')?.dataset.sort || e.closest('tr')?.dataset.name || e.textContent,
			getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth, String(e.matches(':focus-visible'))])(document.activeElement)`)
		if got[1] == "none" || got[2] == "0px" || got[3] != "true" {
			t.Errorf("control %q shows no focus: outline %s %s, focus-visible %s", got[0], got[1], got[2], got[3])
		}
		seen[got[0]] = true
		if got[0] == "edge-a" {
			break
		}
	}
	for _, want := range []string{"Synced", "Degraded", "filter", "f-swarm", "f-set", "f-clear", "name", "health", "services", "edge-a"} {
		if !seen[want] {
			t.Errorf("Tab never reached %q; reached %v", want, seen)
		}
	}
}

func TestUI_theConsoleIsServedUnderAStrictContentSecurityPolicyWithNoInlineCode(t *testing.T) {
	f := newFixture(t, false, sample()...)
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/list.js", "/ui/style.css", "/ui/list.css"} {
		resp, err := http.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self';", "style-src 'self';", "base-uri 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q allows unsafe sources", path, csp)
		}
		if path == "/ui/" {
			// Under that policy inline code would not run; the page must not
			// need any.
			for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(body), -1) {
				if !strings.Contains(tag, " src=") {
					t.Errorf("index.html has an inline script: %q", tag)
				}
			}
			for _, re := range []string{`<script[^>]*>[^<]`, `\sstyle=`, `\son[a-z]+=`, `<style`} {
				if m := regexp.MustCompile(re).FindString(string(body)); m != "" {
					t.Errorf("index.html has inline code: %q", m)
				}
			}
		}
	}
}

func TestBrowser_aScreenReaderFindsATableWithSortableHeadersAndLabelledControls(t *testing.T) {
	_, ctx := openFleet(t, "#/?sort=health", readToken, 12)
	if _, err := chromedp.Call(ctx, accessibility.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		t.Fatal(err)
	}
	str := func(v *accessibility.Value) string {
		if v == nil {
			return ""
		}
		var s string
		if json.Unmarshal([]byte(v.Value), &s) != nil {
			return string(v.Value)
		}
		return s
	}
	roles := map[string]int{}
	names := map[string][]string{}
	for _, n := range tree.Nodes {
		if n.Ignored {
			continue
		}
		role, name := str(n.Role), str(n.Name)
		roles[role]++
		names[role] = append(names[role], name)
	}
	// Whatever the CSS display, the list stays a table: a header row and
	// one row per application, eight column headers.
	if roles["row"] != 13 || roles["columnheader"] != 8 || !slices.Contains(names["table"], "Applications") {
		t.Errorf("table roles: %d rows, %d column headers, tables %q", roles["row"], roles["columnheader"], names["table"])
	}
	// The sort arrow is drawn, not read: the header's name stays its label
	// (aria-sort says the order).
	if got := strings.Join(names["columnheader"], ","); got != "Application,Stack,Swarm,Sync,Health,Revision,Services,Notes" {
		t.Errorf("column header names = %q", got)
	}
	if roles["status"] != 1 {
		t.Errorf("%d status regions, want the one count", roles["status"])
	}
	for role, want := range map[string]string{"button": "4 OutOfSync", "searchbox": "Search by name or stack", "combobox": "Project"} {
		if !slices.ContainsFunc(names[role], func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no %s named %q; %ss: %q", role, want, role, names[role])
		}
	}
}

func TestBrowser_aLongListKeepsItsOrderAndKeyboardPathAcrossRowGroups(t *testing.T) {
	var apps []application.Status
	for i := range 250 {
		h := application.Healthy
		if i%50 == 7 {
			h = application.Degraded
		}
		apps = append(apps, application.Status{Name: fmt.Sprintf("app%03d", i), Stack: fmt.Sprintf("app%03d", i), Sync: application.Synced, Health: h})
	}
	f := newFixture(t, false, apps...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/?sort=health"))
	signIn(t, ctx, readToken)
	waitJS(t, ctx, "250 rows", rowCount(250))
	waitLive(t, ctx)
	// What the page should show: Degraded first, then by name.
	order := func(apps []application.Status) string {
		s := slices.Clone(apps)
		slices.SortStableFunc(s, func(a, b application.Status) int {
			da, db := a.Health == application.Degraded, b.Health == application.Degraded
			if da != db {
				if da {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
		names := make([]string, len(s))
		for i, a := range s {
			names[i] = a.Name
		}
		return strings.Join(names, ",")
	}
	if got := evalString(t, ctx, rowNames); got != order(apps) {
		t.Fatalf("rows = %s\nwant %s", got, order(apps))
	}
	if n := eval[int64](t, ctx, `document.getElementById('apps').tBodies.length`); n < 3 {
		t.Errorf("%d row groups for 250 rows", n)
	}

	// ↓ from the last row of a group lands on the first of the next.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('apps').tBodies[0].lastElementChild.querySelector('a').focus()`))
	run(t, ctx, chromedp.KeyEvent(kb.ArrowDown))
	if !evalBool(t, ctx, `document.activeElement.closest('tr') === document.getElementById('apps').tBodies[1].firstElementChild`) {
		t.Error("ArrowDown did not cross into the next row group")
	}
	run(t, ctx, chromedp.KeyEvent(kb.ArrowUp))
	if !evalBool(t, ctx, `document.activeElement.closest('tr') === document.getElementById('apps').tBodies[0].lastElementChild`) {
		t.Error("ArrowUp did not cross back")
	}

	// An application in the last group turns Degraded: it moves to the top
	// group, every other row element stays.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('#apps tbody tr').forEach(r => { r.mark = r.dataset.name })`))
	apps[230].Health = application.Degraded
	f.setStatus(apps[230])
	f.broker.Publish(events.Event{Type: events.HealthChanged, App: "app230", Stack: "app230"})
	waitJS(t, ctx, "app230 moved up", `document.getElementById('apps').tBodies[0].querySelector('tr[data-name="app230"]') !== null`)
	if got := evalString(t, ctx, rowNames); got != order(apps) {
		t.Errorf("rows after the event = %s\nwant %s", got, order(apps))
	}
	if got := evalString(t, ctx, `[...document.querySelectorAll('#apps tbody tr')].filter(r => r.mark !== r.dataset.name).length + ''`); got != "0" {
		t.Errorf("%s row elements re-created", got)
	}
}

// An audit entry on the stream names an application but reports a request,
// not a change of it: the console does not re-read the application for it
// (the write's own events do), so an admin's console under a busy audit
// trail sends no read per entry.
func TestBrowser_anAuditEntryOnTheStreamDoesNotReReadItsApplication(t *testing.T) {
	f, ctx := openFleet(t, "#/", adminToken, 12) // audit entries go to admins only
	waitLive(t, ctx)

	// zeta changes behind the console's back, and only an audit entry
	// about zeta is published; then tools changes with its own event,
	// which the console must pick up (the stream is working).
	zeta := fleet()[11]
	zeta.HealthMessage = "re-read for an audit entry"
	f.setStatus(zeta)
	f.broker.Publish(events.Event{Type: events.AuditRecorded, App: "zeta", Stack: zeta.Stack})
	tools := fleet()[10]
	tools.Health, tools.HealthMessage = application.Degraded, "tools: crash looping"
	f.setStatus(tools)
	f.broker.Publish(events.Event{Type: events.HealthChanged, App: "tools", Stack: tools.Stack})
	waitJS(t, ctx, "tools' row updated", `document.querySelector('#apps tr[data-name="tools"]').textContent.includes('crash looping')`)
	if evalString(t, ctx, `String(document.querySelector('#apps tr[data-name="zeta"]').textContent.includes('re-read for an audit entry'))`) != "false" {
		t.Fatal("an audit entry made the console re-read its application")
	}
}

// A controller that drops requests for the list (restarting, a proxy
// cutting connections) must not leave the console on an error until
// someone reloads the page: it says so and asks again until it gets the
// list. The cut lasts three seconds rather than a number of requests:
// Chromium silently retries a request on each idle keep-alive connection
// it holds, so a count would be spent before the page sees a failure.
func TestBrowser_aListThatCannotBeFetchedIsAskedForAgain(t *testing.T) {
	var mu sync.Mutex
	var cutUntil time.Time // from the sign-in on: the page asks once before it
	h := api.New(api.Options{
		Controller: apitest.NewController(fleet()...), Events: events.NewBroker(events.BrokerOptions{}),
		UI: web.Handler(), Logger: slog.New(slog.DiscardHandler), Policy: access.NewPolicy(fleetProjects),
		Tokens: api.Tokens{{Name: "viewer", Role: access.Viewer, Secret: readToken}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		drop := r.URL.Path == "/api/v1/applications" && time.Now().Before(cutUntil)
		mu.Unlock()
		if drop {
			c, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			c.Close() // no answer at all: the page's fetch fails
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })

	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"))
	waitJS(t, ctx, "the token form", `!document.getElementById('login').hidden`)
	mu.Lock()
	cutUntil = time.Now().Add(3 * time.Second)
	mu.Unlock()
	signIn(t, ctx, readToken)
	waitJS(t, ctx, "the error with the retry", `document.getElementById('error').textContent.includes('Trying again')`)
	// The page asks again after 2 s, then 4 s more: past waitJS's ten
	// seconds on a slow machine.
	deadline := time.Now().Add(40 * time.Second)
	for !evalBool(t, ctx, rowCount(12)) {
		if time.Now().After(deadline) {
			t.Fatalf("the list never came: %s", evalString(t, ctx, `document.body.innerText`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !evalBool(t, ctx, `document.getElementById('error').hidden`) {
		t.Errorf("the error stays after the list came: %q", evalString(t, ctx, `document.getElementById('error').textContent`))
	}
	waitLive(t, ctx)
}
