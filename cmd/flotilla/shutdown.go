package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/forgepost"
	"github.com/flotilla-gitops/flotilla/lease"
	"github.com/flotilla-gitops/flotilla/notify"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// validate checks the controller flags that need more than their type.
func (o *controllerOptions) validate() error {
	if o.shutdownTimeout <= 0 {
		return usageError{fmt.Errorf("--shutdown-timeout must be positive, not %s", o.shutdownTimeout)}
	}
	for name, d := range map[string]time.Duration{
		"--http-read-timeout": o.http.read, "--http-write-timeout": o.http.write, "--http-idle-timeout": o.http.idle,
	} {
		if d < 0 {
			return usageError{fmt.Errorf("%s must be 0 (none) or positive, not %s", name, d)}
		}
	}
	for name, d := range map[string]time.Duration{
		"--swarm-read-timeout": o.swarmReadTimeout, "--orphan-sweep-timeout": o.orphanSweepTimeout,
	} {
		if d <= 0 {
			return usageError{fmt.Errorf("%s must be positive, not %s", name, d)}
		}
	}
	if o.mcp.AllowWrites && !o.mcp.Enabled {
		return usageError{errors.New("--mcp-allow-writes needs --mcp")}
	}
	if o.ha {
		if o.once {
			return usageError{fmt.Errorf("--ha and --once do not go together: a single pass has no one to hand over to")}
		}
		if o.leaseDuration < 100*time.Millisecond {
			return usageError{fmt.Errorf("--lease-duration must be at least 100ms, not %s", o.leaseDuration)}
		}
		if o.haID == "" {
			o.haID = defaultHAID()
		}
	}
	for name, n := range map[string]int{"--queue-limit": o.queueLimit, "--max-concurrent-passes": o.maxPasses} {
		if n < 1 {
			return usageError{fmt.Errorf("%s must be 1 or more, not %d", name, n)}
		}
	}
	return nil
}

// runner is the long-running controller: the reconciler, the applications
// file watcher, the notifier and, with --listen, the API.
type runner struct {
	opts     *controllerOptions
	ctl      *reconcile.Controller
	policy   *access.Policy // the applications file's projects
	reloader *reloader      // keeps ctl's applications in step with the file
	notifier *notify.Dispatcher
	poster   *forgepost.Poster // forge feedback, fed by the same events
	broker   *events.Broker
	log      *slog.Logger
	apiLog   *slog.Logger // for the HTTP server's own errors
	// lease, with --ha, decides when passes run (leading.go); nil runs
	// them always.
	lease *lease.Lease
	// handler builds the API; stopping closes when the stop begins. Nil
	// without --listen.
	handler func(stopping <-chan struct{}) http.Handler
}

// run serves until ctx ends (SIGTERM or SIGINT) or the API fails, then
// stops within --shutdown-timeout:
//
//   - no new pass starts, and a pass in flight ends at its next step
//     boundary (a step that writes finishes first);
//   - the API stops accepting, ends its event streams and waited syncs, and
//     lets the other requests finish;
//   - the notifications of the last passes go out.
//
// Past the timeout it returns at once with exit status 1, after logging
// what was still running; nothing then waits for the stragglers.
func (r *runner) run(ctx context.Context) error {
	o := r.opts
	var srv *http.Server
	served := make(chan error, 1)
	stopping := make(chan struct{})
	if r.handler != nil {
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return fmt.Errorf("--listen %s: %w", o.listen, err)
		}
		srv = api.NewServer(r.handler(stopping), api.Timeouts{Read: o.http.read, Write: o.http.write, Idle: o.http.idle}, r.apiLog)
		go func() {
			var err error
			if o.tlsCert != "" {
				err = srv.ServeTLS(ln, o.tlsCert, o.tlsKey)
			} else {
				err = srv.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				served <- err
			}
		}()
		r.log.Info("api listening", "addr", ln.Addr().String(), "tls", o.tlsCert != "")
	}

	// Passes and the watcher stop with ctx; notifications outlive it until
	// the last pass's events are sent.
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	notifyCtx, stopNotify := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNotify()
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		r.notifier.Run(notifyCtx, r.broker)
	}()
	if r.poster != nil {
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			r.poster.Run(notifyCtx, r.broker)
		}()
		defer func() { stopNotify(); <-posted }()
	}
	go r.reloader.watch(work)
	ran := make(chan error, 1)
	go func() { ran <- r.runPasses(work) }()

	var failed error
	select {
	case <-ctx.Done():
		r.log.Info("stopping: no new pass starts, passes in flight end at their next step",
			"cause", context.Cause(ctx).Error(), "timeout", o.shutdownTimeout)
	case err := <-served:
		failed = fmt.Errorf("api: %w", err)
		r.log.Error("api failed; stopping the controller", "error", err)
	case err := <-ran:
		ran = nil
		failed = err
		r.log.Error("reconciler stopped on its own; stopping the controller", "error", err)
	}

	began := time.Now()
	deadline, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	stopWork()
	close(stopping)
	shut := make(chan error, 1)
	if srv != nil {
		go func() { shut <- srv.Shutdown(deadline) }()
	} else {
		shut <- nil
	}

	var unfinished []string
	if ran != nil {
		select {
		case err := <-ran:
			if failed == nil {
				failed = err
			}
		case <-deadline.Done():
			unfinished = append(unfinished, "passes of "+strings.Join(r.ctl.Running(), ", "))
		}
	}
	if len(unfinished) == 0 {
		// Only now can no pass publish anything more. A sink whose
		// receiver is down would retry until the deadline and turn every
		// stop into a failed one, so it gets half of what is left, and
		// what it could not send is logged, not counted as unfinished.
		left := time.Until(began.Add(o.shutdownTimeout))
		drain, cancelDrain := context.WithTimeout(deadline, left/2)
		if err := r.notifier.Drain(drain, r.broker); err != nil {
			r.log.Warn("stopping without sending every notification", "error", err)
		}
		cancelDrain()
	}
	stopNotify()
	select {
	case err := <-shut:
		if err != nil {
			unfinished = append(unfinished, "api requests still open")
		}
	case <-deadline.Done():
		unfinished = append(unfinished, "api requests still open")
	}
	if len(unfinished) == 0 {
		select {
		case <-notified:
		case <-deadline.Done():
			unfinished = append(unfinished, "notification sinks still sending")
		}
	}
	if len(unfinished) > 0 {
		r.log.Error("shutdown timed out; exiting with work unfinished",
			"timeout", o.shutdownTimeout, "still_running", strings.Join(unfinished, "; "))
		return exitError{exitFailed}
	}
	r.log.Info("controller stopped", "took", time.Since(began).Round(time.Millisecond))
	return failed
}
