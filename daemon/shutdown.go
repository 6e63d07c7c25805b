package daemon

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

// runner is the long-running controller: the reconciler, the applications
// file watcher, the notifier and, with --listen, the API.
type runner struct {
	opts     *Options
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
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("--listen %s: %w", o.Listen, err)
		}
		srv = api.NewServer(r.handler(stopping), api.Timeouts{Read: o.HTTP.Read, Write: o.HTTP.Write, Idle: o.HTTP.Idle}, r.apiLog)
		go func() {
			var err error
			if o.TLSCert != "" {
				err = srv.ServeTLS(ln, o.TLSCert, o.TLSKey)
			} else {
				err = srv.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				served <- err
			}
		}()
		r.log.Info("api listening", "addr", ln.Addr().String(), "tls", o.TLSCert != "")
	}

	// Passes and the watcher stop when the stop begins, not with ctx
	// itself: Stopping must close first, or a waited sync answered by its
	// pass's end could reach the API before the API knows it is stopping
	// and be told 200 Failed rather than 503 (seen in CI). Notifications
	// outlive both until the last pass's events are sent.
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
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
			"cause", context.Cause(ctx).Error(), "timeout", o.ShutdownTimeout)
	case err := <-served:
		failed = fmt.Errorf("api: %w", err)
		r.log.Error("api failed; stopping the controller", "error", err)
	case err := <-ran:
		ran = nil
		failed = err
		r.log.Error("reconciler stopped on its own; stopping the controller", "error", err)
	}

	began := time.Now()
	deadline, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	close(stopping)
	if failed != nil {
		stopWork(failed)
	} else {
		stopWork(context.Cause(ctx))
	}
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
		left := time.Until(began.Add(o.ShutdownTimeout))
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
			"timeout", o.ShutdownTimeout, "still_running", strings.Join(unfinished, "; "))
		return ErrFailed
	}
	r.log.Info("controller stopped", "took", time.Since(began).Round(time.Millisecond))
	return failed
}
