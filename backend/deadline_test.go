package backend

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// stallingSocket forwards a unix socket to the daemon's until stall is
// called; from then on it keeps accepting connections and reading
// requests, and forwards none of them, so no answer ever comes: a daemon
// that hangs, without hanging the daemon every other test shares.
type stallingSocket struct {
	path    string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallingSocket(t *testing.T, daemon string) *stallingSocket {
	t.Helper()
	target := strings.TrimPrefix(daemon, "unix://")
	if target == daemon {
		t.Skipf("the daemon is not on a unix socket: %s", daemon)
	}
	s := &stallingSocket{path: filepath.Join(t.TempDir(), "docker.sock")}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			s.mu.Lock()
			s.conns = append(s.conns, c, up)
			s.mu.Unlock()
			go s.requests(c, up)
			go func() { _, _ = io.Copy(c, up) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// requests copies what the client sends unless the socket is stalled, in
// which case it is read and dropped.
func (s *stallingSocket) requests(c, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			up.Close()
			return
		}
		if s.stalled.Load() {
			continue
		}
		if _, err := up.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (s *stallingSocket) stall() { s.stalled.Store(true) }

// backendThrough returns a backend whose requests go through sock.
func backendThrough(t *testing.T, sock *stallingSocket, timeout time.Duration) *Backend {
	t.Helper()
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	b, err := New(context.Background(), Options{Host: "unix://" + sock.path, RequestTimeout: timeout, Logger: slog.New(slog.NewTextHandler(w, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAStalledDaemonFailsReadsDeploysAndHistoryWithinTheRequestTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	sock := newStallingSocket(t, swarmtest.Client(t).DaemonHost())
	b := backendThrough(t, sock, timeout)
	stack := swarmtest.Name(t, "stall")
	swarmtest.Cleanup(t, stack)
	if _, err := b.ReadStacks(context.Background(), []string{stack}); err != nil {
		t.Fatalf("read through the proxy before the stall: %v", err)
	}
	manifest := render(t, stack, fixture{})

	sock.stall()
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"ReadStacks", func(ctx context.Context) error {
			_, err := b.ReadStacks(ctx, []string{stack})
			return err
		}},
		{"DeployStack", func(ctx context.Context) error {
			_, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: manifest.Manifest, Secrets: manifest.Secrets})
			return err
		}},
		{"Releases", func(ctx context.Context) error {
			_, err := b.Releases(ctx, stack)
			return err
		}},
	}
	for _, c := range calls {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- c.call(context.Background()) }()
		select {
		case err := <-done:
			took := time.Since(start)
			if err == nil {
				t.Errorf("%s succeeded against a stalled daemon", c.name)
				continue
			}
			if !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "within 1s") {
				t.Errorf("%s: the error does not say the daemon did not answer in time: %v", c.name, err)
			}
			t.Logf("%s failed after %s: %v", c.name, took.Round(time.Millisecond), err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s still waiting on a stalled daemon after 20s", c.name)
		}
	}
}

func TestTheEventStreamIsNotCutAtTheRequestTimeout(t *testing.T) {
	t.Parallel()
	sock := newStallingSocket(t, swarmtest.Client(t).DaemonHost())
	b := backendThrough(t, sock, 500*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := b.Client().Events(ctx, client.EventsListOptions{}).Err
	select {
	case err := <-errs:
		t.Fatalf("the event stream ended after less than 2s: %v", err)
	case <-time.After(2 * time.Second):
	}
}
