package registryclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

// clock is a settable time for interval and backoff tests.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func count(hits []registrytest.Hit, method, pathPart string, status int) int {
	n := 0
	for _, h := range hits {
		if h.Method == method && strings.Contains(h.Path, pathPart) && (status == 0 || h.Status == status) {
			n++
		}
	}
	return n
}

func TestClient_listsEveryPageOfTags(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	var want []string
	for i := range 7 {
		tag := fmt.Sprintf("1.0.%d", i)
		reg.Push(t, "app", tag, registrytest.Image{Content: tag})
		want = append(want, tag)
	}
	c := registryclient.New(registryclient.Options{PageSize: 3})
	got, err := c.Tags(context.Background(), reg.Host+"/app", registryclient.Credential{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("tags = %v, want %v", got, want)
	}
	if n := count(reg.Hits(), "GET", "/tags/list", 200); n != 3 {
		t.Fatalf("%d pages read, want 3 of at most 3 tags: %v", n, reg.Hits())
	}
}

func TestClient_digestOfATagAndOfAMultiArchIndex(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	single := reg.Push(t, "app", "single", registrytest.Image{Content: "one"})
	index := reg.PushIndex(t, "app", "multi",
		registrytest.Image{Content: "amd", OS: "linux", Arch: "amd64"},
		registrytest.Image{Content: "arm", OS: "linux", Arch: "arm64"})
	c := registryclient.New(registryclient.Options{})
	ctx := context.Background()
	for tag, want := range map[string]string{"single": single, "multi": index} {
		got, err := c.Digest(ctx, reg.Host+"/app", tag, registryclient.Credential{})
		if err != nil || got != want {
			t.Errorf("Digest(%s) = %q, %v; want %s", tag, got, err, want)
		}
	}
	if n := count(reg.Hits(), "HEAD", "/manifests/", 200); n != 2 {
		t.Errorf("%d manifest HEADs, want 2 (digests come from HEAD, not GET): %v", n, reg.Hits())
	}
	if _, err := c.Digest(ctx, reg.Host+"/app", "absent", registryclient.Credential{}); !errors.Is(err, registryclient.ErrNotFound) {
		t.Errorf("Digest(absent) error = %v, want ErrNotFound", err)
	}
}

func TestClient_answersABearerChallengeWithTheApplicationsCredential(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Token: true, User: "ci", Password: "s3cret-pass"})
	reg.Push(t, "team/app", "2.0.0", registrytest.Image{Content: "x"})
	c := registryclient.New(registryclient.Options{})
	ctx := context.Background()

	_, err := c.Tags(ctx, reg.Host+"/team/app", registryclient.Credential{})
	if !errors.Is(err, registryclient.ErrUnauthorized) {
		t.Fatalf("anonymous: error %v, want ErrUnauthorized", err)
	}
	wrong := registryclient.Credential{Username: "ci", Password: "wrong-password"}
	if _, err := c.Tags(ctx, reg.Host+"/team/app", wrong); !errors.Is(err, registryclient.ErrUnauthorized) || strings.Contains(err.Error(), "wrong-password") {
		t.Fatalf("wrong password: error %v, want ErrUnauthorized without the password", err)
	}
	// A refused credential is not cached: the right one works at once.
	good := registryclient.Credential{Username: "ci", Password: "s3cret-pass"}
	tags, err := c.Tags(ctx, reg.Host+"/team/app", good)
	if err != nil || !slices.Equal(tags, []string{"2.0.0"}) {
		t.Fatalf("with credentials: %v, %v", tags, err)
	}
	d, err := c.Digest(ctx, reg.Host+"/team/app", "2.0.0", good)
	if err != nil || !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("digest with credentials: %q, %v", d, err)
	}
	if n := reg.TokenRequests(); n != 1 {
		t.Errorf("%d tokens issued, want 1: the token is reused for the same scope", n)
	}
}

