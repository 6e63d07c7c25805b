package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// imagedApp is an application whose image automation last ran with four
// marked fields: one updated (and committed), one current, one held
// because the newest tag is older than git's, one that failed.
func imagedApp() (application.Status, *application.ImageStatus) {
	st := application.Status{
		Name: "imaged", Stack: "imaged", Sync: application.Synced, Health: application.Healthy,
		Services: []application.ServiceStatus{{Name: "web", Health: application.Healthy, Running: 1, Desired: 1}},
	}
	im := &application.ImageStatus{
		LastRun:        time.Date(2026, 12, 7, 1, 20, 0, 0, time.UTC),
		LastCommit:     "9b1f" + strings.Repeat("a", 36),
		LastCommitTime: time.Date(2026, 12, 7, 1, 19, 0, 0, time.UTC),
		Fields: []application.ImageField{
			{Image: "registry.example.com/shop/web", File: "compose.yaml", Field: "services.web.image",
				Current: "registry.example.com/shop/web:1.4.2", Newest: "1.4.2", Outcome: "update"},
			{Image: "nginx", File: "compose.yaml", Field: "services.proxy.image",
				Current: "nginx:stable@sha256:" + strings.Repeat("0", 64), Newest: "sha256:" + strings.Repeat("0", 64), Outcome: "current"},
			{Image: "registry.example.com/shop/api", File: "values-eu.yaml", Field: "api.image.tag",
				Current: "2.0.0", Newest: "1.9.0", Outcome: "backwards", Reason: "2.0.0 is newer than anything the policy chooses (1.9.0)"},
			{Image: "registry.example.com/shop/worker", File: "compose.yaml", Field: "services.worker.image",
				Outcome: "error", Reason: "list tags of registry.example.com/shop/worker: 401 Unauthorized"},
		},
	}
	return st, im
}

func newImagesFixture(t *testing.T) *fixture {
	t.Helper()
	st, im := imagedApp()
	f := newFixture(t, false, append(sample(), st)...)
	f.ctl.SetImages(st.Name, im)
	return f
}

// openImages signs in on imaged's page and waits for its panel.
func openImages(t *testing.T, f *fixture, token string) context.Context {
	t.Helper()
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/imaged"))
	signIn(t, ctx, token)
	waitJS(t, ctx, "the images panel", `document.querySelectorAll('#images tbody tr').length > 0`)
	return ctx
}

