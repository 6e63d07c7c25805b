package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// from sends one request from addr (host:port) through l.
func from(l *ipLimiter, addr string) bool {
	r := httptest.NewRequest("POST", "/", nil)
	r.RemoteAddr = addr
	ok, _ := l.allow(r)
	return ok
}

func v4(i int) string { return fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255) }

// checkTable fails unless the map and the recency list hold the same
// sources, at most l.size of them, and returns how many.
func checkTable(t *testing.T, l *ipLimiter) int {
	t.Helper()
	if len(l.sources) != l.order.Len() || l.order.Len() > l.size {
		t.Fatalf("table: %d sources mapped, %d in order, bound %d", len(l.sources), l.order.Len(), l.size)
	}
	for e := l.order.Front(); e != nil; e = e.Next() {
		if l.sources[e.Value.(*bucket).src] != e {
			t.Fatalf("source %s is in the order but not mapped to its place", e.Value.(*bucket).src)
		}
	}
	return l.order.Len()
}

func TestIPLimiter_manySourcesAtOnceStayWithinTheBoundAndShareTheOverflowBucket(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newIPLimiter(1, 2, func() time.Time { return now })
	for i := range 50_000 {
		from(l, v4(i))
	}
	if n := checkTable(t, l); n != maxTrackedSources {
		t.Fatalf("%d sources tracked after 50,000 active ones, want the bound %d", n, maxTrackedSources)
	}
	// The first sources keep their own buckets: a flood does not evict
	// a sender that is still active.
	for i := range 3 {
		if _, ok := l.sources[sourceOf(reqFrom(v4(i)))]; !ok {
			t.Fatalf("active source %d was pushed out by later ones", i)
		}
	}
	if !from(l, v4(0)) {
		t.Fatal("a known source with a token left was refused while the table is full")
	}
	// The 40,000 sources past the bound shared one bucket, long empty.
	if from(l, v4(49_999)) || from(l, v4(60_000)) {
		t.Fatal("a source past the bound got a token of its own")
	}
}

func TestIPLimiter_aNewSourceTakesOnlyTheLeastRecentlySeenIdlePlace(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newIPLimiter(1, 2, func() time.Time { return now })
	for i := range maxTrackedSources {
		from(l, v4(i))
		now = now.Add(time.Millisecond)
	}
	// Source i was last seen at i ms. At 5s the buckets of sources 0 to
	// 3000 are full again (they refill in 2s), the later ones are not.
	now = time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	for k := range 5 {
		if !from(l, v4(maxTrackedSources+k)) {
			t.Fatalf("new source %d refused although idle places are there", k)
		}
		// Each new source replaced exactly one: the least recently seen.
		if n := checkTable(t, l); n != maxTrackedSources {
			t.Fatalf("%d sources tracked, want %d", n, maxTrackedSources)
		}
		for i := range k + 1 {
			if _, ok := l.sources[sourceOf(reqFrom(v4(i)))]; ok {
				t.Fatalf("after %d new sources, idle source %d is still tracked", k+1, i)
			}
		}
		if _, ok := l.sources[sourceOf(reqFrom(v4(k+1)))]; !ok {
			t.Fatalf("after %d new sources, source %d was forgotten too: more than the oldest was dropped", k+1, k+1)
		}
	}
	// Once the idle places are used up, new sources overflow instead of
	// taking the place of an active one.
	for k := 5; k < 5000; k++ {
		from(l, v4(maxTrackedSources+k))
	}
	if n := checkTable(t, l); n != maxTrackedSources {
		t.Fatalf("%d sources tracked, want %d", n, maxTrackedSources)
	}
	for i, want := range map[int]bool{3001: true, maxTrackedSources - 1: true,
		maxTrackedSources + 3000: true, maxTrackedSources + 3001: false} {
		if _, ok := l.sources[sourceOf(reqFrom(v4(i)))]; ok != want {
			t.Errorf("source %d tracked: %v, want %v (3,001 idle places, then overflow)", i, ok, want)
		}
	}
}

func TestIPLimiter_anIPv6SourceIsItsSlash64(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newIPLimiter(0.5, 2, func() time.Time { return now })
	for i := range 2 {
		if !from(l, fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1)) {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	if from(l, "[2001:db8:1:2:ffff:ffff:ffff:ffff]:443") {
		t.Fatal("another address of the same /64 got a bucket of its own")
	}
	if !from(l, "[2001:db8:1:3::1]:443") {
		t.Fatal("the next /64 shares the first one's bucket")
	}
	if n := checkTable(t, l); n != 2 {
		t.Fatalf("%d sources tracked, want the two /64s", n)
	}
	for addr, want := range map[string]string{
		"[2001:db8:1:2:aaaa::1%eth0]:1": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:1":          "192.0.2.7/32",
		"192.0.2.7:1":                   "192.0.2.7/32",
		"@":                             "invalid Prefix",
	} {
		if got := sourceOf(reqFrom(addr)).String(); got != want {
			t.Errorf("source of %s = %s, want %s", addr, got, want)
		}
	}
}

func reqFrom(addr string) *http.Request {
	r := httptest.NewRequest("POST", "/", nil)
	r.RemoteAddr = addr
	return r
}

func TestIPLimiter_allowsTheBurstThenRefusesWithTheWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newIPLimiter(0.5, 2, func() time.Time { return now })
	r := httptest.NewRequest("POST", "/", nil)
	for i := range 2 {
		if ok, _ := l.allow(r); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.allow(r)
	if ok || wait != 2*time.Second {
		t.Fatalf("past the burst: ok=%v wait=%s, want refused with 2s", ok, wait)
	}
	now = now.Add(2 * time.Second)
	if ok, _ := l.allow(r); !ok {
		t.Fatal("refused after the bucket refilled one token")
	}
}
