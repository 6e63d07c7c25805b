package reconcile

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// canaryChart is a chart in git whose web service is released by a canary:
// its image tag and its steps' weights come from values.yaml, so the
// rollout is declared by the template and sized by a value.
func canaryChart(tag string, weights ...int) map[string]string {
	values := "tag: \"" + tag + "\"\nweights:\n"
	for _, w := range weights {
		values += "  - " + strconv.Itoa(w) + "\n"
	}
	return map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
		"chart/values.yaml": values,
		"chart/templates/web.yaml": `version: "3.8"
services:
  web:
    image: example/web:{{ .Values.tag }}
    deploy:
      replicas: 4
    x-flotilla:
      rollout:
        strategy: canary
        steps:
{{- range .Values.weights }}
          - {weight: {{ . }}, pause: 1m}
{{- end }}
  worker:
    image: example/worker:1
`,
	}
}

// A chart renders compose, x-flotilla included: a rollout declared by a
// template, with its weights from values.yaml, is driven exactly as one
// written in a compose file.
func TestAChartsTemplateDeclaresACanaryDrivenByItsValues(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, canaryChart("1", 20, 60))
	clk := &testClock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	app := testApp("shop", true)
	app.Source.Path = "chart"
	app.Source.Chart = &application.Chart{}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Clock: clk.Now}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}

	res := reconcileOK(t, c)
	if res.Action != charts.Install {
		t.Fatalf("first pass: %s, want install", res.Action)
	}
	if _, ok := liveService(t, b, "web-canary"); ok {
		t.Fatal("the chart's install created a canary")
	}

	// A values change: a new image tag starts the canary at step 0 with the
	// stable service untouched.
	f.commit(t, canaryChart("2", 20, 60))
	res = reconcileOK(t, c)
	st, web, canary, n := rolloutState(t, b)
	if st.Phase != rollout.Progressing || st.Step != 0 || st.Weight != 0 {
		t.Fatalf("after the values change: state %+v, want Progressing step 0 weight 0", st)
	}
	if web != "example/web:1" || canary != "example/web:2" || n != 1 {
		t.Fatalf("after the values change: web %s, canary %s at %d replicas; want web:1, web:2 at 1", web, canary, n)
	}
	if r := res.Status.Rollouts; len(r) != 1 || r[0].Service != "web" || len(r[0].Steps) != 2 || r[0].Steps[0] != 20 || r[0].Steps[1] != 60 {
		t.Fatalf("status rollouts %+v, want web with the values' steps 20, 60", r)
	}
	rs, err := b.Releases(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	// Newest first: the step is a release of the chart like any other.
	if rs[0].Chart == nil || rs[0].Chart.Name != "shop" || !strings.Contains(rs[0].Manifest, "web-canary") {
		t.Fatalf("the step's record: chart %+v, manifest:\n%s", rs[0].Chart, rs[0].Manifest)
	}

	// The steps advance as for compose, at the weights the values give.
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if st, web, _, _ := rolloutState(t, b); st.Step != 0 || st.Weight != 20 || st.StepStarted.IsZero() || web != "example/web:1" {
		t.Fatalf("once ready: state %+v web %s, want step 0 at weight 20, web:1", st, web)
	}
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	reconcileOK(t, c)
	if st, web, _, n := rolloutState(t, b); st.Step != 1 || st.Weight != 60 || n != 3 || web != "example/web:1" {
		t.Fatalf("step 1: state %+v web %s canary at %d, want weight 60 with 3 replicas, web:1", st, web, n)
	}
	clk.add(time.Minute + time.Second)
	reconcileOK(t, c)
	reconcileOK(t, c)
	st, web, _, n = rolloutState(t, b)
	if st.Phase != rollout.Completed || n != 0 || web != "example/web:2" {
		t.Fatalf("after the last step: state %+v, canary at %d, web %s; want Completed, 0, web:2", st, n, web)
	}

	// A value that only changes the steps is a new rollout spec: it starts
	// again from step 0 at the new first weight.
	f.commit(t, canaryChart("3", 50))
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if st, web, canary, _ := rolloutState(t, b); st.Phase != rollout.Progressing || st.Step != 0 || st.Weight != 50 || web != "example/web:2" || canary != "example/web:3" {
		t.Fatalf("a one-step canary from the values: state %+v web %s canary %s, want step 0 at 50, web:2, canary web:3", st, web, canary)
	}
}
