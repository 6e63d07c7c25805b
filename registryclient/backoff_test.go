package registryclient_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

// Two applications follow one image on a registry that checks passwords
// itself (htpasswd, Basic): A's password is wrong, B's is right. The
// controller asks for A just before B in every run, so if a refusal backed
// off the registry, B would never be answered again.
func TestClient_aRefusedCredentialHoldsBackOnlyItselfNotTheRegistry(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Basic: true, User: "ci", Password: "right-pass"})
	reg.Push(t, "team/app", "1.0.0", registrytest.Image{Content: "1"})
	clk := newClock()
	c := registryclient.New(registryclient.Options{Interval: time.Minute, Now: clk.Now, MinBackoff: 10 * time.Second})
	ctx := context.Background()
	image := reg.Host + "/team/app"
	a := registryclient.Credential{Username: "ci", Password: "wrong-pass"}
	b := registryclient.Credential{Username: "ci", Password: "right-pass"}

	for run := range 5 {
		reg.ResetHits()
		_, err := c.Tags(ctx, image, a)
		if !errors.Is(err, registryclient.ErrUnauthorized) {
			t.Fatalf("run %d: A's error %v, want ErrUnauthorized", run, err)
		}
		tags, err := c.Tags(ctx, image, b)
		if err != nil || !slices.Equal(tags, []string{"1.0.0"}) {
			t.Fatalf("run %d, right after A was refused: B got %v, %v; want its tags", run, tags, err)
		}
		if n := count(reg.Hits(), "GET", "/tags/list", http.StatusOK); n != 1 {
			t.Fatalf("run %d: %d listings answered, want B's one: %v", run, n, reg.Hits())
		}
		d, err := c.Digest(ctx, image, "1.0.0", b)
		if err != nil || d == "" {
			t.Fatalf("run %d: B's digest %q, %v", run, d, err)
		}
		clk.Advance(61 * time.Second)
	}

	// A itself is held back: within its backoff the wrong password is not
	// sent again, and the error says both that it was refused and until
	// when it is not retried.
	reg.ResetHits()
	clk.Advance(time.Hour)
	if _, err := c.Tags(ctx, image, a); !errors.Is(err, registryclient.ErrUnauthorized) || errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("A after an hour: error %v, want a fresh refusal", err)
	}
	sent := len(reg.Hits())
	if sent == 0 {
		t.Fatal("A after an hour: nothing sent, want the registry asked again")
	}
	clk.Advance(5 * time.Second)
	_, err := c.Tags(ctx, image, a)
	if !errors.Is(err, registryclient.ErrUnauthorized) || !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("A within its backoff: error %v, want ErrUnauthorized and ErrBackoff", err)
	}
	if n := len(reg.Hits()); n != sent {
		t.Fatalf("A within its backoff: %d more requests sent, want 0: %v", n-sent, reg.Hits())
	}
	// Fixing A's file changes the credential: the new one is not held back.
	fixed := registryclient.Credential{Username: "ci", Password: "right-pass"}
	if _, err := c.Digest(ctx, image, "1.0.0", fixed); err != nil {
		t.Fatalf("A with the right password: %v", err)
	}
}

// A server error or an unreachable registry backs off the whole host, for
// every credential: asking again within the wait sends nothing (counted at
// the registry's proxy for the 503, and as connections dialled while the
// registry refuses them), and the first request after it is answered.
func TestClient_backsOffTheRegistryAfterAServerErrorOrANetworkFailure(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "app", "1.0.0", registrytest.Image{Content: "1"})
	clk := newClock()
	// While down, every connection goes to a port nobody listens on: the
	// kernel refuses it, as it would a registry that stopped.
	refusing := closedPort(t)
	var down atomic.Bool
	var attempts atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true // every request dials, so every attempt is seen
	var dialer net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		attempts.Add(1)
		if down.Load() {
			addr = refusing
		}
		return dialer.DialContext(ctx, network, addr)
	}
	httpc := &http.Client{Transport: tr}
	c := registryclient.New(registryclient.Options{HTTP: httpc, Interval: time.Minute, Now: clk.Now, MinBackoff: 10 * time.Second})
	ctx := context.Background()
	image := reg.Host + "/app"
	other := registryclient.Credential{Username: "someone", Password: "else"}

	reg.Fail(1, http.StatusServiceUnavailable, "")
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); err == nil || errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("503: error %v, want the registry's answer", err)
	}
	reg.ResetHits()
	clk.Advance(9 * time.Second)
	for _, cred := range []registryclient.Credential{{}, other} {
		if _, err := c.Tags(ctx, image, cred); !errors.Is(err, registryclient.ErrBackoff) {
			t.Fatalf("within the backoff after a 503: error %v, want ErrBackoff", err)
		}
		if _, err := c.Digest(ctx, image, "1.0.0", cred); !errors.Is(err, registryclient.ErrBackoff) {
			t.Fatalf("within the backoff after a 503: digest error %v, want ErrBackoff", err)
		}
	}
	if n := len(reg.Hits()); n != 0 {
		t.Fatalf("within the backoff after a 503: %d requests sent, want 0: %v", n, reg.Hits())
	}
	clk.Advance(2 * time.Second)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); err != nil {
		t.Fatalf("after the backoff: %v", err)
	}

	down.Store(true)
	clk.Advance(time.Hour)
	before := attempts.Load()
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("unreachable: error %v, want the connection refused", err)
	}
	if n := attempts.Load() - before; n != 1 {
		t.Fatalf("unreachable: %d attempts, want 1", n)
	}
	clk.Advance(9 * time.Second)
	if _, err := c.Digest(ctx, image, "1.0.0", other); !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("within the backoff after a network failure: error %v, want ErrBackoff", err)
	}
	if n := attempts.Load() - before; n != 1 {
		t.Fatalf("within the backoff after a network failure: %d attempts, want 1", n)
	}
	down.Store(false)
	reg.ResetHits()
	clk.Advance(2 * time.Second)
	if _, err := c.Digest(ctx, image, "1.0.0", other); err != nil {
		t.Fatalf("reachable again after the backoff: %v", err)
	}
	if hits := reg.Hits(); len(hits) == 0 || hits[len(hits)-1].Status != http.StatusOK {
		t.Fatalf("reachable again: the registry saw %v, want the digest answered", hits)
	}
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
