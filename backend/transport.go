package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts the requests a Backend sent to the daemon. Tests and
// benchmarks read it to prove that a steady-state pass writes nothing.
type Stats struct {
	// Requests counts requests by operation ("service.list",
	// "service.update", "config.create", ...).
	Requests map[string]int
	// Writes counts requests that may change the swarm (any method other
	// than GET and HEAD), refused ones included.
	Writes int
	// Conflicts counts service writes refused because the version they
	// carried was out of date, each of which was retried from a fresh read.
	Conflicts int
	// Gated counts writes the WriteGate refused; they never reached the
	// daemon and are in neither Requests nor Writes.
	Gated int
}

// Total is the number of requests of every kind.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Sub returns what happened between an earlier snapshot and s.
func (s Stats) Sub(earlier Stats) Stats {
	out := Stats{
		Requests:  make(map[string]int),
		Writes:    s.Writes - earlier.Writes,
		Conflicts: s.Conflicts - earlier.Conflicts,
		Gated:     s.Gated - earlier.Gated,
	}
	for k, v := range s.Requests {
		if d := v - earlier.Requests[k]; d != 0 {
			out.Requests[k] = d
		}
	}
	return out
}

// counter is shared by a Backend and every per-application copy of it, so
// Stats covers all of them.
type counter struct {
	mu        sync.Mutex
	stats     Stats
	onRequest func(op string)
	gate      WriteGate
	// negotiated is set once the daemon has answered a ping with its API
	// version, which is when the client settles on the version it speaks;
	// asking again would cost a request per conversion and change nothing.
	negotiated atomic.Bool
	// negotiating serialises negotiate.
	negotiating sync.Mutex
}

func newCounter() *counter {
	return &counter{stats: Stats{Requests: make(map[string]int)}}
}

func (c *counter) request(op string, write bool) {
	c.mu.Lock()
	c.stats.Requests[op]++
	if write {
		c.stats.Writes++
	}
	c.mu.Unlock()
	if c.onRequest != nil {
		c.onRequest(op)
	}
}

func (c *counter) conflict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Conflicts++
}

func (c *counter) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Requests = maps.Clone(c.stats.Requests)
	return s
}

// countingTransport counts every request before handing it on. Counting at
// the HTTP layer rather than at each call site means no request can be
// missed, including the client's own version negotiation.
type countingTransport struct {
	next http.RoundTripper
	c    *counter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	op := operation(req.Method, req.URL.Path)
	var cancel context.CancelFunc
	if write && t.c.gate != nil {
		r, err := gateWrite(req, op, t.c.gate)
		if err != nil {
			t.c.mu.Lock()
			t.c.stats.Gated++
			t.c.mu.Unlock()
			return nil, err
		}
		req, cancel = r.req, r.cancel
	}
	t.c.request(op, write)
	resp, err := t.next.RoundTrip(req)
	if cancel != nil {
		if err != nil {
			cancel()
		} else {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		}
	}
	if op == "ping" && err == nil && resp.Header.Get("API-Version") != "" {
		t.c.negotiated.Store(true)
	}
	if err == nil {
		return takeListBody(req, resp)
	}
	return resp, err
}

// WriteGate decides whether this controller may change the swarm now. A
// leader lease implements it: Permit answers with the epoch the lease is
// held in and the time writing must be done by, or an error saying who
// writes instead.
//
// The gate is asked at the HTTP layer, for every request that is not a GET
// or HEAD, so no write of any step of any pass, present or future, can
// reach the daemon past it.
type WriteGate interface {
	Permit() (epoch uint64, until time.Time, err error)
}

// ErrWriteRefused marks a write the WriteGate did not let through.
var ErrWriteRefused = errors.New("write refused")

type gated struct {
	req    *http.Request
	cancel context.CancelFunc
}

// gateWrite asks the gate about one write. A write started under one epoch
// (see withEpoch) is refused under any other, even one this controller won
// back: its labels already name the old epoch. A permitted write must be
// answered by the time the lease says writing stops, so its context ends
// then.
func gateWrite(req *http.Request, op string, g WriteGate) (gated, error) {
	epoch, until, err := g.Permit()
	if err != nil {
		return gated{}, fmt.Errorf("%w: %s: %w", ErrWriteRefused, op, err)
	}
	if e, ok := req.Context().Value(epochKey{}).(uint64); ok && e != epoch {
		return gated{}, fmt.Errorf("%w: %s: started in leader epoch %d, but the lease is now in epoch %d", ErrWriteRefused, op, e, epoch)
	}
	ctx, cancel := context.WithDeadline(req.Context(), until)
	return gated{req: req.WithContext(ctx), cancel: cancel}, nil
}

type epochKey struct{}

// permitWrites asks the gate once for a whole operation (a deploy, a
// record) and returns a context that ties all of its writes to that epoch,
// and the epoch to stamp on what it writes (0 without a gate: no stamp).
func (b *Backend) permitWrites(ctx context.Context) (context.Context, uint64, error) {
	if b.gate == nil {
		return ctx, 0, nil
	}
	epoch, _, err := b.gate.Permit()
	if err != nil {
		return ctx, 0, fmt.Errorf("%w: %w", ErrWriteRefused, err)
	}
	return context.WithValue(ctx, epochKey{}, epoch), epoch, nil
}

// deadlineTransport gives every request to the daemon a deadline, from the
// moment it is sent until its body is closed. A daemon, or a socket proxy in
// front of one, that accepts a request and never answers would otherwise
// hold the pass that asked for ever, and with it every application whose
// swarm read waits on it. Counting every request at the HTTP layer is also
// why this is the one place no request can slip past.
type deadlineTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := operation(req.Method, req.URL.Path)
	if streaming(op) {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if req.Context().Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("docker daemon did not answer %s within %s: %w", op, t.timeout, context.DeadlineExceeded)
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// streaming reports whether op answers for as long as it is followed (events,
// logs, attach, wait) or moves image layers, none of which a per-request
// deadline fits. The backend makes none of these today; the exemption keeps
// a future one from being cut at the deadline by surprise.
func streaming(op string) bool {
	switch op {
	case "events", "image.create", "image.push", "build.post":
		return true
	}
	for _, s := range []string{".logs", ".attach", ".wait"} {
		if strings.HasSuffix(op, s) {
			return true
		}
	}
	return false
}

// cancelOnClose ends a request's deadline when its body is closed, so that
// reading the body stays within it and closing frees its timer.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// operation names a daemon request by object kind and verb, from its method
// and path: GET /v1.41/services is "service.list", POST
// /v1.41/services/ID/update is "service.update".
func operation(method, path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) > 0 && len(parts[0]) > 1 && parts[0][0] == 'v' && strings.ContainsAny(parts[0][1:2], "0123456789") {
		parts = parts[1:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return "other"
	}
	kind := strings.TrimSuffix(parts[0], "s")
	switch parts[0] {
	case "_ping":
		return "ping"
	case "info", "version", "events":
		return parts[0]
	case "distribution":
		return "distribution.inspect"
	}
	switch {
	case len(parts) == 1 && method == http.MethodGet:
		return kind + ".list"
	case len(parts) == 2 && parts[1] == "create" && method == http.MethodPost:
		return kind + ".create"
	case len(parts) == 2 && method == http.MethodGet:
		return kind + ".inspect"
	case len(parts) == 2 && method == http.MethodDelete:
		return kind + ".remove"
	case len(parts) >= 3:
		return kind + "." + parts[len(parts)-1]
	default:
		return kind + "." + strings.ToLower(method)
	}
}
