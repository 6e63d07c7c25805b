package api

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ipLimiter is a token bucket per source address. Webhook routes take no
// token, so this is what keeps one sender from making the controller hash
// and parse bodies as fast as it can send them.
//
// The source is the connection's peer address: X-Forwarded-For is whatever
// the sender wants it to be. Behind a reverse proxy every delivery shares the
// proxy's address, and the limit is then one for all forges together.
type ipLimiter struct {
	every rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// maxTrackedSources bounds the limiter's memory; past it, sources idle long
// enough to have a full bucket again are forgotten, which loses nothing.
const maxTrackedSources = 10_000

func newIPLimiter(every rate.Limit, burst int, now func() time.Time) *ipLimiter {
	return &ipLimiter{every: every, burst: burst, now: now, buckets: map[string]*bucket{}}
}

// allow takes a token for r's source, or says how long until one is there.
func (l *ipLimiter) allow(r *http.Request) (bool, time.Duration) {
	src := sourceOf(r)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[src]
	if !ok {
		if len(l.buckets) >= maxTrackedSources {
			l.forgetIdle(now)
		}
		b = &bucket{lim: rate.NewLimiter(l.every, l.burst)}
		l.buckets[src] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forgetIdle drops the sources whose bucket has refilled since last seen.
func (l *ipLimiter) forgetIdle(now time.Time) {
	full := time.Duration(float64(l.burst) / float64(l.every) * float64(time.Second))
	for src, b := range l.buckets {
		if now.Sub(b.seen) >= full {
			delete(l.buckets, src)
		}
	}
}

// sourceOf is the peer's IP address, without its port.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
