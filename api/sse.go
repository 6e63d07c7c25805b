package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/flotilla-gitops/flotilla/events"
)

// retryMillis is the reconnect delay suggested to EventSource clients.
const retryMillis = 2000

// streamEvents serves GET /api/v1/events as Server-Sent Events. A client
// resumes with the Last-Event-ID header (browsers send it on reconnect) or
// ?lastEventId=, and may narrow the stream with ?app=NAME. Each event is
// written as id/event/data lines; an idle stream gets a comment heartbeat.
// A subscriber that falls behind gets a final stream.lagged event carrying
// the id to resume from, and the stream ends.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Events == nil {
		return unsupported("the event stream", "Options.Events")
	}
	last, err := lastEventID(r)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	// Subscribe before the headers go out: a client that sees them may act
	// at once (start a sync, say) and must not miss what that publishes.
	ch, cancel := s.opts.Events.SubscribeFilter(r.Context(), last, events.Filter{App: r.URL.Query().Get("app")})
	defer cancel()
	if err := rc.Flush(); err != nil {
		h.Del("Content-Type")
		return fmt.Errorf("stream events: the response cannot be flushed: %w", err)
	}
	// The stream outlives any write timeout the server sets.
	liftWriteDeadline(w, time.Time{})
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", retryMillis); err != nil {
		return nil
	}
	if rc.Flush() != nil {
		return nil
	}
	beat := time.NewTicker(s.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return nil
			}
			if e.Type == events.AuditRecorded {
				if !s.canReadAudit(r, e.App) {
					continue
				}
			} else if !e.Type.Marker() && !s.canRead(r, e.App) {
				continue
			}
			if hasHookLogs(e) && !s.mayReadHookLogs(r, e.App) {
				e = eventWithoutHookLogs(e)
			}
			if err := writeEvent(w, e); err != nil {
				return nil // the client went away
			}
			if e.Type == events.Lagged {
				_ = rc.Flush()
				return nil
			}
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-s.opts.Stopping:
			// A client's EventSource reconnects after retry:, to the
			// controller that replaces this one.
			_, _ = fmt.Fprint(w, ": controller stopping\n\n")
			_ = rc.Flush()
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// writeEvent writes one SSE frame. JSON has no raw newlines, so data is one
// line.
func writeEvent(w http.ResponseWriter, e events.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
	return err
}

// lastEventID reads where a client wants to resume; 0 means "new events only".
func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest,
			Message: fmt.Sprintf("Last-Event-ID %q is not an event id", v), Err: errors.Unwrap(err)}
	}
	return id, nil
}
