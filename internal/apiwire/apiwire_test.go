package apiwire

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/router"
	"github.com/flotilla-gitops/flotilla/source"
)

// dirFetcher serves the directory it holds as the commit it names.
type dirFetcher struct{ commit, dir string }

func (f *dirFetcher) Fetch(context.Context, source.Request) (*source.Revision, error) {
	return &source.Revision{Commit: f.commit, Dir: f.dir}, nil
}

func (f *dirFetcher) write(t *testing.T, commit, tag string) {
	t.Helper()
	f.commit, f.dir = commit, t.TempDir()
	compose := `version: "3.8"
services:
  web:
    image: example/web:` + tag + `
    x-flotilla:
      rollout:
        strategy: canary
        steps: [{weight: 20, pause: 1m}]
        router: {provider: traefik, rule: "Host(` + "`shop.example`" + `)", port: 8080, entryPoints: [web]}
  worker:
    image: example/worker:1
`
	if err := os.WriteFile(filepath.Join(f.dir, "docker-compose.yml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRouterRoutesAreTheTraefikRoutesOfEveryRollout(t *testing.T) {
	f := &dirFetcher{}
	f.write(t, "0000000000000000000000000000000000000001", "1")
	app := application.Application{Name: "shop", Stack: "shop", History: 10,
		Source: application.Source{RepoURL: "/repo", Revision: "main", Path: "."}}
	app.SyncPolicy.Automated = &application.Automated{}
	app.SyncPolicy.Interval.Duration = time.Minute
	ctl, err := reconcile.New(reconcile.Options{ControllerID: "ctl", Backend: chartstest.NewMinimal(), Fetcher: f,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	a := New(ctl)
	if _, complete := a.RouterRoutes(); complete {
		t.Fatal("complete before any pass")
	}
	reconcileOK := func() {
		t.Helper()
		res, err := ctl.Reconcile(context.Background(), "shop")
		if err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	reconcileOK()
	routes, complete := a.RouterRoutes()
	if !complete || len(routes) != 1 || len(routes[0].Backends) != 1 || routes[0].Backends[0].Weight != 100 {
		t.Fatalf("after the first deploy: %+v %v", routes, complete)
	}
	f.write(t, "0000000000000000000000000000000000000002", "2")
	reconcileOK()
	routes, _ = a.RouterRoutes()
	want := router.Route{Name: "shop-web", Rule: "Host(`shop.example`)", EntryPoints: []string{"web"}, Backends: []router.Backend{
		{Name: "stable", Weight: 100, URLs: []string{"http://shop_web:8080"}},
		{Name: "canary", Weight: 0, URLs: []string{"http://shop_web-canary:8080"}},
	}}
	if len(routes) != 1 {
		t.Fatalf("routes %+v", routes)
	}
	got, _ := router.DynamicConfig(routes)
	wantCfg, err := router.DynamicConfig([]router.Route{want})
	if err != nil || string(got) != string(wantCfg) {
		t.Fatalf("routes %+v, want %+v (%v)", routes, want, err)
	}
}
