// Package multinode holds the tests that need a real swarm of several nodes:
// node loss, global services, node-local volumes. The cluster (a manager and
// two workers, extra dockerds in their own namespaces on this machine) is
// made once for the package by internal/swarmnodes and taken down after it.
//
// The tests run one after another, not in parallel: one of them kills a
// node, and the others must not see that as their own failure.
package multinode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmnodes"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

func TestMain(m *testing.M) {
	os.Exit(swarmnodes.Main(m, swarmnodes.Spec{Prefix: "mn", Nodes: 3, Workers: 2}))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// app is one application on the cluster: its repository, a backend on the
// manager's socket, and a controller of its own id.
type app struct {
	t       *testing.T
	cluster *swarmnodes.Cluster
	client  *client.Client
	repo    *gittest.Repo
	backend *backend.Backend
	app     application.Application
	ctl     *reconcile.Controller
}

func newApp(t *testing.T, c *swarmnodes.Cluster) *app {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	stack := "tmn" + hex.EncodeToString(b[:])
	cl := c.Client(t, c.Manager())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := swarmtest.RemoveAll(ctx, cl, stack); err != nil {
			t.Errorf("cleanup of stack %s: %v", stack, err)
		}
	})
	be, err := backend.New(context.Background(), backend.Options{Host: cl.DaemonHost(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := &app{t: t, cluster: c, client: cl, repo: gittest.New(t), backend: be}
	a.app = application.Application{
		Name:  stack,
		Stack: stack,
		Source: application.Source{
			RepoURL:  a.repo.Dir,
			Revision: "main",
			Path:     "deploy",
		},
		History: 10,
	}
	a.app.SyncPolicy.Interval.Duration = time.Minute
	a.app.SyncPolicy.Automated = &application.Automated{SelfHeal: true}
	return a
}

// controller starts the application's controller; call it after the first
// commit.
func (a *app) controller() *reconcile.Controller {
	a.t.Helper()
	ctl, err := reconcile.New(reconcile.Options{
		ControllerID: "mn-" + a.app.Stack,
		Backend:      a.backend,
		Fetcher:      source.New(source.Options{CacheDir: filepath.Join(a.t.TempDir(), "git"), Logger: quiet}),
		Logger:       quiet,
	}, []application.Application{a.app})
	if err != nil {
		a.t.Fatal(err)
	}
	a.ctl = ctl
	return ctl
}

func (a *app) reconcile() reconcile.Result {
	a.t.Helper()
	res, err := a.ctl.Reconcile(context.Background(), a.app.Name)
	if err != nil {
		a.t.Fatal(err)
	}
	return res
}
