package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
)

func TestFetchClonesThenServesFromCacheUntilANewCommit(t *testing.T) {
	src := newTestRepo(t)
	first := src.write(map[string]string{"docker-compose.yml": "v1", "app/conf.txt": "c1"}).commit("first")
	f := newTestFetcher(t, nil)
	ctx := context.Background()
	req := Request{RepoURL: src.dir}

	r1, err := f.Fetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Commit != first || !r1.Fetched {
		t.Fatalf("first fetch = %s fetched=%v, want %s fetched=true", r1.Commit, r1.Fetched, first)
	}
	if !filepath.IsAbs(r1.Dir) || readFile(t, r1.Dir, "app/conf.txt") != "c1" {
		t.Fatalf("tree not materialised at %s", r1.Dir)
	}
	if r1.Author != "Ada <ada@example.com>" || r1.Message != "first" || r1.Time.IsZero() {
		t.Errorf("metadata = %q %q %v", r1.Author, r1.Message, r1.Time)
	}
	if _, err := os.Stat(filepath.Join(r1.Dir, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tree contains .git: %v", err)
	}

	r2, err := f.Fetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Fetched || r2.Dir != r1.Dir || r2.Commit != first {
		t.Fatalf("unchanged fetch = %+v, want the cached tree without a fetch", r2)
	}

	second := src.write(map[string]string{"docker-compose.yml": "v2"}).commit("second")
	r3, err := f.Fetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Commit != second || !r3.Fetched || r3.Dir == r1.Dir {
		t.Fatalf("after new commit = %+v, want %s fetched in a new dir", r3, second)
	}
	if got := readFile(t, r3.Dir, "docker-compose.yml"); got != "v2" {
		t.Errorf("new tree has %q, want v2", got)
	}
	if got, ok := f.LastCommit(src.dir, ""); !ok || got != second {
		t.Errorf("LastCommit = %q %v, want %s", got, ok, second)
	}
	if got, ok := f.LastCommit("file://"+src.dir+"/", "HEAD"); !ok || got != second {
		t.Errorf("LastCommit via file:// = %q %v, want the same cache", got, ok)
	}
}

func TestFetchResolvesBranchesTagsAndCommits(t *testing.T) {
	src := newTestRepo(t)
	c1 := src.write(map[string]string{"f": "1"}).commit("one")
	src.tag("v1", c1, false)
	src.tag("v1-annotated", c1, true)
	c2 := src.write(map[string]string{"f": "2"}).commit("two")
	f := newTestFetcher(t, nil)
	ctx := context.Background()

	cases := []struct{ revision, want string }{
		{"master", c2},
		{"refs/heads/master", c2},
		{"HEAD", c2},
		{"v1", c1},
		{"v1-annotated", c1},
		{"refs/tags/v1-annotated", c1},
		{c1, c1},
		{strings.ToUpper(c1), c1},
	}
	for _, tc := range cases {
		r, err := f.Fetch(ctx, Request{RepoURL: "file://" + src.dir, Revision: tc.revision})
		if err != nil {
			t.Errorf("Fetch(%s): %v", tc.revision, err)
			continue
		}
		if r.Commit != tc.want {
			t.Errorf("Fetch(%s) = %s, want %s", tc.revision, r.Commit, tc.want)
		}
	}
}

func TestFetchOfACachedCommitDoesNotContactTheRemote(t *testing.T) {
	src := newTestRepo(t)
	c1 := src.write(map[string]string{"f": "1"}).commit("one")
	f := newTestFetcher(t, nil)
	ctx := context.Background()
	if _, err := f.Fetch(ctx, Request{RepoURL: src.dir}); err != nil {
		t.Fatal(err)
	}
	// With the remote gone, only the cache can answer.
	if err := os.RemoveAll(src.dir); err != nil {
		t.Fatal(err)
	}
	r, err := f.Fetch(ctx, Request{RepoURL: src.dir, Revision: c1})
	if err != nil {
		t.Fatalf("cached SHA: %v", err)
	}
	if r.Fetched || r.Commit != c1 {
		t.Errorf("got %+v, want cached %s", r, c1)
	}
}

func TestFetchOfAnUnknownRevisionIsRevisionNotFound(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"f": "1"}).commit("one")
	f := newTestFetcher(t, nil)
	for _, rev := range []string{"nope", strings.Repeat("ab", 20)} {
		_, err := f.Fetch(context.Background(), Request{RepoURL: src.dir, Revision: rev})
		if !errors.Is(err, ErrRevisionNotFound) {
			t.Fatalf("Fetch(%s) = %v, want ErrRevisionNotFound", rev, err)
		}
		want := fmt.Sprintf("revision %q not found in %s", rev, src.dir)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// A missing revision is bad input, not a broken remote: no backoff.
	if _, err := f.Fetch(context.Background(), Request{RepoURL: src.dir}); err != nil {
		t.Errorf("valid revision after a missing one: %v", err)
	}
}

