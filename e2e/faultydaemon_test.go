package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// daemonMode is how faultyDaemon answers.
type daemonMode int

const (
	daemonHealthy    daemonMode = iota // forward every request
	daemonNotManager                   // 503 "not a swarm manager", as a restarting manager answers
	daemonStalled                      // hold every request until the mode changes
)

// notManagerMessage is what dockerd says while its node is not (yet) a
// manager, word for word.
const notManagerMessage = `This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.`

// faultyDaemon is an HTTP proxy on a unix socket in front of the shared
// dockerd that can turn into a daemon being restarted or one that stalls,
// without touching the real daemon other tests use.
type faultyDaemon struct {
	path string
	srv  *http.Server

	mu     sync.Mutex
	mode   daemonMode
	resume chan struct{} // closed when a stall ends
}

func newFaultyDaemon(t *testing.T) *faultyDaemon {
	d := &faultyDaemon{path: filepath.Join(t.TempDir(), "docker.sock"), resume: make(chan struct{})}
	up := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: "docker"}) },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", swarmtest.Socket())
		}},
	}
	d.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		mode, resume := d.mode, d.resume
		d.mu.Unlock()
		switch mode {
		case daemonNotManager:
			if !strings.HasSuffix(r.URL.Path, "/_ping") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "{\"message\":%q}\n", notManagerMessage)
				return
			}
		case daemonStalled:
			select {
			case <-resume:
			case <-r.Context().Done():
				return
			}
		}
		up.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("unix", d.path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.srv.Serve(ln) }()
	t.Cleanup(func() {
		d.set(daemonHealthy)
		_ = d.srv.Close()
	})
	return d
}

func (d *faultyDaemon) set(m daemonMode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mode == daemonStalled && m != daemonStalled {
		close(d.resume)
		d.resume = make(chan struct{})
	}
	d.mode = m
}

// A daemon being restarted answers "not a swarm manager"; one that stalls
// answers nothing. Through both, the running controller must publish
// Unknown with the reason and a fresh pass time (never Missing, never the
// last healthy judgement), keep answering the API, and be Healthy again once
// the daemon is.
func TestDaemonThatIsNotAManagerOrStallsIsUnknownNeverMissingAndRecovers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Interval.Duration = 300 * time.Millisecond
	h.repo.Commit("initial", files(stackFile))
	d := newFaultyDaemon(t)
	be, err := backend.New(context.Background(), backend.Options{Host: "unix://" + d.path, Logger: quiet, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const readTimeout = 2 * time.Second
	ctl, err := reconcile.New(reconcile.Options{ControllerID: h.id, Backend: be, Fetcher: h.controllerFetcher(), Logger: quiet,
		Tick: 50 * time.Millisecond, SwarmReadTimeout: readTimeout}, []application.Application{h.app})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { d.set(daemonHealthy); cancel(); <-done })

	// status polls the controller as the API would; a call that does not
	// return within a few seconds fails the test. Once the stack has run
	// (before its first deploy its services really are missing), no status
	// may call a service Missing.
	deployed := false
	status := func() application.Status {
		ch := make(chan application.Status, 1)
		go func() { st, _ := ctl.Status(h.app.Name); ch <- st }()
		select {
		case st := <-ch:
			for _, s := range st.Services {
				if !deployed {
					break
				}
				if s.Health == application.Missing {
					t.Fatalf("service %s reported Missing (%s; last error %q)", s.Name, s.Message, st.LastError)
				}
			}
			return st
		case <-time.After(5 * time.Second):
			t.Fatal("the controller's status blocked")
			return application.Status{}
		}
	}
	healthy := func(what string) {
		swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
			st := status()
			return st.Health == application.Healthy && st.Sync == application.Synced,
				fmt.Sprintf("%s: %s/%s %s %q", what, st.Sync, st.Health, st.HealthMessage, st.LastError)
		})
	}
	// unknown waits for Unknown with the reason, judged after since: the
	// message carries the time of the read (a stalled daemon may hold the
	// rest of the pass, and with it LastPass).
	unknown := func(what, reason string) {
		since := time.Now().Truncate(time.Second)
		swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
			st := status()
			_, at, _ := strings.Cut(st.HealthMessage, "could not be read at ")
			stamp, _, _ := strings.Cut(at, " ")
			when, err := time.Parse(time.RFC3339, strings.TrimSuffix(stamp, ":"))
			return st.Health == application.HealthUnknown && st.Sync == application.SyncUnknown &&
					strings.Contains(st.HealthMessage, reason) && err == nil && !when.Before(since),
				fmt.Sprintf("%s: %s/%s %q", what, st.Sync, st.Health, st.HealthMessage)
		})
	}

	healthy("first deploy")
	h.waitRunning(3)
	deployed = true
	healthy("running")

	d.set(daemonNotManager)
	unknown("not a manager", "not a swarm manager")
	// It stays Unknown pass after pass while the daemon says so.
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		if st := status(); st.Health != application.HealthUnknown {
			t.Fatalf("not a manager, later pass: %s %q", st.Health, st.HealthMessage)
		}
	}
	d.set(daemonHealthy)
	healthy("after the restart")

	d.set(daemonStalled)
	unknown("stalled", "no answer within "+readTimeout.String())
	d.set(daemonHealthy)
	healthy("after the stall")
}
