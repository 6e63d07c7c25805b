package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// chartRepo is a chart whose web service prints the revision it was
// written at, and whose worker does not.
func chartRepo(workerQueue string) map[string]string {
	return map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.2.3\n",
		"chart/values.yaml": "queue: " + workerQueue + "\n",
		"chart/templates/web.yaml": `version: "3.8"
services:
  web:
    image: example/web:1
    environment:
      REVISION: "{{ .Release.Revision }}"
      UPGRADE: "{{ .Release.IsUpgrade }}"
`,
		"chart/templates/worker.yaml": `services:
  worker:
    image: example/worker:1
    environment: {QUEUE: {{ .Values.queue | quote }}}
`,
	}
}

func chartApp(name string) application.Application {
	a := testApp(name, true)
	a.Source.Path = "chart"
	a.Source.Chart = &application.Chart{Set: application.Values{"queue": "jobs"}}
	return a
}

func TestChartApplicationSeesTheRevisionItWritesAndStaysUnchanged(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, chartRepo("ignored"))
	c := newTestController(t, b, f, chartApp("shop"))

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	ref := rs[0].Chart
	if ref == nil || ref.Name != "shop" || ref.Version != "1.2.3" || !strings.HasPrefix(ref.ValuesDigest, "sha256:") {
		t.Fatalf("record's chart: %+v", ref)
	}
	if res.Status.Chart != "shop 1.2.3, values "+ref.ValuesDigest {
		t.Fatalf("status chart %q", res.Status.Chart)
	}
	if !strings.Contains(rs[0].Manifest, `REVISION: "1"`) || !strings.Contains(rs[0].Manifest, `UPGRADE: "false"`) {
		t.Fatalf("manifest of revision 1:\n%s", rs[0].Manifest)
	}

	// Rendering as the next revision would differ; as the recorded one it
	// does not, so nothing is written.
	writes := b.Writes()
	for range 2 {
		res = mustReconcile(t, c, "shop")
		if res.Err != nil || res.Action != charts.Unchanged {
			t.Fatalf("unchanged pass: %+v", res)
		}
	}
	if b.Writes() != writes {
		t.Fatalf("unchanged passes wrote %d times", b.Writes()-writes)
	}

	// A changed value is written as revision 2, and the template saw 2.
	c2 := chartApp("shop")
	c2.Source.Chart.Set["queue"] = "urgent"
	c.SetApplications([]application.Application{c2})
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	rs, _ = b.Releases(context.Background(), "shop")
	if !strings.Contains(rs[0].Manifest, `REVISION: "2"`) || !strings.Contains(rs[0].Manifest, `UPGRADE: "true"`) || !strings.Contains(rs[0].Manifest, "urgent") {
		t.Fatalf("manifest of revision 2:\n%s", rs[0].Manifest)
	}
	if rs[0].Chart.ValuesDigest == ref.ValuesDigest {
		t.Fatal("values digest did not change with the values")
	}
	if !slices.Equal(res.Deployed.Updated, []string{"web", "worker"}) {
		t.Fatalf("updated %v", res.Deployed.Updated)
	}
}

func TestBrokenChartIsStalledAndWritesNothing(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	files := chartRepo("jobs")
	files["chart/templates/worker.yaml"] = "services:\n  worker:\n    image: {{ .Values.queue | nosuch }}\n"
	f.commit(t, files)
	c := newTestController(t, b, f, chartApp("shop"))
	res := mustReconcile(t, c, "shop")
	if res.Err == nil || b.Writes() != 0 {
		t.Fatalf("pass: %+v, %d writes", res, b.Writes())
	}
	for _, want := range []string{`application "shop"`, "chart/templates/worker.yaml:3", "nosuch"} {
		if !strings.Contains(res.Status.LastError, want) {
			t.Errorf("error %q lacks %q", res.Status.LastError, want)
		}
	}
}

func TestRollbackOfAChartRevisionNeedsNoChart(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, chartRepo("ignored"))
	app := chartApp("shop")
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	up := chartApp("shop")
	up.Source.Chart.Set["queue"] = "urgent"
	c.SetApplications([]application.Application{up})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	// Git now holds a chart that does not render at all.
	broken := chartRepo("jobs")
	broken["chart/templates/web.yaml"] = "{{ nosuch }}"
	f.commit(t, broken)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ch, err := c.Rollback("shop", 1, "bob")
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	select {
	case res = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("rollback not served")
	}
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].Manifest != rs[2].Manifest || *rs[0].Chart != *rs[2].Chart {
		t.Fatalf("revision 3 is not revision 1:\n%+v\n%+v", rs[0], rs[2])
	}
}

func TestDiffOfAChartApplicationNamesTheChartAndValuesDigestOfBothSides(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, chartRepo("ignored"))
	c := newTestController(t, b, f, chartApp("shop"))
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	c2 := chartApp("shop")
	c2.Source.Chart.Set["queue"] = "urgent"
	c.SetApplications([]application.Application{c2})
	d, err := c.Diff(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if d.Chart == nil || d.DeployedChart == nil || d.Chart.Name != "shop" || d.Chart.Version != "1.2.3" || d.DeployedChart.Version != "1.2.3" {
		t.Fatalf("diff charts %+v %+v", d.Chart, d.DeployedChart)
	}
	if d.Chart.ValuesDigest == d.DeployedChart.ValuesDigest || !strings.HasPrefix(d.Chart.ValuesDigest, "sha256:") {
		t.Fatalf("values digests %q and %q", d.Chart.ValuesDigest, d.DeployedChart.ValuesDigest)
	}
}

func TestRollbackOfAChartInGitGoesAheadWithGitUnreachable(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, chartRepo("ignored"))
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{chartApp("shop")})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	up := chartRepo("ignored")
	up["chart/Chart.yaml"] = "apiVersion: v2\nname: shop\nversion: 1.3.0\n"
	up["chart/templates/worker.yaml"] = strings.Replace(up["chart/templates/worker.yaml"], "worker:1", "worker:2", 1)
	f.commit(t, up) // a newer chart version
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	f.mu.Lock()
	f.err = errors.New("dial tcp: connection refused")
	f.mu.Unlock()
	if res := mustReconcile(t, c, "shop"); res.Err == nil || KindOf(res.Err) != Transient {
		t.Fatalf("an ordinary pass with git down: %+v", res)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ch, err := c.Rollback("shop", 1, "bob")
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	select {
	case res = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("rollback not served")
	}
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback with git down: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].Manifest != rs[2].Manifest || *rs[0].Chart != *rs[2].Chart || rs[0].Chart.Version != "1.2.3" || rs[0].PinnedCommit != rs[1].Commit {
		t.Fatalf("revision 3 is not revision 1 pinned at revision 2's commit:\n%+v\n%+v", rs[0], rs[2])
	}
}
