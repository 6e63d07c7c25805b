package source

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"
)

// go-git's SSH transport dials and shakes hands without a context: a server
// that accepts the connection and never sends its banner would hold a fetch,
// and the repository's lock, for ever. Its one seam there is the proxy
// dialer it looks up by URL scheme, so an SSH remote is reached through a
// "proxy" of this scheme that dials directly (or through the environment's
// ALL_PROXY, as go-git would) and sets the call's deadline on the connection
// itself. Once the session is up the context bounds it too; the connection
// deadline is what bounds the handshake.
const deadlineScheme = "flotilla-deadline"

func init() {
	proxy.RegisterDialerType(deadlineScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		ns, err := strconv.ParseInt(u.Query().Get("until"), 10, 64)
		if err != nil {
			return nil, errors.New("deadline dialer: no deadline")
		}
		return deadlineDialer{until: time.Unix(0, ns)}, nil
	})
}

// deadlineDialer dials connections that fail every read and write after
// until.
type deadlineDialer struct{ until time.Time }

func (d deadlineDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d deadlineDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithDeadline(ctx, d.until)
	defer cancel()
	conn, err := proxy.Dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(d.until); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// connDeadline returns the proxy options that carry ctx's deadline to the
// connection of an SSH remote, and none for any other protocol: HTTP
// honours the context itself and would take the options for a real proxy.
func connDeadline(ctx context.Context, loc location) transport.ProxyOptions {
	until, ok := ctx.Deadline()
	if !ok || loc.protocol != "ssh" {
		return transport.ProxyOptions{}
	}
	return transport.ProxyOptions{URL: deadlineScheme + "://deadline/?until=" + strconv.FormatInt(until.UnixNano(), 10)}
}
