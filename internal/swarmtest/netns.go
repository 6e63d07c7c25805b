package swarmtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// engineNetNS names the network namespace the engine under test runs in,
// set by scripts/engine-up.sh; empty for the main daemon, which shares
// the test's own.
const engineNetNS = "FLOTILLA_ENGINE_NETNS"

// ListenTCP listens on a loopback port that containers on the daemon's
// host network reach: in the test's own namespace for the main daemon, in
// the engine's namespace for an engine started by engine-up.sh. A socket
// stays in the namespace it was made in, so the listener is served from
// any goroutine afterwards.
func ListenTCP() (net.Listener, error) {
	return inEngineNetNS(func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
}

// Command is exec.Command run where the daemon's host network is: in the
// engine's namespace (through nsenter) for an engine started by
// engine-up.sh, as is for the main daemon. A CLI that reaches a port
// published in host mode needs it.
func Command(name string, args ...string) *exec.Cmd {
	ns := os.Getenv(engineNetNS)
	if ns == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("nsenter", append([]string{"--net=" + ns, "--", name}, args...)...)
}

// HTTPClient is an HTTP client whose connections are made where the
// daemon's host network is (see ListenTCP), for ports published in host
// mode.
func HTTPClient(timeout time.Duration) *http.Client {
	if os.Getenv(engineNetNS) == "" {
		return &http.Client{Timeout: timeout}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return inEngineNetNS(func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		})
	}
	return &http.Client{Timeout: timeout, Transport: tr}
}

// inEngineNetNS runs open in the engine's network namespace when there is
// one; a socket stays in the namespace it was made in.
func inEngineNetNS[T any](open func() (T, error)) (T, error) {
	ns := os.Getenv(engineNetNS)
	if ns == "" {
		return open()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread is left locked: it ends with the goroutine instead of
		// going back to the scheduler in another namespace.
		runtime.LockOSThread()
		f, err := os.Open(ns)
		if err != nil {
			done <- result{err: fmt.Errorf("engine network namespace: %w", err)}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("entering %s: %w", ns, err)}
			return
		}
		v, err := open()
		done <- result{v, err}
	}()
	r := <-done
	return r.v, r.err
}
