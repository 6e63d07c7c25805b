package swarms

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/fault"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// unixServer serves h on a unix socket under dir and returns its host URL.
func unixServer(t *testing.T, dir, name string, h http.Handler) string {
	t.Helper()
	path := filepath.Join(dir, name)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "unix://" + path
}

func newFailover(t *testing.T, hosts ...string) *failover {
	t.Helper()
	fo := &failover{swarm: "eu", log: quiet}
	for _, h := range hosts {
		ep, err := newEndpoint(application.Swarm{Name: "eu"}, h, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		fo.endpoints = append(fo.endpoints, ep)
	}
	return fo
}

func TestFailover_theNextHostServesWhenTheCurrentCannotBeReachedAndStaysInUse(t *testing.T) {
	dir := t.TempDir()
	var served atomic.Int32
	gone := "unix://" + filepath.Join(dir, "gone.sock")
	live := unixServer(t, dir, "live.sock", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte(r.Method+" "+r.URL.Path+" "), body...))
	}))
	fo := newFailover(t, gone, live)
	hc := &http.Client{Transport: fo}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, err := http.NewRequestWithContext(t.Context(), method, "http://flotilla-swarm-eu:2375/v1.41/services", strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := method + ` /v1.41/services {"a":1}`; string(b) != want {
			t.Errorf("%s answered %q, want %q", method, b, want)
		}
	}
	if fo.host() != live {
		t.Errorf("host in use %q, want %q", fo.host(), live)
	}
	if served.Load() != 2 {
		t.Errorf("served %d, want 2", served.Load())
	}
}

func TestFailover_aWriteWhoseConnectionBrokeAfterSendingIsNotSentToAnotherManager(t *testing.T) {
	dir := t.TempDir()
	// The first manager accepts the connection and drops it without an
	// answer: the write may have taken effect there.
	path := filepath.Join(dir, "drop.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			c.Close()
		}
	}()
	var second atomic.Int32
	live := unixServer(t, dir, "live.sock", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { second.Add(1) }))
	fo := newFailover(t, "unix://"+path, live)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x/v1.41/services/create", strings.NewReader("{}"))
	if _, err := (&http.Client{Transport: fo}).Do(req); err == nil {
		t.Fatal("a write whose connection broke succeeded")
	}
	if second.Load() != 0 {
		t.Error("the write was sent again to the next manager")
	}
	if fo.host() != "unix://"+path {
		t.Errorf("host in use moved to %q", fo.host())
	}
	// A read is safe to send again.
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, "http://x/v1.41/services", nil)
	resp, err := (&http.Client{Transport: fo}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if second.Load() != 1 || fo.host() != live {
		t.Errorf("a read after the broken connection: served %d, host %q", second.Load(), fo.host())
	}
}

func TestFailover_noHostAnsweringNamesEveryHost(t *testing.T) {
	dir := t.TempDir()
	a, b := "unix://"+filepath.Join(dir, "a.sock"), "unix://"+filepath.Join(dir, "b.sock")
	fo := newFailover(t, a, b)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://x/_ping", nil)
	_, err := fo.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "swarm eu") || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Fatalf("err %v, want both hosts named", err)
	}
}

func TestNew_aMissingOrBadTLSFileIsNamedWithItsField(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tls   application.TLS
		field string
		msg   string
	}{
		{"missing ca", application.TLS{CAFile: filepath.Join(dir, "nope.pem")}, "swarms[1].tls.caFile", "nope.pem"},
		{"not PEM", application.TLS{CAFile: notPEM}, "swarms[1].tls.caFile", "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defs := []application.Swarm{
				{Name: "a", Hosts: []string{"tcp://127.0.0.1:1"}},
				{Name: "b", Hosts: []string{"tcp://127.0.0.1:2"}, TLS: &tc.tls},
			}
			_, err := New(context.Background(), defs, Options{File: "apps.yaml", Logger: quiet})
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.File != "apps.yaml" || fe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want field %s and %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestNew_eachSwarmHasItsOwnBackendAndTheLocalOneIsKept(t *testing.T) {
	defs := []application.Swarm{
		{Name: "eu", Hosts: []string{"tcp://127.0.0.1:1", "ssh://deploy@lab.example.com"}},
		{Name: "lab", Hosts: []string{"unix:///run/lab.sock"}},
	}
	r, err := New(context.Background(), defs, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	bs := r.Backends()
	if len(bs) != 2 || bs["eu"] == nil || bs["lab"] == nil || bs["eu"] == bs["lab"] {
		t.Fatalf("backends %v", bs)
	}
	if h, _ := r.Host("eu"); h != "tcp://127.0.0.1:1" {
		t.Errorf("eu starts on %q, want hosts[0]", h)
	}
	st := r.Check(context.Background())
	if len(st) != 2 || st[0].Name != "eu" || st[0].Reachable || !strings.HasPrefix(st[0].Error, "swarm eu: tcp://127.0.0.1:1: refused the connection") {
		t.Fatalf("check of swarms nobody serves: %+v, want the error to name the host tried", st)
	}
}
