package source

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// countUploadPacks puts a git-upload-pack first on PATH that notes each run
// in a file and then serves as the real one, and returns a function that
// says how many runs there were.
func countUploadPacks(t *testing.T) func() int {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(strings.TrimSpace(string(out)), "git-upload-pack")
	bin := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	script := fmt.Sprintf("#!/bin/sh\necho run >> %s\nexec %s \"$@\"\n", runs, real)
	if err := os.WriteFile(filepath.Join(bin, "git-upload-pack"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() int {
		b, err := os.ReadFile(runs)
		if os.IsNotExist(err) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "run\n")
	}
}

// The applications of one repository queue on its lock; a fetch that gets
// the lock after another listed the remote's refs, in a listing begun after
// it asked, uses that listing: it cannot be older than the request. A
// listing begun before the request is never used, so a push made before
// the request (the one a webhook announces) is always seen, and fetches
// one after another each list.
func TestAFetchUsesAListingBegunAfterItAskedAndNoOther(t *testing.T) {
	src := newTestRepo(t)
	first := src.write(map[string]string{"f": "1"}).commit("one")
	runs := countUploadPacks(t)
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t)})
	ctx := context.Background()
	fetch := func() string {
		t.Helper()
		rev, err := f.Fetch(ctx, Request{RepoURL: src.dir, Revision: "master"})
		if err != nil {
			t.Fatal(err)
		}
		return rev.Commit
	}
	if got := fetch(); got != first || runs() != 2 {
		t.Fatalf("clone: commit %s, %d upload-pack runs; want %s and two (list, fetch)", got, runs(), first)
	}
	if fetch(); runs() != 3 {
		t.Fatalf("%d upload-pack runs after a second fetch, want one more: fetches one after another each list", runs())
	}

	loc, err := parseLocation(src.dir)
	if err != nil {
		t.Fatal(err)
	}
	r := f.cache(loc)
	// queued asks, takes the lock only after another fetch has listed.
	queued := func(asked uint64, creds *application.Credentials) string {
		t.Helper()
		if err := r.lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer r.unlock()
		rev, err := f.fetchLocked(ctx, r, "master", "", asked, creds, f.log)
		if err != nil {
			t.Fatal(err)
		}
		return rev.Commit
	}

	asked := r.askedAt()
	fetch() // the fetch ahead in the queue lists: 4 runs
	if got := queued(asked, nil); got != first || runs() != 4 {
		t.Errorf("queued fetch: commit %s, %d upload-pack runs; want %s and the listing of the fetch ahead used", got, runs(), first)
	}

	second := src.write(map[string]string{"f": "2"}).commit("two")
	asked = r.askedAt()
	if got := queued(asked, nil); got != second || runs() != 6 {
		t.Errorf("after a push: commit %s, %d upload-pack runs; want %s, listed and fetched (6 runs)", got, runs(), second)
	}
}

// A listing is shared only between fetches that authenticate alike.
func TestAListingIsNotSharedAcrossCredentials(t *testing.T) {
	r := &repoCache{}
	asked := r.askedAt()
	seq := r.beginListing()
	r.listedOK(seq, credsKey(&application.Credentials{PasswordFile: "/run/a"}), nil)
	if _, ok := r.fresh(asked, credsKey(&application.Credentials{PasswordFile: "/run/a"})); !ok {
		t.Error("same credentials: listing not shared")
	}
	for _, c := range []*application.Credentials{nil, {PasswordFile: "/run/b"}, {SSHKeyFile: "/run/a"}} {
		if _, ok := r.fresh(asked, credsKey(c)); ok {
			t.Errorf("credentials %+v share a listing made with /run/a", c)
		}
	}
	if _, ok := r.fresh(seq, credsKey(&application.Credentials{PasswordFile: "/run/a"})); ok {
		t.Error("a listing begun before the request was shared")
	}
}
