package client

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/events"
)

// maxBackoff bounds the delay between reconnects of an event stream.
const maxBackoff = 30 * time.Second

// Events streams events after lastID (0: only new ones) until ctx ends, then
// closes the channel. A dropped connection, or a server that cut the client
// off for falling behind, is reconnected with the last id received, so
// nothing still held by the server is missed; a Gap event says something
// was. The first connection's error is returned; later ones are retried
// with backoff, except authentication failures, which close the channel.
func (c *Client) Events(ctx context.Context, lastID uint64) (<-chan events.Event, error) {
	return c.AppEvents(ctx, "", lastID)
}

// AppEvents is Events for one application's events only.
func (c *Client) AppEvents(ctx context.Context, app string, lastID uint64) (<-chan events.Event, error) {
	s := &stream{c: c, app: app, lastID: lastID, retry: time.Second}
	resp, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan events.Event, 64)
	go s.run(ctx, resp, out)
	return out, nil
}

type stream struct {
	c      *Client
	app    string
	lastID uint64
	retry  time.Duration
}

func (s *stream) connect(ctx context.Context) (*http.Response, error) {
	q := url.Values{}
	if s.app != "" {
		q.Set("app", s.app)
	}
	req, err := s.c.newRequest(ctx, http.MethodGet, "/api/v1/events", q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(s.lastID, 10))
	}
	return s.c.send(req)
}

func (s *stream) run(ctx context.Context, resp *http.Response, out chan<- events.Event) {
	defer close(out)
	backoff := s.retry
	for {
		delivered, lagged := s.read(ctx, resp, out)
		resp.Body.Close()
		if delivered {
			backoff = s.retry
		}
		// A client cut off for lagging resumes at once: the server is fine,
		// and waiting would only let the ring move on without it.
		wait := backoff
		if lagged {
			wait = 0
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			var err error
			resp, err = s.connect(ctx)
			if err == nil {
				break
			}
			if IsStatus(err, http.StatusUnauthorized) || IsStatus(err, http.StatusForbidden) {
				return
			}
			backoff = min(backoff*2, maxBackoff)
			wait = backoff
		}
	}
}

// read forwards one connection's events until it ends, and reports whether
// it delivered any and whether it ended on a Lagged marker, which is not
// forwarded: run resumes from its id instead.
func (s *stream) read(ctx context.Context, resp *http.Response, out chan<- events.Event) (delivered, lagged bool) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, typ string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				typ = value
			case "data":
				data = append(data, value)
			case "retry":
				if d, ok := parseRetry(value); ok {
					s.retry = d
				}
			}
			continue
		}
		// A blank line dispatches the frame.
		if len(data) == 0 {
			id, typ = "", ""
			continue
		}
		var e events.Event
		err := json.Unmarshal([]byte(strings.Join(data, "\n")), &e)
		data = data[:0]
		if n, perr := strconv.ParseUint(id, 10, 64); perr == nil && id != "" {
			s.lastID = n
		}
		if err != nil {
			id, typ = "", ""
			continue
		}
		if e.Type == "" {
			e.Type = events.Type(typ)
		}
		id, typ = "", ""
		if e.Type == events.Lagged {
			return delivered, true
		}
		select {
		case out <- e:
			delivered = true
		case <-ctx.Done():
			return delivered, false
		}
	}
	// The connection ended (sc.Err says how); run decides what next.
	return delivered, false
}
