package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/flotilla-gitops/flotilla/application"
)

// withoutGit leaves PATH naming only an empty directory, as in the
// controller's image, which has no git program.
func withoutGit(t *testing.T) {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
	if gitInstalled() {
		t.Fatal("git is still found with PATH emptied")
	}
}

// Without git, a local repository — a work tree or a bare one, named by
// path or by file:// URL — is served in process: the first fetch clones
// it and a later one gets a new commit.
func TestALocalRepositoryIsFetchedWithoutGit(t *testing.T) {
	src := newTestRepo(t) // checks for git before PATH is emptied
	src.write(map[string]string{"app/compose.yaml": "v: 1\n"})
	first := src.commit("one")
	withoutGit(t)
	bare := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainClone(bare, true, &git.CloneOptions{URL: localRemote(src.dir)}); err != nil {
		t.Fatalf("clone a bare copy without git: %v", err)
	}

	for _, tc := range []struct{ name, url string }{
		{"work tree by path", src.dir},
		{"work tree by file URL", "file://" + src.dir},
		{"bare by file URL", "file://" + bare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t)})
			rev, err := f.Fetch(context.Background(), Request{RepoURL: tc.url, Revision: "master"})
			if err != nil {
				t.Fatalf("first fetch: %v", err)
			}
			defer rev.Release()
			want := first
			if tc.url == "file://"+bare {
				want = headOf(t, bare).String()
			}
			if rev.Commit != want || !rev.Fetched {
				t.Fatalf("first fetch = %s (fetched %v), want %s fetched", rev.Commit, rev.Fetched, want)
			}
			checkFile(t, rev.Dir, "app/compose.yaml", "v: 1\n")
		})
	}

	// A second fetch into the same cache gets the commit made since.
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t)})
	for i, tc := range []struct{ url, content string }{{src.dir, "v: 1\n"}, {"file://" + src.dir, "v: 2\n"}} {
		if i == 1 {
			src.write(map[string]string{"app/compose.yaml": tc.content})
			src.commit("two")
		}
		rev, err := f.Fetch(context.Background(), Request{RepoURL: tc.url, Revision: "master"})
		if err != nil {
			t.Fatalf("fetch %d: %v", i+1, err)
		}
		if want := headOf(t, src.dir); rev.Commit != want.String() || !rev.Fetched {
			t.Fatalf("fetch %d = %s (fetched %v), want %s fetched", i+1, rev.Commit, rev.Fetched, want)
		}
		checkFile(t, rev.Dir, "app/compose.yaml", tc.content)
		rev.Release()
	}

	// The in-process server lists no peeled tags; an annotated tag is
	// peeled in the cache instead.
	src.tag("v1", first, true)
	tagged := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t)})
	for range 2 {
		rev, err := tagged.Fetch(context.Background(), Request{RepoURL: src.dir, Revision: "v1"})
		if err != nil || rev.Commit != first {
			t.Fatalf("fetch of annotated tag v1 = %v, %v; want %s", rev, err, first)
		}
		checkFile(t, rev.Dir, "app/compose.yaml", "v: 1\n")
		rev.Release()
	}

	// What is fetched is still measured against the tree budget.
	small := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), TreeBudget: TreeBudget{Entries: 1}})
	if _, err := small.Fetch(context.Background(), Request{RepoURL: src.dir}); !errors.Is(err, ErrTreeTooLarge) {
		t.Fatalf("fetch over the budget = %v, want ErrTreeTooLarge", err)
	}

	// No repository at the path is unreachable, as with git.
	if _, err := f.Fetch(context.Background(), Request{RepoURL: t.TempDir()}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("fetch of an empty directory = %v, want ErrUnreachable", err)
	}
}

// Whether git is installed is asked on every fetch, not once per
// repository: a Fetcher that first read a repository with git reads its
// next commit without it.
func TestGitIsLookedUpOnEveryFetch(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"f": "1"})
	src.commit("one")
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t)})
	rev, err := f.Fetch(context.Background(), Request{RepoURL: src.dir})
	if err != nil {
		t.Fatalf("fetch with git: %v", err)
	}
	rev.Release()
	withoutGit(t)
	src.write(map[string]string{"f": "2"})
	two := src.commit("two")
	rev, err = f.Fetch(context.Background(), Request{RepoURL: src.dir})
	if err != nil {
		t.Fatalf("fetch without git: %v", err)
	}
	defer rev.Release()
	if rev.Commit != two || !rev.Fetched {
		t.Fatalf("fetch without git = %s (fetched %v), want %s fetched", rev.Commit, rev.Fetched, two)
	}
	checkFile(t, rev.Dir, "f", "2")
}

// Without git a push to a local repository is refused with an error that
// says git is needed, and the branch is left as it was.
func TestAPushToALocalRepositoryWithoutGitSaysGitIsNeeded(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"compose.yaml": "services: {}\n"})
	src.commit("initial")
	origin := bareCopy(t, src)
	before := headOf(t, origin)
	withoutGit(t)

	req := CommitRequest{RepoURL: origin, Branch: "master", Author: application.CommitAuthor{Name: "Bot", Email: "bot@example.invalid"}}
	req.Change = func(_ context.Context, f *Files) (string, error) {
		return "change", f.WriteFile("compose.yaml", []byte("services: {a: {}}\n"))
	}
	_, err := Commit(context.Background(), req)
	if !errors.Is(err, ErrLocalPushNeedsGit) {
		t.Fatalf("commit = %v, want ErrLocalPushNeedsGit", err)
	}
	if after := headOf(t, origin); after != before {
		t.Errorf("branch moved from %s to %s", before, after)
	}
}

// The in-process server cannot be interrupted while it walks the objects
// to send; the call returns at the deadline all the same, and what the
// server returns later is discarded.
func TestAnInProcessCallReturnsAtItsDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	release, discarded := make(chan struct{}), make(chan int, 1)
	_, err := bounded(ctx, func() (int, error) {
		<-release
		return 7, nil
	}, func(v int) { discarded <- v })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bounded = %v, want the deadline", err)
	}
	close(release)
	select {
	case v := <-discarded:
		if v != 7 {
			t.Errorf("discarded %d, want 7", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late result was never discarded")
	}
}

func checkFile(t *testing.T, dir, name, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil || string(b) != want {
		t.Fatalf("%s = %q, %v; want %q", name, b, err, want)
	}
}
