package api

import (
	"context"
	"encoding/json"
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