func TestClient_hundredCallersCostOneQueryPerInterval(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Token: true, User: "ci", Password: "pw"})
	reg.Push(t, "app", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "app", "1.1.0", registrytest.Image{Content: "2"})
	clk := newClock()
	c := registryclient.New(registryclient.Options{Interval: time.Minute, Now: clk.Now})
	cred := registryclient.Credential{Username: "ci", Password: "pw"}
	image := reg.Host + "/app"

	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 100 {
			wg.Go(func() {
				tags, err := c.Tags(context.Background(), image, cred)
				if err == nil && len(tags) != 2 {
					err = fmt.Errorf("tags %v", tags)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	round()
	if n := count(reg.Hits(), "GET", "/tags/list", 200); n != 1 {
		t.Fatalf("100 callers: %d tag listings answered, want 1; hits %v", n, reg.Hits())
	}
	reg.ResetHits()
	clk.Advance(30 * time.Second)
	round()
	if n := len(reg.Hits()); n != 0 {
		t.Fatalf("same interval: %d requests reached the registry, want 0: %v", n, reg.Hits())
	}
	clk.Advance(31 * time.Second)
	round()
	if n := count(reg.Hits(), "GET", "/tags/list", 0); n != 1 {
		t.Fatalf("next interval: %d tag listings, want 1: %v", n, reg.Hits())
	}
}

func TestClient_backsOffOn429AndASpentRateLimit(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "app", "1.0.0", registrytest.Image{Content: "1"})
	clk := newClock()
	c := registryclient.New(registryclient.Options{Interval: time.Minute, Now: clk.Now, MinBackoff: 10 * time.Second})
	ctx := context.Background()
	image := reg.Host + "/app"

	reg.Throttle(1, "120")
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("429: error %v, want ErrBackoff", err)
	}
	reg.ResetHits()
	clk.Advance(119 * time.Second)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("within Retry-After: error %v, want ErrBackoff", err)
	}
	if n := len(reg.Hits()); n != 0 {
		t.Fatalf("within Retry-After: %d requests sent, want 0", n)
	}
	clk.Advance(2 * time.Second)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}

	// Docker Hub's headers: the last request spent the budget of a
	// 6-hour window; nothing is sent until it passes.
	reg.SetRateLimit("100;w=21600", "0;w=21600")
	clk.Advance(2 * time.Minute)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); err != nil {
		t.Fatalf("the request that spends the budget still answers: %v", err)
	}
	if limit, remaining, ok := c.RateLimit(reg.Host); !ok || limit != 100 || remaining != 0 {
		t.Errorf("RateLimit = %d, %d, %v; want 100, 0, true", limit, remaining, ok)
	}
	reg.ResetHits()
	clk.Advance(2 * time.Minute)
	if _, err := c.Digest(ctx, image, "1.0.0", registryclient.Credential{}); !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("budget spent: error %v, want ErrBackoff", err)
	}
	if n := len(reg.Hits()); n != 0 {
		t.Fatalf("budget spent: %d requests sent, want 0", n)
	}
	reg.SetRateLimit("", "")
	clk.Advance(6 * time.Hour)
	if _, err := c.Digest(ctx, image, "1.0.0", registryclient.Credential{}); err != nil {
		t.Fatalf("after the window: %v", err)
	}

	// Repeated failures without Retry-After back off exponentially.
	reg.Throttle(2, "")
	clk.Advance(time.Hour)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("first 429: %v", err)
	}
	clk.Advance(11 * time.Second)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); !errors.Is(err, registryclient.ErrBackoff) {
		t.Fatalf("second 429: %v", err)
	}
	clk.Advance(11 * time.Second) // less than the doubled 20s
	reg.ResetHits()
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); !errors.Is(err, registryclient.ErrBackoff) || len(reg.Hits()) != 0 {
		t.Fatalf("within the doubled backoff: %v, %d requests", err, len(reg.Hits()))
	}
	clk.Advance(10 * time.Second)
	if _, err := c.Tags(ctx, image, registryclient.Credential{}); err != nil {
		t.Fatalf("after the doubled backoff: %v", err)
	}
}
