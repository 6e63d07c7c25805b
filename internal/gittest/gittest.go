// Package gittest makes git repositories on disk for tests, with go-git, so
// that tests exercise the real fetch path against a repository they control.
package gittest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a non-bare repository whose branch "main" tests commit to.
type Repo struct {
	t    testing.TB
	Dir  string
	repo *git.Repository
	n    int
}

// New creates an empty repository with "main" as its initial branch.
func New(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatalf("git init: %v", err)
	}
	cfg, err := r.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Init.DefaultBranch = "main"
	if err := r.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return &Repo{t: t, Dir: dir, repo: r}
}

// Commit writes files (slash-separated path → content; "" content deletes
// the file) and commits everything, returning the commit hash.
func (r *Repo) Commit(msg string, files map[string]string) string {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(r.Dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatalf("git add: %v", err)
	}
	r.n++
	h, err := wt.Commit(msg, &git.CommitOptions{
		AllowEmptyCommits: true,
		Author: &object.Signature{
			Name: "Test", Email: "test@example.invalid",
			When: time.Date(2026, 1, 1, 0, 0, r.n, 0, time.UTC),
		},
	})
	if err != nil {
		r.t.Fatalf("git commit: %v", err)
	}
	return h.String()
}

// SetRef points the reference name (refs/pull/7/head, say) at hash, as a
// forge does when a pull request is opened or pushed to.
func (r *Repo) SetRef(name, hash string) {
	r.t.Helper()
	ref := plumbing.NewHashReference(plumbing.ReferenceName(name), plumbing.NewHash(hash))
	if err := r.repo.Storer.SetReference(ref); err != nil {
		r.t.Fatalf("set %s: %v", name, err)
	}
}

// DeleteRef removes the reference name, as a forge does when a pull
// request is closed.
func (r *Repo) DeleteRef(name string) {
	r.t.Helper()
	if err := r.repo.Storer.RemoveReference(plumbing.ReferenceName(name)); err != nil {
		r.t.Fatalf("delete %s: %v", name, err)
	}
}
