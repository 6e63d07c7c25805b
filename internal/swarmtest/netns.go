package swarmtest

import (
	"fmt"
	"net"
	"os"
	"runtime"

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
	ns := os.Getenv(engineNetNS)
	if ns == "" {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	type result struct {
		l   net.Listener
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
		l, err := net.Listen("tcp", "127.0.0.1:0")
		done <- result{l, err}
	}()
	r := <-done
	return r.l, r.err
}