func TestFetchBacksOffAnUnreachableRepositoryOnly(t *testing.T) {
	clock := newFakeClock()
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), Clock: clock.Now, Backoff: Backoff{Min: time.Minute, Max: 3 * time.Minute}})
	ctx := context.Background()
	requireUploadPack(t)
	missing := filepath.Join(t.TempDir(), "not-yet")

	_, err := f.Fetch(ctx, Request{RepoURL: missing})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("first fetch = %v, want ErrUnreachable", err)
	}

	// Create the repository: a fetch that tried would now succeed, so a
	// failure proves the backoff kept Fetch off the remote.
	if err := os.MkdirAll(missing, 0o755); err != nil {
		t.Fatal(err)
	}
	repo, err := git.PlainInit(missing, false)
	if err != nil {
		t.Fatal(err)
	}
	src := &testRepo{t: t, dir: missing, repo: repo}
	want := src.write(map[string]string{"f": "1"}).commit("one")

	start := time.Now()
	_, err = f.Fetch(ctx, Request{RepoURL: missing})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "backing off until") {
		t.Fatalf("fetch during backoff = %v, want the last error, backing off", err)
	}
	if time.Since(start) > 100*time.Millisecond {
		t.Errorf("backoff took %v; it should not touch the network", time.Since(start))
	}

	other := newTestRepo(t)
	other.write(map[string]string{"g": "1"}).commit("other")
	if _, err := f.Fetch(ctx, Request{RepoURL: other.dir}); err != nil {
		t.Fatalf("another repository during backoff: %v", err)
	}

	clock.Advance(time.Minute)
	r, err := f.Fetch(ctx, Request{RepoURL: missing})
	if err != nil || r.Commit != want {
		t.Fatalf("after the window = %v, %v; want %s", r, err, want)
	}
}

func TestFetchMaterialisesSymlinksAndModes(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"bin/run.sh": "#!/bin/sh\n", "conf/a.conf": "a", "plain.txt": "p"})
	if err := os.Chmod(filepath.Join(src.dir, "bin/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("conf/a.conf", filepath.Join(src.dir, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../../../../../../../../../../../../../../etc/passwd", filepath.Join(src.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	src.commit("modes")
	r, err := newTestFetcher(t, nil).Fetch(context.Background(), Request{RepoURL: src.dir})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"inside": "conf/a.conf", "escape": "../../../../../../../../../../../../../../../../../../../../etc/passwd"} {
		got, err := os.Readlink(filepath.Join(r.Dir, name))
		if err != nil || got != want {
			t.Errorf("%s: Readlink = %q, %v; want symlink to %q", name, got, err, want)
		}
	}
	for name, want := range map[string]os.FileMode{"bin/run.sh": 0o755, "plain.txt": 0o644, "conf": os.ModeDir | 0o755} {
		info, err := os.Lstat(filepath.Join(r.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode() & (os.ModeType | os.ModePerm); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
	if _, err := Contain(r.Dir, "escape"); !errors.Is(err, ErrOutsideRepository) {
		t.Errorf("Contain(escape) = %v, want ErrOutsideRepository", err)
	}
	if _, err := Contain(r.Dir, "inside"); err != nil {
		t.Errorf("Contain(inside) = %v", err)
	}
}

func TestFetchIsSafeFromManyGoroutines(t *testing.T) {
	src := newTestRepo(t)
	want := src.write(map[string]string{"f": "1"}).commit("one")
	f := newTestFetcher(t, nil)
	var wg sync.WaitGroup
	results := make([]*Revision, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = f.Fetch(context.Background(), Request{RepoURL: src.dir})
		})
	}
	wg.Wait()
	fetched := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Commit != want || r.Dir != results[0].Dir {
			t.Errorf("goroutine %d got %+v", i, r)
		}
		if r.Fetched {
			fetched++
		}
	}
	if fetched != 1 {
		t.Errorf("%d goroutines fetched, want exactly 1", fetched)
	}
}

func TestFetchPrunesTreesBeyondKeep(t *testing.T) {
	src := newTestRepo(t)
	clock := newFakeClock()
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), Clock: clock.Now, Keep: 2})
	ctx := context.Background()
	var dirs []string
	for i := range 4 {
		src.write(map[string]string{"f": fmt.Sprint(i)}).commit(fmt.Sprint("commit ", i))
		clock.Advance(time.Second)
		r, err := f.Fetch(ctx, Request{RepoURL: src.dir})
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
		dirs = append(dirs, r.Dir)
	}
	for i, d := range dirs {
		_, err := os.Stat(d)
		if kept := i >= 2; kept != (err == nil) {
			t.Errorf("tree %d: exists=%v, want %v", i, err == nil, kept)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(dirs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("trees dir holds %d entries, want 2", len(entries))
	}
}

func TestFetchHonoursACancelledContext(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"f": "1"}).commit("one")
	f := newTestFetcher(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Fetch(ctx, Request{RepoURL: src.dir}); err == nil {
		t.Fatal("fetch with a cancelled context succeeded")
	}
	// Cancelling says nothing about the remote: no backoff follows.
	if _, err := f.Fetch(context.Background(), Request{RepoURL: src.dir}); err != nil {
		t.Fatalf("fetch after a cancelled one: %v", err)
	}
}
