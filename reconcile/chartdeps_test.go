package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// parentWithDependency is a chart in git whose web service comes from the
// "web" chart of a chart repository, configured under the key "web".
func parentWithDependency(repoURL, constraint string) map[string]string {
	return map[string]string{
		"chart/Chart.yaml":            "apiVersion: v2\nname: site\nversion: 1.0.0\ndependencies:\n  - name: web\n    version: \"" + constraint + "\"\n    repository: " + repoURL + "\n",
		"chart/values.yaml":           "web:\n  tag: from-parent\n",
		"chart/templates/worker.yaml": "services:\n  worker:\n    image: example/worker:1\n",
	}
}

func TestADependencyFromAChartRepositoryIsFetchedVerifiedAndDeployed(t *testing.T) {
	repo := newServedCharts(t)
	repo.publish("1.0.0")
	cl, err := chartrepo.New(chartrepo.Options{CacheDir: t.TempDir(), BackoffMin: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, parentWithDependency(repo.srv.URL, "~1.0"))
	app := testApp("site", true)
	app.Source.Path = "chart"
	app.Source.Chart = &application.Chart{Insecure: true}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Charts: cl, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	res := mustReconcile(t, c, "site")
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "site")
	if !strings.Contains(rs[0].Manifest, "example/web:from-parent") || !strings.Contains(rs[0].Manifest, "example/worker:1") {
		t.Fatalf("manifest:\n%s", rs[0].Manifest)
	}
	writes := b.Writes()
	if res = mustReconcile(t, c, "site"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("unchanged pass: %+v, %d writes", res, b.Writes()-writes)
	}

	// The repository goes away: the pass is transient and writes nothing.
	repo.srv.Close()
	res = mustReconcile(t, c, "site")
	if !errors.Is(res.Err, chartrepo.ErrUnreachable) || KindOf(res.Err) != Transient || b.Writes() != writes {
		t.Fatalf("dependency repository down: %+v, %d writes", res, b.Writes()-writes)
	}
	if !strings.Contains(res.Status.LastError, "chart/Chart.yaml") || !strings.Contains(res.Status.LastError, "dependency web") {
		t.Fatalf("error %q", res.Status.LastError)
	}
}

func TestADependencyWithoutAChartRepositoryClientIsStalled(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, parentWithDependency("https://charts.example.com", "~1.0"))
	app := testApp("site", true)
	app.Source.Path = "chart"
	app.Source.Chart = &application.Chart{}
	c := newTestController(t, b, f, app)
	res := mustReconcile(t, c, "site")
	if KindOf(res.Err) != Stalled || b.Writes() != 0 || !strings.Contains(res.Status.LastError, "no chart repository client") {
		t.Fatalf("%+v, %d writes", res, b.Writes())
	}
}
