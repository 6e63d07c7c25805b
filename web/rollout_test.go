package web_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// rolloutApp is an application with two rollouts: web's canary on step 1 at
// 50%, and api's, aborted by its analysis, whose reason is given.
func rolloutApp(reason string) (application.Status, []application.RolloutStatus) {
	st := application.Status{
		Name: "canaried", Stack: "canaried", Sync: application.Synced, Health: application.Healthy,
		Services: []application.ServiceStatus{
			{Name: "web", Health: application.Healthy, Running: 4, Desired: 4},
			{Name: "api", Health: application.Healthy, Running: 2, Desired: 2},
		},
	}
	rs := []application.RolloutStatus{
		{Service: "web", Colour: "web-canary", Strategy: "canary", Revision: strings.Repeat("e", 40), Phase: "Progressing",
			Step: 1, Steps: []int{20, 50, 100}, Weight: 50, Replicas: 2, Verdict: "Pass", Reason: "step 1 (weight 50%) for 5m0s",
			NextCheck: time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)},
		{Service: "api", Colour: "api-canary", Strategy: "canary", Phase: "Aborted", Step: 0, Weight: 0, Replicas: 0,
			Verdict: "Fail", Metric: "errorRatio", Values: "0.31 > 0.05", Reason: reason, Pending: "retry"},
	}
	return st, rs
}

func newRolloutFixture(t *testing.T, reason string) *fixture {
	t.Helper()
	st, rs := rolloutApp(reason)
	f := newFixture(t, false, append(sample(), st)...)
	f.ctl.SetRollouts(st.Name, rs)
	return f
}

// openRollouts signs in on canaried's page and waits for its panel.
func openRollouts(t *testing.T, f *fixture, token string) context.Context {
	t.Helper()
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/#/app/canaried"))
	signIn(t, ctx, token)
	waitJS(t, ctx, "the rollouts panel", `document.querySelectorAll('#rollouts article.rollout').length === 2`)
	return ctx
}

const (
	webCard = `document.querySelector('#rollouts article[data-service="web"]')`
	apiCard = `document.querySelector('#rollouts article[data-service="api"]')`
)

func TestBrowser_theRolloutsPanelShowsTheCanarysStepAndSplitAndTheAbortedOnesEvidence(t *testing.T) {
	f := newRolloutFixture(t, "analysis failed: error ratio over the limit")
	ctx := openRollouts(t, f, adminToken)

	web := evalString(t, ctx, webCard+`.textContent`)
	for _, want := range []string{"web", "canary", "Progressing", "step 1", "at 50%", "web (stable) 50%", "web-canary (canary) 50%",
		"Replicas2", "eeeeeee", "Pass", "step 1 (weight 50%) for 5m0s"} {
		if !strings.Contains(web, want) {
			t.Errorf("web's rollout lacks %q: %s", want, web)
		}
	}
	if got := evalString(t, ctx, webCard+`.querySelector('.rollout-steps').textContent + ' current ' + `+webCard+`.querySelector('.rollout-steps li[aria-current=step]').textContent`); got != "20%50%100% current 50%" {
		t.Errorf("web's declared steps: %q, want 20%%, 50%%, 100%% with 50%% current", got)
	}
	if got := evalString(t, ctx, webCard+`.querySelector('.weight-bar').getAttribute('aria-label')`); got != "Traffic: web (stable) 50%, web-canary (canary) 50%" {
		t.Errorf("the bar says %q", got)
	}
	if got := evalString(t, ctx, `[...`+webCard+`.querySelectorAll('.weight-bar .seg')].map(s => s.style.width).join(' ')`); got != "50% 50%" {
		t.Errorf("the bar's segments are %q wide, want 50%% 50%%", got)
	}
	if got := evalString(t, ctx, apiCard+`.querySelector('.rollout-pending')?.textContent ?? 'none'`); got != "retry pending" {
		t.Errorf("api's pending command shows as %q, want \"retry pending\"", got)
	}
	if evalBool(t, ctx, webCard+`.querySelector('.rollout-pending') !== null`) {
		t.Error("web, with no command waiting, shows one pending")
	}
	if evalBool(t, ctx, webCard+`.classList.contains('aborted')`) || !evalBool(t, ctx, apiCard+`.classList.contains('aborted')`) {
		t.Error("only api's rollout should be marked aborted")
	}
	abort := evalString(t, ctx, apiCard+`.querySelector('.rollout-abort').textContent`)
	for _, want := range []string{"Aborted: analysis failed: error ratio over the limit", "errorRatio", "0.31 > 0.05"} {
		if !strings.Contains(abort, want) {
			t.Errorf("api's abort note lacks %q: %s", want, abort)
		}
	}
	// The buttons come with the application's own answer (whether the
	// caller may operate it), which can follow the panel.
	waitJS(t, ctx, "the rollout commands", apiCard+`.querySelectorAll('button.rollout-cmd').length > 0`)
	if got := evalString(t, ctx, `[...`+webCard+`.querySelectorAll('button.rollout-cmd')].map(b => b.dataset.command).join(' ')`); got != "promote abort pause" {
		t.Errorf("web's commands = %q, want promote abort pause", got)
	}
	if got := evalString(t, ctx, `[...`+apiCard+`.querySelectorAll('button.rollout-cmd')].map(b => b.dataset.command).join(' ')`); got != "promote retry" {
		t.Errorf("api's commands = %q, want promote retry", got)
	}
	text := evalString(t, ctx, `document.getElementById('rollouts').textContent`)
	for _, leak := range []string{"null", "undefined", "NaN", "[object"} {
		if strings.Contains(text, leak) {
			t.Errorf("the panel shows %q: %s", leak, text)
		}
	}
	shots(t, ctx, "rollouts", "#rollouts")

	// An application without rollouts has no panel.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/app/billing'`))
	waitJS(t, ctx, "billing's page", `document.querySelector('#detail h2')?.textContent.startsWith('billing')`)
	if evalBool(t, ctx, `document.getElementById('rollouts')`) {
		t.Error("billing, without rollouts, shows a rollouts panel")
	}
}

