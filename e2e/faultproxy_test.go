package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// killProxy stands between a controller process and dockerd, counts the
// Docker writes that pass through it, and SIGKILLs the process at the Nth:
// either before that write reaches the daemon, or after the daemon did it
// and before the process hears back. The product carries no hook for this;
// the process dies exactly where a real crash could leave it.
type killProxy struct {
	Socket string // the unix socket to point DOCKER_HOST at

	mu      sync.Mutex
	writes  int
	killAt  int    // 0: never
	killOn  string // "kind op" (e.g. "config create"): kill at the first such write instead
	after   bool   // kill after the daemon answered the killAt-th write
	kill    func()
	killed  bool
	entries []writeEntry
	run     int
}

// writeEntry is one write the daemon received, with its answer.
type writeEntry struct {
	Run    int
	Method string
	Kind   string // service, network, config, secret
	Op     string // create, update, remove
	Name   string // from the request body, for creates and updates
	ID     string // from the path, for updates and removals
	Status int
}

var errKilled = errors.New("controller killed by the fault proxy")

func newKillProxy(t *testing.T) *killProxy {
	t.Helper()
	p := &killProxy{}
	var stop func()
	p.Socket, stop = serveDockerProxy(t, "flt-proxy", p.roundTrip)
	t.Cleanup(stop)
	return p
}

// serveDockerProxy serves, on a unix socket of its own, a reverse proxy to
// the test daemon whose every request goes through rt, so a test can watch,
// hold or fail what a controller sends. stop closes the server and the
// proxy's idle connections to the daemon; the socket's directory is removed
// at the test's end.
func serveDockerProxy(t *testing.T, prefix string, rt func(base http.RoundTripper, r *http.Request) (*http.Response, error)) (socket string, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket = filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	daemon := swarmtest.Socket()
	base := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", daemon)
	}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: "docker"}) },
		Transport:     roundTripFunc(func(r *http.Request) (*http.Response, error) { return rt(base, r) }),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(l)
	return socket, func() { srv.Close(); base.CloseIdleConnections() }
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// arm makes the proxy kill with kill() at write n of the next run (0 for a
// run that is not killed), counting from the start of that run.
func (p *killProxy) arm(n int, after bool, kill func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.run++
	p.writes, p.killAt, p.killOn, p.after, p.kill, p.killed = 0, n, "", after, kill, false
}

// armOn makes the proxy kill at the first write of the next run whose kind
// and operation are "kind op" ("config create"). Writes of one deploy run
// concurrently, so the Nth write is not always the same object; a crash
// window that is about one object's write is armed by what it writes.
func (p *killProxy) armOn(kindOp string, after bool, kill func()) {
	p.arm(0, after, kill)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killOn = kindOp
}

// runWrites returns how many writes the current run sent and whether it
// was killed.
func (p *killProxy) runWrites() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes, p.killed
}

// log returns every write the daemon received, over all runs.
func (p *killProxy) log() []writeEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]writeEntry(nil), p.entries...)
}

var writePath = regexp.MustCompile(`^(?:/v[0-9.]+)?/(services|networks|configs|secrets)(?:/([^/]+))?(?:/(update))?$`)

func (p *killProxy) roundTrip(base http.RoundTripper, r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost && r.Method != http.MethodDelete && r.Method != http.MethodPut {
		return base.RoundTrip(r)
	}
	e := writeEntry{Method: r.Method}
	if m := writePath.FindStringSubmatch(r.URL.Path); m != nil {
		e.Kind = strings.TrimSuffix(m[1], "s")
		switch {
		case r.Method == http.MethodDelete:
			e.Op, e.ID = "remove", m[2]
		case m[2] == "create":
			e.Op = "create"
		case m[3] == "update":
			e.Op, e.ID = "update", m[2]
		}
	}
	if r.Body != nil && e.Op != "remove" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var named struct{ Name string }
		if json.Unmarshal(body, &named) == nil {
			e.Name = named.Name
		}
	}

	p.mu.Lock()
	p.writes++
	e.Run = p.run
	hit := p.killAt > 0 && p.writes == p.killAt ||
		p.killOn != "" && !p.killed && e.Kind+" "+e.Op == p.killOn
	if hit && !p.after {
		p.killed = true
		p.kill()
		p.mu.Unlock()
		return nil, errKilled
	}
	p.mu.Unlock()

	resp, err := base.RoundTrip(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		e.Status = resp.StatusCode
	}
	p.entries = append(p.entries, e)
	if hit {
		p.killed = true
		p.kill()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, errKilled
	}
	return resp, err
}
