package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/internal/apiwire"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// oneTree serves the same directory as every application's revision.
type oneTree struct{ dir string }

func (o oneTree) Fetch(context.Context, source.Request) (*source.Revision, error) {
	return &source.Revision{Commit: "0123456789abcdef0123456789abcdef01234567", Dir: o.dir}, nil
}

// BenchmarkAPIList5000 measures GET /api/v1/applications for 5,000
// applications over real HTTP on loopback, through the token middleware, on
// a controller whose applications have each run a pass against the in-memory
// backend. It reports the median and 95th percentile latency.
func BenchmarkAPIList5000(b *testing.B) {
	dir := b.TempDir()
	compose := "version: \"3.8\"\nservices:\n  web: {image: example/web:1}\n  worker: {image: example/worker:1}\n"
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(compose), 0o644); err != nil {
		b.Fatal(err)
	}
	apps := make([]application.Application, 5000)
	for i := range apps {
		a := application.Application{Name: fmt.Sprintf("app-%04d", i), Stack: fmt.Sprintf("app-%04d", i), History: 10,
			Source: application.Source{RepoURL: "/repo", Revision: "main", Path: "."}}
		a.SyncPolicy.Automated = &application.Automated{}
		a.SyncPolicy.Interval.Duration = time.Hour
		apps[i] = a
	}
	ctl, err := reconcile.New(reconcile.Options{Backend: chartstest.NewMinimal(), Fetcher: oneTree{dir}, Logger: quiet}, apps)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range ctl.RunOnce(context.Background()) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	const token = "bench-token-0123456789abcdef"
	h := api.New(api.Options{Controller: apiwire.New(ctl), Logger: quiet,
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: token}}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func() time.Duration {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/applications", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
		return took
	}
	get() // warm the connection
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		took = append(took, get())
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
}
