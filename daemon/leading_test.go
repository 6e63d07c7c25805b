package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/internal/apiwire"
	"github.com/flotilla-gitops/flotilla/lease"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// memLeaseStore is the lease's compare-and-swap store in memory; steal
// writes a record as another controller would on taking the lease over.
type memLeaseStore struct {
	mu      sync.Mutex
	rec     lease.Record
	version uint64
}

func (m *memLeaseStore) Get(context.Context) (lease.Record, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version == 0 {
		return lease.Record{}, 0, lease.ErrNoRecord
	}
	return m.rec, m.version, nil
}

func (m *memLeaseStore) Create(_ context.Context, r lease.Record) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version != 0 {
		return 0, lease.ErrConflict
	}
	m.rec, m.version = r, 1
	return m.version, nil
}

func (m *memLeaseStore) Update(_ context.Context, version uint64, r lease.Record) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version != version {
		return 0, lease.ErrConflict
	}
	m.rec = r
	m.version++
	return m.version, nil
}

// steal takes the lease for holder in the next epoch; holder never renews
// it, so it expires for the others one lease duration later.
func (m *memLeaseStore) steal(holder string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rec = lease.Record{Holder: holder, Epoch: m.rec.Epoch + 1, Renewed: time.Now().UTC(), Duration: d}
	m.version++
}

// gatedFetch serves the commit the test last wrote; while held, a fetch
// waits until it is let go or its pass ends, so no pass of the controller
// completes.
type gatedFetch struct {
	mu      sync.Mutex
	commits int
	commit  string
	dir     string
	gate    chan struct{} // nil: not held
}

// write makes compose the next commit's deploy/docker-compose.yml.
func (f *gatedFetch) write(t *testing.T, compose string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy", "docker-compose.yml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits++
	f.commit, f.dir = fmt.Sprintf("%040d", f.commits), dir
}

func (f *gatedFetch) hold() {
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
}

func (f *gatedFetch) letGo() {
	f.mu.Lock()
	close(f.gate)
	f.gate = nil
	f.mu.Unlock()
}

func (f *gatedFetch) Fetch(ctx context.Context, _ source.Request) (*source.Revision, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &source.Revision{Commit: f.commit, Dir: f.dir}, nil
}

func routedCompose(version string) string {
	return `services:
  web:
    image: example/web:` + version + `
    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 25, pause: 1m}
        router: {provider: traefik, rule: "Host(` + "`shop.example`" + `)", port: 8080}
`
}

// A deposed leader's routes and operators' commands are of a term the new
// leader moves on from: it answers the router 503 from the moment it loses
// the lease, forgets the commands no pass took, and once it leads again
// answers 503 until its own passes have worked the routes out anew.
func TestADeposedLeaderServesNoRouterConfigurationUntilItsNewPassesDecideOne(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	file, err := application.Parse("apps.yaml", []byte(reloadBase+"    syncPolicy: {automated: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fetch := &gatedFetch{}
	fetch.write(t, routedCompose("1"))
	ctl, err := reconcile.New(reconcile.Options{Backend: chartstest.NewMinimal(), Fetcher: fetch, Logger: log, Tick: 20 * time.Millisecond}, file.Applications)
	if err != nil {
		t.Fatal(err)
	}
	const leaseFor = time.Second
	store := &memLeaseStore{}
	ls, err := lease.New(store, lease.Options{ID: "a", Duration: leaseFor, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{opts: &Options{}, ctl: ctl, log: log, lease: ls}
	srv := httptest.NewServer(api.New(api.Options{Controller: apiwire.New(ctl), Leadership: leadership(ls), NoAuth: true, Logger: log}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- r.runLeading(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("runLeading: %v", err)
		}
	})

	// routerAnswer is what Traefik's poll gets: the status and, for
	// another answer than 200, the error's code and message.
	routerAnswer := func() (int, api.Error) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/v1/router/traefik")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		if resp.StatusCode != http.StatusOK {
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
		}
		return resp.StatusCode, e
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * leaseFor)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	rolloutOf := func() application.RolloutStatus {
		st, _ := ctl.Status("shop")
		if len(st.Rollouts) != 1 {
			return application.RolloutStatus{}
		}
		return st.Rollouts[0]
	}

	waitFor("the leader to serve the router configuration", func() bool {
		code, _ := routerAnswer()
		return code == http.StatusOK
	})
	fetch.write(t, routedCompose("2"))
	if err := ctl.Refresh("shop"); err != nil {
		t.Fatal(err)
	}
	waitFor("the canary of version 2 to start", func() bool { return rolloutOf().Phase == "Progressing" })

	// An operator's abort is queued, and another controller takes the
	// lease before any pass takes it; no pass of this one completes from
	// here on until the test lets its fetches go.
	fetch.hold()
	if err := ctl.RolloutCommand("shop", "web", "abort"); err != nil {
		t.Fatal(err)
	}
	if p := rolloutOf().Pending; p != "abort" {
		t.Fatalf("the abort is not pending: %q", p)
	}
	store.steal("b", leaseFor)
	waitFor("the deposed leader to stand by", func() bool { return !ls.State().Leader })
	if code, e := routerAnswer(); code != http.StatusServiceUnavailable || e.Code != api.CodeStandby || !strings.Contains(e.Message, `controller "b" leads`) {
		t.Fatalf("the deposed leader answered the router %d %+v, want 503 standby naming b", code, e)
	}
	waitFor("the deposed leader to forget its routes", func() bool {
		_, complete := ctl.RolloutRoutes()
		return !complete
	})
	if p := rolloutOf().Pending; p != "" {
		t.Fatalf("the deposed leader still holds the operator's %s", p)
	}

	// b never renews: a takes the lease back, and must not serve the
	// routes of its former term while its new passes are held.
	waitFor("the lease to come back", func() bool { return ls.State().Leader })
	if code, e := routerAnswer(); code != http.StatusServiceUnavailable || e.Code != api.CodeUnavailable {
		t.Fatalf("the leader again, before any pass of its new term, answered the router %d %+v, want 503 unavailable", code, e)
	}
	fetch.letGo()
	waitFor("the leader's new passes to serve the router configuration", func() bool {
		code, _ := routerAnswer()
		return code == http.StatusOK
	})
	if ph := rolloutOf().Phase; ph != "Progressing" {
		t.Fatalf("the rollout is %s after the new term's pass: the former term's abort was deployed", ph)
	}
}
