package web_test

import (
	"context"
	"fmt"
	"github.com/moby/moby/client"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestBrowser_theResourceTreeShowsTasksWithTheReasonOnTheUnhealthyOne(t *testing.T) {
	apps := sample()
	now := time.Now()
	apps[1].Services[0].Tasks = []application.TaskStatus{
		{ID: "failedtask0123456789", Slot: 1, Node: "node0123456789abc", State: "failed", DesiredState: "shutdown",
			Error: "task: non-zero exit (1)", Since: now.Add(-3 * time.Minute)},
	}
	apps[1].Services[1].Tasks = []application.TaskStatus{
		{ID: "dbtask0123456789", Slot: 1, Node: "node0123456789abc", NodeName: "edge-7", State: "running", DesiredState: "running",
			Health: "healthy", Since: now.Add(-2 * time.Hour), Restarts: 4, RestartsFull: true},
	}
	apps[1].Services[1].Networks = []string{"drifty_back"}
	apps[1].Services[1].Secrets = []string{"drifty_db_password"}
	apps[1].Services[1].Volumes = []string{"/var/lib/host", "drifty_data"}
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
	// The node by hostname; four earlier tasks at Swarm's retention limit
	// may have been more.
	for _, want := range []string{"on edge-7", "restarts: \u22654"} {
		if !evalBool(t, ctx, db+`.textContent.includes('`+want+`')`) {
			t.Errorf("db's task lacks %q: %s", want, evalString(t, ctx, db+`.textContent`))
		}
	}
	if got := evalString(t, ctx, `[...`+db+`.querySelectorAll('.tree-use')].map(l => l.textContent).join(',')`); got != "network drifty_back,secret drifty_db_password,volume drifty_data,mount /var/lib/host" {
		t.Errorf("db uses %q", got)
	}
	screenshot(t, ctx, "tree")
}

// Against the real controller and swarm: a service that keeps exiting shows
// its restart count and its node by hostname, and a service's named volume
// is in the tree.
func TestBrowser_theTreeOfALiveStackShowsVolumesHostnamesAndRestartCounts(t *testing.T) {
	l := newLive(t)
	l.repo.Commit("tree", map[string]string{"deploy/docker-compose.yml": `version: "3.8"
services:
  store:
    image: flotilla-test/app:1
    volumes: [data:/data]
    deploy: {replicas: 0}
  crash:
    image: flotilla-test/app:1
    command: ["exit", "3"]
    stop_grace_period: 1s
    deploy:
      restart_policy: {condition: on-failure, delay: 1s}
volumes:
  data: {}
`})
	l.sync()
	host, err := swarmtest.Client(t).Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Health is read on each pass; a refresh asks for one now.
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		if err := l.ctl.Refresh(l.app); err != nil {
			return false, err.Error()
		}
		time.Sleep(time.Second)
		st, _ := l.ctl.Status(l.app)
		for _, s := range st.Services {
			for _, ts := range s.Tasks {
				if s.Name == "crash" && ts.Restarts >= 2 {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("services %+v", st.Services)
	})

	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(l.url+"/ui/#/app/"+l.app))
	signIn(t, ctx, adminToken)
	waitJSFor(t, ctx, time.Minute, "the tree", `!!document.querySelector('#tree .tree-service')`)
	crash := `[...document.querySelectorAll('#tree .tree-service details')].find(d => d.querySelector('summary').textContent.includes('crash'))`
	store := `[...document.querySelectorAll('#tree .tree-service details')].find(d => d.querySelector('summary').textContent.includes('store'))`
	run(t, ctx, chromedp.Click(`//ul[@id="tree"]//li[@class="tree-service"]//summary[contains(., "store")]`))
	if !evalBool(t, ctx, crash+`.open`) {
		run(t, ctx, chromedp.Click(`//ul[@id="tree"]//li[@class="tree-service"]//summary[contains(., "crash")]`))
	}
	waitJS(t, ctx, "a restart count", crash+`.textContent.includes('restarts: ')`)
	text := evalString(t, ctx, crash+`.textContent`)
	if !strings.Contains(text, "on "+host.Info.Name) {
		t.Errorf("the crash task is not shown on node %q: %s", host.Info.Name, text)
	}
	if got := evalString(t, ctx, `[...`+store+`.querySelectorAll('.tree-use')].map(l => l.textContent).join(',')`); !strings.Contains(got, "volume "+l.app+"_data") {
		t.Errorf("store uses %q, want volume %s_data", got, l.app)
	}
	screenshot(t, ctx, "tree-live")
}
