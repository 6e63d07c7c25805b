package source

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// testRepo is a repository on disk that a test writes commits to with
// go-git, standing in for a remote.
type testRepo struct {
	t    *testing.T
	dir  string
	repo *git.Repository
	n    int
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	requireUploadPack(t)
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &testRepo{t: t, dir: dir, repo: repo}
}

var uploadPack = sync.OnceValue(func() error {
	_, err := exec.LookPath("git")
	return err
})

// requireUploadPack skips when go-git cannot serve local repositories: its
// file transport runs git-upload-pack.
func requireUploadPack(t *testing.T) {
	t.Helper()
	if err := uploadPack(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git is required for local repositories: %v", err)
		}
		t.Skipf("git not installed: %v", err)
	}
}

// write creates or replaces files (name → content) in the worktree.
func (r *testRepo) write(files map[string]string) *testRepo {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	return r
}

// commit stages everything and commits it, returning the commit SHA.
func (r *testRepo) commit(msg string) string {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatal(err)
	}
	r.n++
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{
		Name:  "Ada",
		Email: "ada@example.com",
		When:  time.Date(2024, 1, 1, 0, 0, r.n, 0, time.UTC),
	}})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

func (r *testRepo) tag(name, sha string, annotated bool) string {
	r.t.Helper()
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Message: "release " + name, Tagger: &object.Signature{Name: "Ada", Email: "ada@example.com", When: time.Unix(0, 0)}}
	}
	ref, err := r.repo.CreateTag(name, plumbing.NewHash(sha), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return ref.Hash().String()
}

// fakeClock is a settable Options.Clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestFetcher(t *testing.T, clock *fakeClock) *Fetcher {
	t.Helper()
	if clock == nil {
		clock = newFakeClock()
	}
	return New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), Clock: clock.Now})
}

// testLogger shows the fetcher's logs only for a failing test.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
