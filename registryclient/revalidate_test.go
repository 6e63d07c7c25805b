package registryclient_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

// After the interval a digest is asked again with If-None-Match naming the
// digest known; Distribution answers 304 without the manifest while the
// tag has not moved, and 200 with the new digest once it has.
func TestClient_revalidatesADigestWithIfNoneMatch(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	first := reg.Push(t, "app", "stable", registrytest.Image{Content: "1"})
	clk := newClock()
	c := registryclient.New(registryclient.Options{Interval: time.Minute, Now: clk.Now})
	ctx := context.Background()
	image := reg.Host + "/app"

	if d, err := c.Digest(ctx, image, "stable", registryclient.Credential{}); err != nil || d != first {
		t.Fatalf("first ask: %q, %v; want %s", d, err, first)
	}
	for interval := range 3 {
		reg.ResetHits()
		clk.Advance(61 * time.Second)
		if d, err := c.Digest(ctx, image, "stable", registryclient.Credential{}); err != nil || d != first {
			t.Fatalf("interval %d: %q, %v; want the digest kept, %s", interval, d, err, first)
		}
		hits := reg.Hits()
		if len(hits) != 1 || count(hits, http.MethodHead, "/manifests/stable", http.StatusNotModified) != 1 {
			t.Fatalf("interval %d: requests %v, want one HEAD answered 304", interval, hits)
		}
	}

	moved := reg.Push(t, "app", "stable", registrytest.Image{Content: "2"})
	reg.ResetHits()
	clk.Advance(61 * time.Second)
	if d, err := c.Digest(ctx, image, "stable", registryclient.Credential{}); err != nil || d != moved {
		t.Fatalf("after the tag moved: %q, %v; want %s", d, err, moved)
	}
	if n := count(reg.Hits(), http.MethodHead, "/manifests/stable", http.StatusOK); n != 1 {
		t.Fatalf("after the tag moved: requests %v, want one HEAD answered 200", reg.Hits())
	}
}

// A tags list is revalidated with the ETag its registry sent. Distribution
// sends none, so the proxy in front of it adds one per page (a hash of the
// page) and answers 304 when it matches, as registries that support it do.
func TestClient_revalidatesATagsListWithItsETag(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{TagETags: true})
	reg.Push(t, "app", "1.0.0", registrytest.Image{Content: "1"})
	clk := newClock()
	c := registryclient.New(registryclient.Options{Interval: time.Minute, Now: clk.Now})
	ctx := context.Background()
	image := reg.Host + "/app"

	if _, err := c.Tags(ctx, image, registryclient.Credential{}); err != nil {
		t.Fatal(err)
	}
	reg.ResetHits()
	clk.Advance(61 * time.Second)
	tags, err := c.Tags(ctx, image, registryclient.Credential{})
	if err != nil || !slices.Equal(tags, []string{"1.0.0"}) {
		t.Fatalf("unchanged list: %v, %v", tags, err)
	}
	if hits := reg.Hits(); len(hits) != 1 || count(hits, http.MethodGet, "/tags/list", http.StatusNotModified) != 1 {
		t.Fatalf("unchanged list: requests %v, want one listing answered 304", hits)
	}

	reg.Push(t, "app", "1.1.0", registrytest.Image{Content: "2"})
	reg.ResetHits()
	clk.Advance(61 * time.Second)
	tags, err = c.Tags(ctx, image, registryclient.Credential{})
	if err != nil || !slices.Equal(tags, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("after a push: %v, %v; want both tags", tags, err)
	}
	if n := count(reg.Hits(), http.MethodGet, "/tags/list", http.StatusOK); n != 1 {
		t.Fatalf("after a push: requests %v, want one listing answered 200", reg.Hits())
	}
}

// The first page's ETag says nothing of the later pages: a new tag that
// sorts onto the last page is seen in the next interval although the first
// page did not change.
func TestClient_seesANewTagOnALaterPageWhileTheFirstIsUnchanged(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{TagETags: true})
	var want []string
	for i := range 5 {
		tag := fmt.Sprintf("1.0.%d", i)
		reg.Push(t, "app", tag, registrytest.Image{Content: tag})
		want = append(want, tag)
	}
	clk := newClock()
	c := registryclient.New(registryclient.Options{Interval: time.Minute, Now: clk.Now, PageSize: 2})
	ctx := context.Background()
	image := reg.Host + "/app"
	if tags, err := c.Tags(ctx, image, registryclient.Credential{}); err != nil || len(tags) != 5 {
		t.Fatalf("first listing: %v, %v", tags, err)
	}

	reg.Push(t, "app", "1.0.5", registrytest.Image{Content: "1.0.5"})
	want = append(want, "1.0.5")
	reg.ResetHits()
	clk.Advance(61 * time.Second)
	tags, err := c.Tags(ctx, image, registryclient.Credential{})
	slices.Sort(tags)
	if err != nil || !slices.Equal(tags, want) {
		t.Fatalf("after a push onto the last page: %v, %v; want %v", tags, err, want)
	}
	if n := count(reg.Hits(), http.MethodGet, "/tags/list", http.StatusNotModified); n != 0 {
		t.Fatalf("after a push onto the last page: requests %v, want every page read again, none revalidated", reg.Hits())
	}
}