func TestBrowser_theImagesPanelShowsEachFieldItsNewestTagOutcomeAndTheLastCommit(t *testing.T) {
	f := newImagesFixture(t)
	// A viewer reads the panel: it holds nothing a read token may not see.
	ctx := openImages(t, f, readToken)

	rows := tableRows(t, ctx, "#images table")
	zeros := strings.Repeat("0", 64)
	want := []string{
		"registry.example.com/shop/webcompose.yaml services.web.image|registry.example.com/shop/web:1.4.2|1.4.2|update|",
		// A digest shows by its first 12 digits, the whole reference in its title.
		"nginxcompose.yaml services.proxy.image|nginx:stable@sha256:000000000000…|sha256:000000000000…|current|",
		"registry.example.com/shop/apivalues-eu.yaml api.image.tag|2.0.0|1.9.0|held backwards|2.0.0 is newer than anything the policy chooses (1.9.0)",
		"registry.example.com/shop/workercompose.yaml services.worker.image|—|—|error|list tags of registry.example.com/shop/worker: 401 Unauthorized",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("the images table reads\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if got := evalString(t, ctx, `document.querySelector('#images tr[data-outcome=current] td:nth-child(2) code').title`); got != "nginx:stable@sha256:"+zeros {
		t.Errorf("the shortened digest's title is %q, want the whole reference", got)
	}
	if got := evalString(t, ctx, `[...document.querySelectorAll('#images tr.held')].map(r => r.dataset.outcome).join(' ')`); got != "backwards error" {
		t.Errorf("rows marked held: %q, want backwards error", got)
	}
	meta := evalString(t, ctx, `document.querySelector('#images .images-meta').textContent`)
	for _, s := range []string{"Last commit9b1faaa", "4 marked, 2 held back"} {
		if !strings.Contains(meta, s) {
			t.Errorf("the panel's summary lacks %q: %s", s, meta)
		}
	}
	if got := evalString(t, ctx, `document.querySelector('#images .images-commit').title`); got != "9b1f"+strings.Repeat("a", 36) {
		t.Errorf("the commit's title is %q, want the full sha", got)
	}
	if got := evalString(t, ctx, `document.querySelector('#images dd time').getAttribute('datetime')`); got != "2026-12-07T01:20:00Z" {
		t.Errorf("the last run's time is %q", got)
	}
	if evalBool(t, ctx, `document.querySelector('#images .images-error')`) {
		t.Error("a run without an error shows one")
	}
	text := evalString(t, ctx, `document.getElementById('images').textContent`)
	for _, leak := range []string{"null", "undefined", "NaN", "[object"} {
		if strings.Contains(text, leak) {
			t.Errorf("the panel shows %q: %s", leak, text)
		}
	}
	shots(t, ctx, "images", "#images")

	// An application without image updates has no panel.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/app/billing'`))
	waitJS(t, ctx, "billing's page", `document.querySelector('#detail h2')?.textContent.startsWith('billing')`)
	if evalBool(t, ctx, `document.getElementById('images')`) {
		t.Error("billing, without image updates, shows an images panel")
	}
}

func TestBrowser_theImagesPanelFollowsImageEvents(t *testing.T) {
	f := newImagesFixture(t)
	ctx := openImages(t, f, adminToken)
	waitLive(t, ctx)

	// The next run commits api's tag and finds web's tag vanished; the
	// status changes without an event, so the page cannot know yet.
	st, im := imagedApp()
	im.LastCommit, im.LastCommitTime = "c0ffee"+strings.Repeat("1", 34), im.LastCommitTime.Add(time.Hour)
	im.Fields[0].Outcome, im.Fields[0].Newest, im.Fields[0].Reason = "vanished", "", "tag 1.4.2 is no longer in the registry"
	im.Fields[2].Outcome, im.Fields[2].Current, im.Fields[2].Newest, im.Fields[2].Reason = "update", "2.1.0", "2.1.0", ""
	st.Images = im
	f.setStatus(st)
	f.broker.Publish(events.Event{Type: events.ImageCommitted, App: "imaged", Revision: im.LastCommit,
		Message: "images: update registry.example.com/shop/api 2.1.0"})
	waitJS(t, ctx, "the new commit", `document.querySelector('#images .images-commit')?.textContent === 'c0ffee1'`)
	if got := evalString(t, ctx, `[...document.querySelectorAll('#images tbody tr')].map(r => r.dataset.outcome).join(' ')`); got != "vanished current update error" {
		t.Errorf("outcomes after the commit: %q", got)
	}
	// The timeline lists the commit's event with its subject.
	waitJS(t, ctx, "the commit in the timeline", `[...document.querySelectorAll('li.tl-event')].some(li => li.textContent.includes('image.committed') && li.textContent.includes('images: update registry.example.com/shop/api 2.1.0'))`)

	// A failed run: the error shows, then a held field's event brings its reason.
	im.LastError = "push to https://git.example.com/ops/shop.git: rejected"
	im.Fields[3].Outcome, im.Fields[3].Reason = "no-candidate", "no tag matches >=3"
	f.setStatus(st)
	f.broker.Publish(events.Event{Type: events.ImageHeld, App: "imaged", Message: "no tag matches >=3",
		Data: map[string]any{"image": "registry.example.com/shop/worker", "outcome": "no-candidate"}})
	waitJS(t, ctx, "the run's error", `document.querySelector('#images .images-error')?.textContent.includes('rejected')`)
	if got := evalString(t, ctx, `document.querySelector('#images tr[data-outcome="no-candidate"]')?.textContent ?? ''`); !strings.Contains(got, "held no candidate") || !strings.Contains(got, "no tag matches >=3") {
		t.Errorf("worker's row = %q", got)
	}

	// Image automation taken out of the applications file: the panel goes.
	st.Images = nil
	f.setStatus(st)
	f.broker.Publish(events.Event{Type: events.ImageHeld, App: "imaged"})
	waitJS(t, ctx, "the panel to go", `!document.getElementById('images')`)
}

func TestBrowser_aTagReasonOrErrorLikeMarkupRendersAsText(t *testing.T) {
	st, im := imagedApp()
	im.LastError = `<script>window.alerted = true</script>`
	im.Fields[0].Newest = `<img src=x onerror="window.alerted = true">`
	im.Fields[1].Current = `<svg onload=alert(2)>`
	im.Fields[2].Reason = `<b>bold</b>`
	im.Fields[3].Image, im.Fields[3].Field = `<i onmouseover=alert(3)>x</i>`, `<img src=y>`
	im.LastCommit = `<b>c</b>`
	// The pull request's address comes from the forge: never a link
	// unless it is http(s).
	im.PullRequest = &application.ImagePullRequestStatus{Number: 7, URL: "javascript:window.alerted=true", Branch: "<b>b</b>", Base: "main"}
	f := newFixture(t, false, append(sample(), st)...)
	f.ctl.SetImages(st.Name, im)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"))
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.alert = () => { window.alerted = true }`))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 4`)
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/app/imaged'`))
	waitJS(t, ctx, "the images panel", `document.querySelectorAll('#images tbody tr').length === 4`)

	text := evalString(t, ctx, `document.getElementById('images').textContent`)
	for _, s := range []string{im.LastError, im.Fields[0].Newest, im.Fields[1].Current, im.Fields[2].Reason, im.Fields[3].Image, im.Fields[3].Field, im.LastCommit} {
		if !strings.Contains(text, s) {
			t.Errorf("the panel lacks %q as text: %s", s, text)
		}
	}
	assertNoMarkup(t, ctx)
	if evalBool(t, ctx, `document.querySelector('#images a.images-pr') !== null`) || !strings.Contains(text, "#7") {
		t.Errorf("a javascript: pull request address became a link, or the number is missing: %s", text)
	}
}

func TestBrowser_theImagesPanelLinksThePullRequestTheUpdatesAreProposedIn(t *testing.T) {
	st, im := imagedApp()
	im.PullRequest = &application.ImagePullRequestStatus{Number: 42, URL: "https://git.example.com/ops/shop/pulls/42", Branch: "flotilla/images/shop", Base: "main"}
	f := newFixture(t, false, append(sample(), st)...)
	f.ctl.SetImages(st.Name, im)
	ctx := openImages(t, f, readToken)
	if got := evalString(t, ctx, `(a => a ? a.textContent + ' ' + a.href : 'none')(document.querySelector('#images a.images-pr'))`); got != "#42 https://git.example.com/ops/shop/pulls/42" {
		t.Errorf("the pull request link is %q", got)
	}
	if meta := evalString(t, ctx, `document.querySelector('#images .images-meta').textContent`); !strings.Contains(meta, "flotilla/images/shop into main") {
		t.Errorf("the summary does not name the branches: %s", meta)
	}
}
