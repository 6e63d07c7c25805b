package api

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ipLimiter is a token bucket per source. Webhook routes take no token, so
// this is what keeps one sender from making the controller hash and parse
// bodies as fast as it can send them.
//
// The source is the connection's peer address: X-Forwarded-For is whatever
// the sender wants it to be. Behind a reverse proxy every delivery shares the
// proxy's address, and the limit is then one for all forges together. An
// IPv6 peer counts by its /64, since one host commonly holds a whole /64 and
// could otherwise be a new source on every request.
//
// The table of sources has a fixed size and every step on it is O(1): the
// sources are kept in the order they were last seen, a hit moves its source
// to the front, and a new source may take the place of the least recently
// seen one only if that one's bucket has refilled (forgetting a full bucket
// loses nothing). When even the least recently seen source is still active,
// the table is full of active senders: the new source is not added but
// shares one overflow bucket with every other source in that position, so a
// flood of addresses costs a fixed amount of memory and cannot take the
// buckets of the senders already known.
type ipLimiter struct {
	every rate.Limit
	burst int
	size  int
	now   func() time.Time

	mu       sync.Mutex
	sources  map[netip.Prefix]*list.Element // of *bucket
	order    *list.List                     // most recently seen first
	overflow *rate.Limiter
}

type bucket struct {
	src  netip.Prefix
	lim  *rate.Limiter
	seen time.Time
}

// maxTrackedSources is the size of the limiter's table.
const maxTrackedSources = 10_000

// ipv6SourceBits is how much of an IPv6 address names a source.
const ipv6SourceBits = 64

func newIPLimiter(every rate.Limit, burst int, now func() time.Time) *ipLimiter {
	return &ipLimiter{every: every, burst: burst, size: maxTrackedSources, now: now,
		sources: make(map[netip.Prefix]*list.Element), order: list.New(),
		overflow: rate.NewLimiter(every, burst)}
}

// allow takes a token for r's source, or says how long until one is there.
func (l *ipLimiter) allow(r *http.Request) (bool, time.Duration) {
	src := sourceOf(r)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return take(l.bucketOf(src, now), now)
}

// bucketOf finds or makes src's bucket, in O(1); see ipLimiter.
func (l *ipLimiter) bucketOf(src netip.Prefix, now time.Time) *rate.Limiter {
	if e, ok := l.sources[src]; ok {
		b := e.Value.(*bucket)
		b.seen = now
		l.order.MoveToFront(e)
		return b.lim
	}
	if l.order.Len() < l.size {
		b := &bucket{src: src, lim: rate.NewLimiter(l.every, l.burst), seen: now}
		l.sources[src] = l.order.PushFront(b)
		return b.lim
	}
	oldest := l.order.Back()
	b := oldest.Value.(*bucket)
	if now.Sub(b.seen) < l.refill() {
		return l.overflow
	}
	delete(l.sources, b.src)
	*b = bucket{src: src, lim: rate.NewLimiter(l.every, l.burst), seen: now}
	l.sources[src] = oldest
	l.order.MoveToFront(oldest)
	return b.lim
}

// refill is how long an emptied bucket takes to be full again.
func (l *ipLimiter) refill() time.Duration {
	return time.Duration(float64(l.burst) / float64(l.every) * float64(time.Second))
}

func take(lim *rate.Limiter, now time.Time) (bool, time.Duration) {
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sourceOf is the peer's address as a source: an IPv4 address, or the /64
// of an IPv6 one. A peer address that is not an IP (a Unix socket) is the
// zero prefix, one source for all such peers.
func sourceOf(r *http.Request) netip.Prefix {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	addr = addr.Unmap().WithZone("")
	bits := addr.BitLen()
	if addr.Is6() {
		bits = ipv6SourceBits
	}
	p, _ := addr.Prefix(bits)
	return p
}
