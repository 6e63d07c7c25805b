package reconcile

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/chartrepo/chartrepotest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// servedCharts is a chart repository on 127.0.0.1 whose index is rebuilt
// on every publish.
type servedCharts struct {
	t   *testing.T
	dir string
	srv *httptest.Server
}

func newServedCharts(t *testing.T) *servedCharts {
	s := &servedCharts{t: t, dir: t.TempDir()}
	s.srv = httptest.NewServer(http.FileServer(http.Dir(s.dir)))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *servedCharts) publish(version string) {
	s.t.Helper()
	chartrepotest.Publish(s.t, s.dir, "web", map[string]string{
		"web/Chart.yaml":          "apiVersion: v2\nname: web\nversion: " + version + "\n",
		"web/values.yaml":         "tag: \"" + version + "\"\n",
		"web/templates/web.yaml":  "services:\n  web:\n    image: example/web:{{ .Values.tag }}\n",
		"web/templates/_none.tpl": "",
	})
}

func TestAChartFromARepositoryFollowsItsConstraintAndRollsBackWithoutIt(t *testing.T) {
	repo := newServedCharts(t)
	repo.publish("1.0.0")
	cl, err := chartrepo.New(chartrepo.Options{CacheDir: t.TempDir(), BackoffMin: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	app := testApp("web", true)
	app.Source = application.Source{Revision: "HEAD", Path: ".",
		Chart: &application.Chart{RepoURL: repo.srv.URL, Name: "web", Version: "~1.0", Insecure: true}}
	b := chartstest.NewMinimal()
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: newFakeFetcher(), Charts: cl, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	res := mustReconcile(t, c, "web")
	if res.Err != nil || res.Action != charts.Install || res.Status.Revision != "web@1.0.0" {
		t.Fatalf("install: %+v", res)
	}
	repo.publish("1.0.1")
	res = mustReconcile(t, c, "web")
	if res.Err != nil || res.Action != charts.Upgrade || res.Revision != 2 || res.Status.Revision != "web@1.0.1" {
		t.Fatalf("a newer matching version: %+v", res)
	}
	repo.publish("2.0.0")
	writes := b.Writes()
	if res = mustReconcile(t, c, "web"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("a version outside the constraint: %+v, %d writes", res, b.Writes()-writes)
	}
	rs, _ := b.Releases(context.Background(), "web")
	if rs[0].Chart == nil || rs[0].Chart.Name != "web" || rs[0].Chart.Version != "1.0.1" || rs[0].Commit != "web@1.0.1" {
		t.Fatalf("newest record: %+v chart %+v", rs[0], rs[0].Chart)
	}

	repo.srv.Close()
	if res = mustReconcile(t, c, "web"); !errors.Is(res.Err, chartrepo.ErrUnreachable) || KindOf(res.Err) != Transient {
		t.Fatalf("pass with the repository down: %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ch, err := c.Rollback("web", 1, "bob")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("rollback not served")
	}
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback with the repository down: %+v", res)
	}
	rs, _ = b.Releases(context.Background(), "web")
	if rs[0].Manifest != rs[2].Manifest || rs[0].Chart.Version != "1.0.0" || rs[0].PinnedCommit != "web@1.0.1" {
		t.Fatalf("revision 3 is not revision 1 pinned at web@1.0.1: %+v %+v", rs[0], rs[0].Chart)
	}
}

func TestANewMatchingChartVersionShowsAsTheSyncReasonOfAManualApplication(t *testing.T) {
	repo := newServedCharts(t)
	repo.publish("1.0.0")
	cl, err := chartrepo.New(chartrepo.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	app := testApp("web", false)
	app.Source = application.Source{Revision: "HEAD", Path: ".",
		Chart: &application.Chart{RepoURL: repo.srv.URL, Name: "web", Version: "1.x", Insecure: true}}
	b := chartstest.NewMinimal()
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: newFakeFetcher(), Charts: cl, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	res := mustReconcile(t, c, "web")
	if res.Status.Sync != application.OutOfSync || res.Status.SyncReason != application.ReasonGit || res.Status.SeenRevision != "web@1.0.0" || b.Writes() != 0 {
		t.Fatalf("manual pass: %+v, %d writes", res.Status, b.Writes())
	}
}