func TestBrowser_anOperatorAbortsARolloutAfterConfirmingAndThePanelFollowsTheEvent(t *testing.T) {
	f := newRolloutFixture(t, "analysis failed")
	ctx := openRollouts(t, f, adminToken)
	waitLive(t, ctx)

	// Cancel first: nothing is sent.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#rollouts article[data-service="web"] button[data-command="abort"]`)))
	waitJS(t, ctx, "the confirmation", `document.getElementById('rollout-dialog')?.open`)
	if got := evalString(t, ctx, `document.getElementById('rollout-desc').textContent`); !strings.Contains(got, "All traffic goes back to the stable service") {
		t.Errorf("the dialog says %q", got)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#rollout-cancel`)))
	waitJS(t, ctx, "the dialog to close", `!document.getElementById('rollout-dialog')`)
	if c := f.ctl.Commands(); len(c) != 0 {
		t.Fatalf("commands after cancel: %q", c)
	}

	run(t, ctx, chromedp.Click(chromedp.CSS(`#rollouts article[data-service="web"] button[data-command="abort"]`)))
	waitJS(t, ctx, "the confirmation", `document.getElementById('rollout-dialog')?.open`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#rollout-confirm`)))
	waitJS(t, ctx, "the answer", webCard+`.querySelector('.rollout-result')?.textContent.startsWith('Abort: Queued')`)
	// Two rollouts: the API takes the command only with the service named.
	if got := f.ctl.Commands(); !slices.Equal(got, []string{"canaried/web abort"}) {
		t.Fatalf("commands = %q, want canaried/web abort", got)
	}

	// The next pass aborts web and publishes its step.
	_, rs := rolloutApp("analysis failed")
	rs[0].Phase, rs[0].Weight, rs[0].Replicas, rs[0].Reason = "Aborted", 0, 0, "aborted by admin: <b>no</b>"
	f.ctl.SetRollouts("canaried", rs)
	f.broker.Publish(events.Event{Type: events.RolloutStep, App: "canaried", Service: "web", Message: rs[0].Reason})
	waitJS(t, ctx, "web to show Aborted", webCard+`.classList.contains('aborted')`)
	if got := evalString(t, ctx, webCard+`.querySelector('.rollout-abort').textContent`); !strings.Contains(got, "Aborted: aborted by admin: <b>no</b>") {
		t.Errorf("web's abort note = %q", got)
	}
	if got := evalString(t, ctx, webCard+`.querySelector('.weight-bar').getAttribute('aria-label')`); got != "Traffic: web (stable) 100%, web-canary (canary) 0%" {
		t.Errorf("after the abort the bar says %q", got)
	}
	if got := evalString(t, ctx, `[...`+webCard+`.querySelectorAll('button.rollout-cmd')].map(b => b.dataset.command).join(' ')`); got != "promote retry" {
		t.Errorf("an aborted rollout offers %q, want promote retry", got)
	}
	assertNoMarkup(t, ctx)
	shots(t, ctx, "rollouts-aborted", "#rollouts")
}

func TestBrowser_aViewerSeesTheRolloutsButNoCommands(t *testing.T) {
	f := newRolloutFixture(t, "analysis failed")
	ctx := openRollouts(t, f, readToken)
	// The buttons wait for the application's own answer, which says what the caller may do.
	waitJS(t, ctx, "the application's answer", `state.operate.has('canaried')`)
	if n := evalString(t, ctx, `String(document.querySelectorAll('#rollouts button').length)`); n != "0" {
		t.Errorf("a viewer sees %s rollout buttons", n)
	}
	if !strings.Contains(evalString(t, ctx, webCard+`.textContent`), "step 1") {
		t.Error("a viewer does not see web's step")
	}
}

func TestBrowser_aRolloutReasonMetricAndValuesLikeMarkupRenderAsText(t *testing.T) {
	const evil = `<script>window.alerted = true</script><img src=x onerror="window.alerted = true">`
	st, rs := rolloutApp(evil)
	rs[1].Metric, rs[1].Values = `<img src=y onerror=alert(2)>`, `<svg onload=alert(3)>`
	rs[0].Reason, rs[0].Error = `<b>bold</b>`, `<i onmouseover=alert(4)>x</i>`
	f := newFixture(t, false, append(sample(), st)...)
	f.ctl.SetRollouts(st.Name, rs)
	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(f.url+"/ui/"))
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.alert = () => { window.alerted = true }`))
	signIn(t, ctx, adminToken)
	waitJS(t, ctx, "the list", `document.querySelectorAll('#apps tbody tr').length === 4`)
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/app/canaried'`))
	waitJS(t, ctx, "the rollouts panel", `document.querySelectorAll('#rollouts article.rollout').length === 2`)

	abort := evalString(t, ctx, apiCard+`.querySelector('.rollout-abort').textContent`)
	for _, want := range []string{evil, `<img src=y onerror=alert(2)>`, `<svg onload=alert(3)>`} {
		if !strings.Contains(abort, want) {
			t.Errorf("api's abort note lacks %q as text: %s", want, abort)
		}
	}
	web := evalString(t, ctx, webCard+`.textContent`)
	for _, want := range []string{`<b>bold</b>`, `<i onmouseover=alert(4)>x</i>`} {
		if !strings.Contains(web, want) {
			t.Errorf("web's rollout lacks %q as text: %s", want, web)
		}
	}
	assertNoMarkup(t, ctx)
}
