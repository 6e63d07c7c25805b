package reconcile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/source"
)

// repoFetcher serves each repository URL from its own fake.
type repoFetcher map[string]*fakeFetcher

func (r repoFetcher) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	f, ok := r[req.RepoURL]
	if !ok {
		return nil, fmt.Errorf("no repository %s", req.RepoURL)
	}
	return f.Fetch(ctx, req)
}

const valuesURL = "https://bot@git.example.com/ops/values.git"

func valuesApp(name string) application.Application {
	a := testApp(name, true)
	a.Source.Path = "chart"
	a.Source.Chart = &application.Chart{}
	a.Source.Values = &application.ValuesSource{RepoURL: valuesURL, Revision: "main", Files: []string{"shop/prod.yaml"}}
	return a
}

func TestCommitInTheValuesRepositoryUpdatesTheStackOnTheNextPass(t *testing.T) {
	b := chartstest.NewMinimal()
	chart, vals := newFakeFetcher(), newFakeFetcher()
	chart.commit(t, chartRepo("from-chart"))
	v1 := vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-1\n"})
	app := valuesApp("shop")
	c := newTestController(t, b, repoFetcher{app.Source.RepoURL: chart, valuesURL: vals}, app)

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if !strings.Contains(rs[0].Manifest, "from-values-1") || rs[0].Chart.ValuesCommit != v1 {
		t.Fatalf("revision 1: values commit %q, manifest:\n%s", rs[0].Chart.ValuesCommit, rs[0].Manifest)
	}
	if want := " from commit " + shortCommit(v1); !strings.HasSuffix(res.Status.Chart, want) {
		t.Fatalf("status chart %q does not end with %q", res.Status.Chart, want)
	}
	writes := b.Writes()
	if res = mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("unchanged pass: %+v, %d writes", res, b.Writes()-writes)
	}

	v2 := vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-2\n"})
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade || res.Revision != 2 {
		t.Fatalf("after a values commit: %+v", res)
	}
	rs, _ = b.Releases(context.Background(), "shop")
	if !strings.Contains(rs[0].Manifest, "from-values-2") || rs[0].Chart.ValuesCommit != v2 || rs[0].Commit != rs[1].Commit {
		t.Fatalf("revision 2: commit %s (was %s), values commit %q, manifest:\n%s", rs[0].Commit, rs[1].Commit, rs[0].Chart.ValuesCommit, rs[0].Manifest)
	}
}

func TestMissingValuesFileNamesTheValuesRepositoryAndFileAndWritesNothing(t *testing.T) {
	b := chartstest.NewMinimal()
	chart, vals := newFakeFetcher(), newFakeFetcher()
	chart.commit(t, chartRepo("from-chart"))
	vals.commit(t, map[string]string{"other.yaml": "queue: x\n"})
	app := valuesApp("shop")
	c := newTestController(t, b, repoFetcher{app.Source.RepoURL: chart, valuesURL: vals}, app)

	res := mustReconcile(t, c, "shop")
	if res.Err == nil || b.Writes() != 0 {
		t.Fatalf("pass: %+v, %d writes", res, b.Writes())
	}
	msg := res.Status.LastError
	if !strings.Contains(msg, "values repository https://git.example.com/ops/values.git: shop/prod.yaml") || strings.Contains(msg, "bot@") {
		t.Fatalf("error %q", msg)
	}
}

func TestUnreachableValuesRepositoryFailsTheFetchAndWritesNothing(t *testing.T) {
	b := chartstest.NewMinimal()
	chart, vals := newFakeFetcher(), newFakeFetcher()
	chart.commit(t, chartRepo("from-chart"))
	vals.commit(t, map[string]string{"shop/prod.yaml": "queue: x\n"})
	vals.err = fmt.Errorf("dial tcp: connection refused")
	app := valuesApp("shop")
	c := newTestController(t, b, repoFetcher{app.Source.RepoURL: chart, valuesURL: vals}, app)

	res := mustReconcile(t, c, "shop")
	if res.Err == nil || b.Writes() != 0 || !strings.Contains(res.Status.LastError, "values repository") {
		t.Fatalf("pass: %+v, %d writes", res, b.Writes())
	}
}

// rollbackTo asks a running controller for a rollback and waits for it.
func rollbackTo(t *testing.T, c *Controller, revision int) Result {
	t.Helper()
	ch, err := c.Rollback("shop", revision, "bob")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		return res
	case <-time.After(5 * time.Second):
		t.Fatal("rollback not served")
	}
	return Result{}
}

func TestRollbackPinHoldsUntilTheValuesRepositoryMovesOn(t *testing.T) {
	b := chartstest.NewMinimal()
	chart, vals := newFakeFetcher(), newFakeFetcher()
	chart.commit(t, chartRepo("from-chart"))
	vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-1\n"})
	app := valuesApp("shop")
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: repoFetcher{app.Source.RepoURL: chart, valuesURL: vals}, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	v2 := vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-2\n"})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	res := rollbackTo(t, c, 1)
	cancel()
	<-done
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].PinnedValuesCommit != v2 || !strings.Contains(rs[0].Manifest, "from-values-1") {
		t.Fatalf("revision 3: pinned values commit %q, manifest:\n%s", rs[0].PinnedValuesCommit, rs[0].Manifest)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged || res.Status.Pinned == "" {
		t.Fatalf("pass while pinned: %+v", res)
	}

	vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-3\n"})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Upgrade || res.Revision != 4 {
		t.Fatalf("pass after a values commit: %+v", res)
	}
	rs, _ = b.Releases(context.Background(), "shop")
	if !strings.Contains(rs[0].Manifest, "from-values-3") {
		t.Fatalf("revision 4:\n%s", rs[0].Manifest)
	}
}

func TestRollbackGoesAheadWithTheValuesRepositoryUnreachable(t *testing.T) {
	b := chartstest.NewMinimal()
	chart, vals := newFakeFetcher(), newFakeFetcher()
	chart.commit(t, chartRepo("from-chart"))
	vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-1\n"})
	app := valuesApp("shop")
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: repoFetcher{app.Source.RepoURL: chart, valuesURL: vals}, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, c, "shop")
	vals.commit(t, map[string]string{"shop/prod.yaml": "queue: from-values-2\n"})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	vals.mu.Lock()
	vals.err = fmt.Errorf("dial tcp: connection refused")
	vals.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	res := rollbackTo(t, c, 1)
	cancel()
	<-done
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: %+v", res)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].Manifest != rs[2].Manifest || rs[0].PinnedValuesCommit != "" {
		t.Fatalf("revision 3: %+v", rs[0])
	}
}
