package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// counts is what a tool sent to the daemon: every request, and those that
// may change the swarm (any method but GET and HEAD), and the bytes of the
// daemon's answers (bodies) it read.
type counts struct {
	Requests, Writes int
	Bytes            int64
}

func (c counts) add(d counts) counts {
	return counts{Requests: c.Requests + d.Requests, Writes: c.Writes + d.Writes, Bytes: c.Bytes + d.Bytes}
}

// countingWriter counts the body bytes the proxy passes back to the client.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// Flush keeps streamed answers (events, logs) streaming through the proxy.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// proxy sits on a unix socket in front of the daemon and counts every
// request that passes, whichever client sent it, so Flotilla and the docker
// CLI are counted the same way.
type proxy struct {
	socket string
	srv    *http.Server

	mu sync.Mutex
	c  counts
	// onUpdate, when set, is called with the time each service update was
	// answered.
	onUpdate func(time.Time)
}

func startProxy(socket, daemon string) (*proxy, error) {
	_ = os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	target, _ := url.Parse("http://docker")
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", daemon)
	}}
	p := &proxy{socket: socket}
	p.srv = &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		p.mu.Lock()
		p.c.Requests++
		if write {
			p.c.Writes++
		}
		p.mu.Unlock()
		cw := &countingWriter{ResponseWriter: w}
		rp.ServeHTTP(cw, r)
		p.mu.Lock()
		p.c.Bytes += cw.n
		p.mu.Unlock()
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v") && strings.Contains(r.URL.Path, "/services/") && strings.HasSuffix(r.URL.Path, "/update") {
			p.mu.Lock()
			f := p.onUpdate
			p.mu.Unlock()
			if f != nil {
				f(time.Now())
			}
		}
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// take returns the counts since the last take and starts again from zero.
func (p *proxy) take() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.c
	p.c = counts{}
	return c
}

func (p *proxy) setOnUpdate(f func(time.Time)) {
	p.mu.Lock()
	p.onUpdate = f
	p.mu.Unlock()
}

func (p *proxy) close() {
	_ = p.srv.Close()
	_ = os.Remove(p.socket)
}
