package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/api"
)

func TestBrowser_theLogsPanelFollowsOneServiceUntilStopped(t *testing.T) {
	f := newFixture(t, false, sample()...)
	f.ctl.LogLines = []api.LogLine{
		{Service: "web", Task: "task0123456789abcdef", Time: "2026-12-01T12:00:00.5Z", Text: "web: listening"},
		{Service: "db", Task: "taskdb", Text: "db: ready"},
	}
	f.ctl.LogFeed = make(chan api.LogLine)
	f.ctl.LogsEnded = make(chan struct{}, 4)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 3`)
	run(t, ctx, chromedp.Click(`//table[@id="apps"]//a[text()="drifty"]`))
	waitJS(t, ctx, "the logs panel with drifty's services",
		`[...document.querySelectorAll('#log-service option')].map(o => o.value).join(',') === ',web,db' && document.getElementById('detail').textContent.includes('No releases recorded.')`)

	run(t, ctx,
		chromedp.SetValue(chromedp.CSS(`#log-service`), "web"),
		chromedp.Click(chromedp.CSS(`#log-follow`)),
		chromedp.Click(chromedp.CSS(`#log-timestamps`)),
		chromedp.Click(chromedp.CSS(`#log-start`)))
	waitJS(t, ctx, "web's line with its time and task", `document.getElementById('log-output').textContent.includes('2026-12-01T12:00:00.5Z web.task01234567 web: listening')`)
	if evalBool(t, ctx, `document.getElementById('log-output').textContent.includes('db: ready')`) {
		t.Error("the panel shows db's line with only web chosen")
	}
	// A line the service writes later arrives while the panel follows,
	// even across the re-render every event causes.
	f.ctl.LogFeed <- api.LogLine{Service: "web", Task: "task0123456789abcdef", Text: "web: GET / 200"}
	waitJS(t, ctx, "the followed line", `document.getElementById('log-output').textContent.includes('web: GET / 200')`)
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`route()`))
	f.ctl.LogFeed <- api.LogLine{Service: "web", Task: "task0123456789abcdef", Text: "web: GET /health 200"}
	waitJS(t, ctx, "a line after a re-render", `document.getElementById('log-output').textContent.includes('web: GET /health 200')`)
	if !evalBool(t, ctx, `document.getElementById('log-start').disabled && !document.getElementById('log-stop').disabled`) {
		t.Error("while following, Show logs should be disabled and Stop enabled")
	}
	screenshot(t, ctx, "logs")

	run(t, ctx, chromedp.Click(chromedp.CSS(`#log-stop`)))
	select {
	case <-f.ctl.LogsEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still follows 10s after Stop")
	}
	waitJS(t, ctx, "stopped", `document.getElementById('log-status').textContent === 'stopped' && !document.getElementById('log-start').disabled`)
}

func TestBrowser_aViewerIsToldLogsNeedAnOperator(t *testing.T) {
	f := newFixture(t, false, sample()...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/drifty"))
	signIn(t, ctx, readToken)
	// Once the full status and history are in, the page stops re-rendering.
	waitJS(t, ctx, "the logs panel with drifty's services",
		`[...document.querySelectorAll('#log-service option')].map(o => o.value).join(',') === ',web,db' && document.getElementById('detail').textContent.includes('No releases recorded.')`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#log-start`)))
	waitJS(t, ctx, "the 403's message", `document.getElementById('log-status').textContent.startsWith('Logs unavailable: token "viewer" has role viewer')`)
}
