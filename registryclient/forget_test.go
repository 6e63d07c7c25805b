package registryclient

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/registrytest"
)

// The client's memory follows what is followed now: an image nobody asks
// about for a day leaves no tags list, token or host state behind, while
// one asked about every interval keeps its answer.
func TestClient_forgetsWhatNobodyAsksForAnyMore(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Token: true, User: "ci", Password: "pw"})
	reg.Push(t, "old", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "kept", "1.0.0", registrytest.Image{Content: "2"})
	var ns atomic.Int64
	ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, ns.Load()) }
	c := New(Options{Interval: time.Minute, Now: now})
	cred := Credential{Username: "ci", Password: "pw"}
	ask := func(image string) {
		t.Helper()
		if _, err := c.Tags(context.Background(), reg.Host+"/"+image, cred); err != nil {
			t.Fatal(err)
		}
	}
	ask("old")
	ask("kept")
	entries := func() (n int, old bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for k := range c.cache {
			n++
			old = old || k == "tags\x00"+reg.Host+"/old\x00"+cred.fingerprint()
		}
		return n, old
	}
	if n, old := entries(); n != 2 || !old {
		t.Fatalf("after asking twice: %d entries (old kept: %v), want 2", n, old)
	}
	for range 25 {
		ns.Add(int64(time.Hour))
		ask("kept")
	}
	n, old := entries()
	if n != 1 || old {
		t.Fatalf("a day later: %d entries (old kept: %v), want only the image still asked for", n, old)
	}
	c.mu.Lock()
	tokens := len(c.tokens)
	c.mu.Unlock()
	if tokens > 1 {
		t.Fatalf("%d tokens kept, want at most the one of the image still asked for", tokens)
	}
}
