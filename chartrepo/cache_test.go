package chartrepo

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
)

// The offline fallback takes only a chart the same repository served: a
// same-named chart another repository left in the cache is not used.
func TestCachedIsKeyedByRepositoryNameAndVersion(t *testing.T) {
	mine, other := newTestRepo(t, false), newTestRepo(t, false)
	mine.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	other.publish("web-1.5.0.tgz", packageChart(t, "web", "1.5.0"))
	c := newClient(t, Options{})
	for _, r := range []*testRepo{mine, other} {
		if _, err := c.Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "1.x", Insecure: true}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Cached(mine.url()+"/", "web", "1.x")
	if err != nil || got.Version != "1.0.0" {
		t.Fatalf("Cached(mine) = %+v, %v; want 1.0.0, never the other repository's 1.5.0", got, err)
	}
	if _, err := c.Cached(mine.url(), "web", "~1.5"); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("Cached(mine, ~1.5) = %v, want ErrNoVersion", err)
	}
	if _, err := c.Cached("https://unknown.example.com/charts", "web", "1.x"); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("Cached(unknown repository) = %v, want ErrNoVersion", err)
	}
	// A cache hit records its repository too: other's chart, served again
	// by mine, becomes mine's.
	mine.publish("web-1.5.0.tgz", packageChart(t, "web", "1.5.0"))
	if _, err := c.Fetch(context.Background(), Request{RepoURL: mine.url(), Name: "web", Version: "~1.5", Insecure: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Cached(mine.url(), "web", "1.x"); err != nil || got.Version != "1.5.0" {
		t.Fatalf("Cached(mine) after it served 1.5.0 = %+v, %v", got, err)
	}
}

// Archive sees the URL the index names before anything is downloaded or
// taken from the cache, and its refusal names the archive.
func TestFetchAsksArchiveBeforeUsingTheArchive(t *testing.T) {
	r := newTestRepo(t, false)
	r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	c := newClient(t, Options{})
	var asked []string
	refuse := errors.New("not allowed")
	req := Request{RepoURL: r.url(), Name: "web", Version: "1.x", Insecure: true,
		Archive: func(u *url.URL) error { asked = append(asked, u.String()); return refuse }}
	_, err := c.Fetch(context.Background(), req)
	if !errors.Is(err, refuse) || !strings.Contains(err.Error(), r.url()+"/web-1.0.0.tgz") {
		t.Fatalf("err = %v, want the refusal naming the archive", err)
	}
	if n := r.count("/charts/web-1.0.0.tgz"); n != 0 {
		t.Fatalf("archive downloaded %d times before it was allowed", n)
	}
	// Cached by a fetch that allowed it, still refused.
	if _, err := c.Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "1.x", Insecure: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(context.Background(), req); !errors.Is(err, refuse) || len(asked) != 2 {
		t.Fatalf("cached: err = %v, asked %v", err, asked)
	}
}
