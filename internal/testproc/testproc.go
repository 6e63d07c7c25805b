// Package testproc runs the real servers tests talk to (Prometheus,
// Traefik, a registry, Vault) as processes for the length of one test:
// their output kept, shown when the test fails, the process killed at
// cleanup, and a readiness wait that stops early when the server dies.
package testproc

import (
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/syncbuf"
)

// Proc is a started server.
type Proc struct {
	name string
	// Logs is what the process wrote to stdout and stderr so far.
	Logs *syncbuf.Buffer
	// Done is closed once the process has exited.
	Done <-chan struct{}
}

// Start starts cmd, named name in messages, for the rest of the test.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	return &Proc{name: name, Logs: logs, Done: done}
}

// WaitHTTP polls url until its answer's status satisfies ready, failing
// the test with the process's output when the process exits first or
// within passes.
func (p *Proc) WaitHTTP(t testing.TB, url string, within time.Duration, ready func(status int) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if ready(resp.StatusCode) {
				return
			}
		}
		select {
		case <-p.Done:
			t.Fatalf("%s exited before it was ready:\n%s", p.name, p.Logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not ready at %s within %s (last: %v):\n%s", p.name, url, within, err, p.Logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// OK is the readiness of a server that answers 200 once it is up.
func OK(status int) bool { return status == http.StatusOK }
