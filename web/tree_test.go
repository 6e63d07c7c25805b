package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/application"
)

func TestBrowser_theResourceTreeShowsTasksWithTheReasonOnTheUnhealthyOne(t *testing.T) {
	apps := sample()
	now := time.Now()
	apps[1].Services[0].Tasks = []application.TaskStatus{
		{ID: "failedtask0123456789", Slot: 1, Node: "node0123456789abc", State: "failed", DesiredState: "shutdown",
			Error: "task: non-zero exit (1)", Since: now.Add(-3 * time.Minute)},
	}
	apps[1].Services[1].Tasks = []application.TaskStatus{
		{ID: "dbtask0123456789", Slot: 1, Node: "node0123456789abc", State: "running", DesiredState: "running",
			Health: "healthy", Since: now.Add(-2 * time.Hour)},
	}
	apps[1].Services[1].Networks = []string{"drifty_back"}
	apps[1].Services[1].Secrets = []string{"drifty_db_password"}
	f := newFixture(t, false, apps...)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/drifty"))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "the tree and the history", `!!document.querySelector('#tree .tree-service') && document.getElementById('detail').textContent.includes('No releases recorded.')`)

	text := evalString(t, ctx, `document.getElementById('tree').innerText`)
	for _, want := range []string{"stack drifty", "Degraded", "web", "0/2", "task exited (1)", "failedtask01", "slot 1", "failed",
		"→ shutdown", "on node01234567", "3m", "task: non-zero exit (1)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the tree lacks %q:\n%s", want, text)
		}
	}
	if !evalBool(t, ctx, `document.querySelector('.tree-task.unhealthy') !== null`) {
		t.Error("the failed task is not marked unhealthy")
	}
	// The healthy service starts closed; a click opens it.
	db := `[...document.querySelectorAll('#tree .tree-service details')].find(d => d.querySelector('summary').textContent.includes('db'))`
	if evalBool(t, ctx, db+`.open`) {
		t.Error("the healthy db service starts open")
	}
	run(t, ctx, chromedp.Click(`//ul[@id="tree"]//li[@class="tree-service"]//summary[contains(., "db")]`))
	waitJS(t, ctx, "db's task after a click", db+`.open && `+db+`.textContent.includes('running') && `+db+`.textContent.includes('(healthy)')`)
	if got := evalString(t, ctx, `[...`+db+`.querySelectorAll('.tree-use')].map(l => l.textContent).join(',')`); got != "network drifty_back,secret drifty_db_password" {
		t.Errorf("db uses %q", got)
	}
	screenshot(t, ctx, "tree")
}
