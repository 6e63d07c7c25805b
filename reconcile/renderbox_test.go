package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/source"
)

// A tree over the fetcher's budget is refused the same way on every
// fetch of that commit: it waits for a new revision, it is not retried.
func TestTreeOverBudgetIsStalled(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	f.err = fmt.Errorf("commit 1234: at bomb/a/a: more than 10 entries: %w", source.ErrTreeTooLarge)
	res := mustReconcile(t, c, "shop")
	if !errors.Is(res.Err, source.ErrTreeTooLarge) || KindOf(res.Err) != Stalled {
		t.Fatalf("tree over budget: %v (%s)", res.Err, KindOf(res.Err))
	}
	if !strings.Contains(res.Status.LastError, `application "shop"`) || !strings.Contains(res.Status.LastError, "bomb/a/a") {
		t.Fatalf("last error %q names neither the application nor the path", res.Status.LastError)
	}
}

// A chart whose render never ends costs its own pass through the render
// box's deadline, as stalled; the controller's other chart application,
// rendered in a child too, keeps deploying.
func TestRunawayChartCostsOnePassInTheRenderBox(t *testing.T) {
	// The deadline leaves the good chart's child room to start and render
	// on a machine running the whole suite (2 s was missed so in CI).
	box, err := renderbox.New(renderbox.Limits{Deadline: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := chartstest.NewMinimal()
	good, bad := newFakeFetcher(), newFakeFetcher()
	good.commit(t, chartRepo("jobs"))
	files := chartRepo("jobs")
	files["chart/templates/loop.yaml"] = `{{ $l := until 100000 }}{{ range $l }}{{ range $l }}{{ range $l }}{{ end }}{{ end }}{{ end }}`
	bad.commit(t, files)
	goodApp, badApp := chartApp("shop"), chartApp("bomb")
	badApp.Source.RepoURL = "/bad"
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: byRepo{"/repo": good, "/bad": bad}, Logger: quiet, RenderBox: box}, []application.Application{goodApp, badApp})
	if err != nil {
		t.Fatal(err)
	}
	res := mustReconcile(t, c, "bomb")
	if !errors.Is(res.Err, renderbox.ErrLimit) || KindOf(res.Err) != Stalled {
		t.Fatalf("runaway chart: %v (%s)", res.Err, KindOf(res.Err))
	}
	// The wall-clock deadline and the CPU limit are equal, and either
	// may stop the loop first.
	for _, w := range []string{`application "bomb"`, "chart shop", " of 6s exceeded"} {
		if !strings.Contains(res.Status.LastError, w) {
			t.Errorf("last error %q does not mention %q", res.Status.LastError, w)
		}
	}
	if b.Writes() != 0 {
		t.Errorf("the refused render wrote %d times", b.Writes())
	}
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("the other application after the runaway: %+v", res)
	}
	if rs, _ := b.Releases(t.Context(), "shop"); len(rs) != 1 || !strings.Contains(rs[0].Manifest, `REVISION: "1"`) {
		t.Fatalf("the other application's record: %+v", rs)
	}
}

// byRepo sends each repository's fetches to its own fake.
type byRepo map[string]*fakeFetcher

func (m byRepo) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	f, ok := m[req.RepoURL]
	if !ok {
		return nil, fmt.Errorf("repository %s: %w", req.RepoURL, source.ErrRevisionNotFound)
	}
	return f.Fetch(ctx, req)
}
