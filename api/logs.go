package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Bounds of GET …/logs.
const (
	DefaultLogTail = 100
	MaxLogTail     = 10000
	// logHeaderWait is how long the answer waits for a first line before
	// committing to 200, so that an unknown service is still a 404 while a
	// quiet followed stream shows its headers soon.
	logHeaderWait = 500 * time.Millisecond
)

// getLogs serves GET /api/v1/applications/{name}/logs: ?service=, ?task=,
// ?tail= (default DefaultLogTail, at most MaxLogTail, per service),
// ?follow=1 and ?timestamps=1. It streams one JSON LogLine a line, flushed
// as each arrives, and stops reading the daemon once the client goes away or
// the controller stops.
func (s *server) getLogs(w http.ResponseWriter, r *http.Request) error {
	o, err := logOptions(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	blank, masking, err := logMasking(ctx, s.ctl, r.PathValue("name"))
	if err != nil {
		return err
	}
	if s.opts.Stopping != nil {
		go func() {
			select {
			case <-s.opts.Stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		h := w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		h.Set(LogMaskingHeader, masking)
		w.WriteHeader(http.StatusOK)
		if o.Follow {
			liftWriteDeadline(w, time.Time{})
		}
		_ = rc.Flush()
	}
	enc := json.NewEncoder(w)
	done := make(chan error, 1)
	go func() {
		done <- logs(ctx, s.ctl, r.PathValue("name"), o, func(l LogLine) error {
			mu.Lock()
			defer mu.Unlock()
			start()
			l.Text = blank(l.Text)
			if err := enc.Encode(l); err != nil {
				return err
			}
			return rc.Flush()
		})
	}()
	t := time.NewTimer(logHeaderWait)
	defer t.Stop()
	select {
	case err = <-done:
	case <-t.C:
		mu.Lock()
		start()
		mu.Unlock()
		err = <-done
	}
	mu.Lock()
	defer mu.Unlock()
	if err != nil && !started {
		return err
	}
	start()
	if err != nil && ctx.Err() == nil {
		e := classify(err)
		s.log.Warn("log stream ended early", "app", r.PathValue("name"), "error", e.Message)
		_ = enc.Encode(LogLine{Error: e.Message})
	}
	return nil
}

// LogMaskingHeader says on every logs answer whose secret values it blanks
// ("secrets of revision 3 (commit abc1234) blanked") or that it blanks none
// and why.
const LogMaskingHeader = "X-Flotilla-Log-Masking"

// logMasking returns the function that blanks secret values in each line
// and the LogMaskingHeader value. When the controller cannot reproduce the
// values (its repository unreachable, the commit or key gone, the old value
// of a store without versions not seen by this controller) the answer is
// 503 for every caller: the logs may hold those values, and no role may read
// secrets through the API, so an outage of git must not turn masking off.
// Secrets the stack declares external are not known to the controller and
// are never blanked.
func logMasking(ctx context.Context, c Controller, app string) (func(string) string, string, error) {
	blank, from, ok, err := logMask(ctx, c, app)
	switch {
	case !ok:
		return func(s string) string { return s }, "off: the controller does not implement api.LogMasker", nil
	case err != nil:
		if e := classify(err); e.Status == http.StatusNotFound {
			return nil, "", err
		}
		return nil, "", &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Err: err, Message: fmt.Sprintf(
			"service logs are withheld: the application's secret values could not be reproduced to blank them in its logs (%v); they are served again once the controller can reproduce every recorded revision's values (a value a store without versions no longer gives: once the revision that used it leaves the history)",
			err)}
	}
	return blank, "secrets of " + from + " blanked; external secrets are not", nil
}

func logOptions(r *http.Request) (LogOptions, error) {
	q := r.URL.Query()
	o := LogOptions{Service: q.Get("service"), Task: q.Get("task"), Tail: DefaultLogTail}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxLogTail {
			return o, errorf(http.StatusBadRequest, CodeBadRequest, "tail %q is not a number of lines from 0 to %d", v, MaxLogTail)
		}
		o.Tail = n
	}
	for _, f := range []struct {
		name string
		to   *bool
	}{{"follow", &o.Follow}, {"timestamps", &o.Timestamps}} {
		if v := q.Get(f.name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, errorf(http.StatusBadRequest, CodeBadRequest, "%s %q is not a boolean (1, 0, true, false)", f.name, v)
			}
			*f.to = b
		}
	}
	return o, nil
}
