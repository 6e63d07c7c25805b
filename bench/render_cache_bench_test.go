package bench

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/compose"
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

// liveBackend is the in-memory backend with live drift: what it deploys it
// holds as live services, each write moving the service's version as Swarm
// does, and it lists every stack's services at once. It stands in for the
// swarm so that a benchmark measures the controller's side of a steady
// pass with live drift on.
type liveBackend struct {
	*chartstest.MinimalBackend
	mu      sync.Mutex
	live    map[string]map[string]swarm.Service // stack → scoped name
	version uint64
}

var (
	_ capability.LiveDrift         = (*liveBackend)(nil)
	_ capability.LiveServicesBatch = (*liveBackend)(nil)
)

func (l *liveBackend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	res, err := l.MinimalBackend.DeployStack(ctx, req)
	if err != nil {
		return res, err
	}
	st, err := compose.Convert(ctx, req.Manifest, req.Stack, nil)
	if err != nil {
		return res, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live[req.Stack] == nil {
		l.live[req.Stack] = map[string]swarm.Service{}
	}
	for _, short := range slices.Concat(res.Created, res.Updated) {
		spec := st.Services[req.Stack+"_"+short]
		l.version++
		l.live[req.Stack][spec.Name] = swarm.Service{ID: spec.Name, Meta: swarm.Meta{Version: swarm.Version{Index: l.version}}, Spec: spec}
	}
	return res, nil
}

func (l *liveBackend) DesiredServices(ctx context.Context, manifest, stack string) (*compose.Stack, error) {
	return compose.Convert(ctx, manifest, stack, nil)
}

func (l *liveBackend) LiveServices(_ context.Context, stack string) (map[string]swarm.Service, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.live[stack]), nil
}

func (l *liveBackend) LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error) {
	out := map[string]map[string]swarm.Service{}
	for _, s := range stacks {
		out[s], _ = l.LiveServices(ctx, s)
	}
	return out, nil
}

// BenchmarkUnchangedPassLiveDrift1000 is BenchmarkUnchangedPass1000 with
// live drift on, run as the scheduler runs it (a batch of one): every pass
// compares the 1,000 live services with what the manifest converts to,
// unless it can tell from their versions that nothing moved since the last
// comparison found them in sync.
func BenchmarkUnchangedPassLiveDrift1000(b *testing.B) {
	dir := b.TempDir()
	writeStack(b, dir, 1000)
	app := application.Application{
		Name: "bench", Stack: "bench", History: 10,
		Source: application.Source{RepoURL: "/bench", Revision: "main", Path: "."},
	}
	app.SyncPolicy.Interval.Duration = time.Minute
	app.SyncPolicy.Automated = &application.Automated{SelfHeal: true}
	be := &liveBackend{MinimalBackend: chartstest.NewMinimal(), live: map[string]map[string]swarm.Service{}}
	c, err := reconcile.New(reconcile.Options{
		ControllerID: "bench", Backend: be, Fetcher: fixedFetcher{dir},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, []application.Application{app})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Batches, as the scheduler runs passes: the batch's one read of the
	// live services is what the versions are checked against.
	batch := func(want charts.Action) {
		for _, res := range c.RunOnce(ctx) {
			if res.Err != nil || res.Action != want || len(res.Status.Drift) > 0 || (want == charts.Unchanged && (res.Deployed != nil || res.Healed != nil)) {
				b.Fatalf("pass: %s %v, want %s; drift %v", res.Action, res.Err, want, res.Status.Drift)
			}
		}
	}
	batch(charts.Install)
	batch(charts.Unchanged) // the first comparison after the deploy
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		batch(charts.Unchanged)
	}
}
