package api

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

func TestIPLimiter_forgetsIdleSourcesPastItsBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newIPLimiter(1, 2, func() time.Time { return now })
	from := func(i int) bool {
		r := httptest.NewRequest("POST", "/", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		ok, _ := l.allow(r)
		return ok
	}
	for i := range maxTrackedSources {
		from(i)
	}
	if len(l.buckets) != maxTrackedSources {
		t.Fatalf("%d sources tracked, want %d", len(l.buckets), maxTrackedSources)
	}
	now = now.Add(3 * time.Second) // every bucket is full again
	from(maxTrackedSources)
	if len(l.buckets) != 1 {
		t.Fatalf("%d sources tracked after the idle ones refilled, want only the new one", len(l.buckets))
	}
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
