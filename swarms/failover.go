package swarms

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker/cli/cli/connhelper"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/fault"
)

// endpoint is one manager's Docker API: a transport that reaches it and the
// scheme and host its requests are addressed to.
type endpoint struct {
	host   string // as the applications file wrote it
	scheme string // of the request URL: http or https
	addr   string // of the request URL
	rt     http.RoundTripper
}

// failover is the HTTP transport of one swarm's client. Every request goes
// to the manager in use; when that one cannot be reached the next host in
// order is tried, and the first that answers becomes the one in use, so the
// hosts are not asked one by one on every request while a manager is away.
//
// A request moves to another manager only when the one it was sent to
// never saw it: the connection could not be opened, or the request only
// reads. A write whose connection broke mid-way is returned as it failed,
// since only its caller (and Swarm's version check) can tell whether it
// took effect.
type failover struct {
	swarm     string
	endpoints []endpoint
	cur       atomic.Int32
	log       *slog.Logger
}

// DialTimeout bounds the opening of a connection to one manager, so that
// a manager that is gone (a host that drops packets) costs a few seconds
// before the next is tried rather than the whole request deadline.
const DialTimeout = 5 * time.Second

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	start := int(f.cur.Load())
	var errs []error
	for i := range f.endpoints {
		idx := (start + i) % len(f.endpoints)
		ep := &f.endpoints[idx]
		r := req.Clone(req.Context())
		if i > 0 && req.Body != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, errors.Join(append(errs, err)...)
			}
			r.Body = body
		}
		r.URL.Scheme, r.URL.Host, r.Host = ep.scheme, ep.addr, ""
		resp, err := ep.rt.RoundTrip(r)
		if err == nil {
			if idx != start && f.cur.CompareAndSwap(int32(start), int32(idx)) {
				f.log.Warn("swarm manager cannot be reached; using the next host", "swarm", f.swarm,
					"unreachable", redact(f.endpoints[start].host), "host", redact(ep.host))
			}
			return resp, nil
		}
		if req.Context().Err() != nil {
			return nil, err // the caller's own end, as it is
		}
		errs = append(errs, fmt.Errorf("%s: %s", redact(ep.host), describe(err)))
		if !retryable(req, err) {
			break
		}
	}
	return nil, &unreachableError{swarm: f.swarm, err: errors.Join(errs...)}
}

// unreachableError says which hosts of a swarm were tried and how each
// failed. It neither unwraps nor says "connection refused" in so many
// words (see describe): the Docker client replaces an error that does with
// one naming its own host, which for a swarm of several managers is none of
// them.
type unreachableError struct {
	swarm string
	err   error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("swarm %s: %s", e.swarm, strings.ReplaceAll(e.err.Error(), "\n", "; "))
}

// describe says how a request to one host failed, in words the Docker
// client passes on (see unreachableError).
func describe(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused the connection (is the daemon running?)"
	case errors.Is(err, syscall.ENOENT):
		return "no socket there (is the daemon running?)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed the connection before answering"
	case errors.As(err, &ne) && ne.Timeout():
		return "did not answer in time"
	}
	return strings.NewReplacer("connection refused", "refused", "dial unix", "unix socket").Replace(err.Error())
}

// retryable reports whether req may be sent to another manager after err.
func retryable(req *http.Request, err error) bool {
	if req.Body != nil && req.GetBody == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return req.Method == http.MethodGet || req.Method == http.MethodHead
}

// host returns the host in use.
func (f *failover) host() string { return f.endpoints[f.cur.Load()].host }

// newEndpoint makes the transport of one host of swarm s (field names the
// host in the applications file, for errors).
func newEndpoint(s application.Swarm, host string, tlsConf *tls.Config, sshFlags []string) (endpoint, error) {
	u, err := url.Parse(host)
	if err != nil {
		return endpoint{}, err
	}
	d := &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second}
	ep := endpoint{host: host, scheme: "http", rt: tr}
	switch u.Scheme {
	case "unix":
		ep.addr = "docker"
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", u.Path)
		}
	case "tcp":
		ep.addr = u.Host
		tr.DialContext = d.DialContext
		if tlsConf != nil {
			c := tlsConf.Clone()
			c.ServerName = u.Hostname()
			tr.TLSClientConfig = c
			ep.scheme = "https"
		}
	case "ssh":
		h, err := connhelper.GetConnectionHelperWithSSHOpts(host, sshFlags)
		if err != nil {
			return endpoint{}, err
		}
		ep.addr = "docker"
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dctx, cancel := context.WithTimeout(ctx, DialTimeout)
			defer cancel()
			return h.Dialer(dctx, network, addr)
		}
	default:
		return endpoint{}, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	return ep, nil
}

// loadTLS reads a swarm's TLS files. A problem names the applications
// file's field and the file that could not be used.
func loadTLS(file string, i int, t *application.TLS) (*tls.Config, error) {
	field := func(name string) string { return fmt.Sprintf("swarms[%d].tls.%s", i, name) }
	bad := func(name string, err error) error {
		return &fault.Error{File: file, Field: field(name), Err: err}
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, bad("caFile", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, bad("caFile", fmt.Errorf("%s holds no PEM certificate", t.CAFile))
	}
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if t.CertFile != "" {
		for _, f := range []struct{ name, path string }{{"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
			if _, err := os.Stat(f.path); err != nil {
				return nil, bad(f.name, err)
			}
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, bad("certFile", fmt.Errorf("%s with %s: %w", t.CertFile, t.KeyFile, err))
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// redact drops a password from a host, should one have got past
// validation, so that logs and the API never carry it.
func redact(host string) string {
	u, err := url.Parse(host)
	if err != nil {
		return "(unparseable host)"
	}
	if _, ok := u.User.Password(); !ok {
		return host
	}
	u.User = url.User(u.User.Username())
	return u.String()
}
