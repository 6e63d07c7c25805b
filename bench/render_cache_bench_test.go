package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// fixedFetcher serves one commit of a directory, as a repository that has
// not moved does.
type fixedFetcher struct{ dir string }

func (f fixedFetcher) Fetch(context.Context, source.Request) (*source.Revision, error) {
	return &source.Revision{Commit: "0123456789012345678901234567890123456789", Dir: f.dir}, nil
}

// BenchmarkUnchangedPass1000 is a whole reconcile pass over a commit that
// was already deployed, for the 1,000-service stack of
// BenchmarkRenderConvertPlan1000: the render cache answers the render step,
// so the pass costs its plan, observe and drift steps (against an in-memory
// backend) rather than a parse of the compose file. Compare with
// BenchmarkRenderConvertPlan1000, what every such pass cost before.
func BenchmarkUnchangedPass1000(b *testing.B) {
	dir := b.TempDir()
	writeStack(b, dir, 1000)
	app := application.Application{
		Name: "bench", Stack: "bench", History: 10,
		Source: application.Source{RepoURL: "/bench", Revision: "main", Path: "."},
	}
	app.SyncPolicy.Interval.Duration = time.Minute
	app.SyncPolicy.Automated = &application.Automated{}
	c, err := reconcile.New(reconcile.Options{
		ControllerID: "bench", Backend: chartstest.NewMinimal(), Fetcher: fixedFetcher{dir},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, []application.Application{app})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if res, err := c.Reconcile(ctx, "bench"); err != nil || res.Err != nil || res.Action != charts.Install {
		b.Fatalf("install: %v %v", err, res.Err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := c.Reconcile(ctx, "bench")
		if err != nil || res.Err != nil || res.Action != charts.Unchanged {
			b.Fatalf("unchanged pass: %s %v %v", res.Action, err, res.Err)
		}
	}
}
