package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/application"
)

func TestBrowser_aGeneratedApplicationShowsItsSetAndAHeldOneWhatHoldsIt(t *testing.T) {
	apps := []application.Status{
		{Name: "api", Stack: "api", Sync: application.OutOfSync, SyncReason: application.ReasonGit, Health: application.Healthy,
			Waiting: "waiting for platform (Synced, Progressing)"},
		{Name: "web-pr-7", Stack: "web-pr-7", Set: "previews", Sync: application.Synced, Health: application.Healthy},
	}
	f := newFixture(t, false, apps...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/"))
	waitJS(t, ctx, "the token form", `!document.getElementById('login').hidden`)
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "two rows", `document.querySelectorAll('#apps tbody tr').length === 2`)
	rows := rowTexts(t, ctx)
	if !strings.Contains(rows[0], "Held: waiting for platform") {
		t.Errorf("held row = %q", rows[0])
	}
	if !strings.Contains(rows[1], "set previews") || strings.Contains(rows[0], "set ") {
		t.Errorf("rows = %q, want only web-pr-7 labelled with its set", rows)
	}
	run(t, ctx, chromedp.SendKeys(chromedp.ID("filter"), "previews"))
	waitJS(t, ctx, "the filter to keep the set's application", `document.querySelectorAll('#apps tbody tr').length === 1`)
}
