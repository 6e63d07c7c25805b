// Package gittest makes git repositories on disk for tests, with go-git, so
// that tests exercise the real fetch path against a repository they control.
package gittest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
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

// Bomb writes, without touching the worktree, a tree that holds the tree
// below it fanout times, levels deep, over fanout copies of one small file,
// and returns its hash: a few hundred bytes of objects that expand to
// fanout^levels files.
func (r *Repo) Bomb(fanout, levels int) string {
	r.t.Helper()
	blob := r.writeObject(plumbing.BlobObject, func(o plumbing.EncodedObject) error {
		w, err := o.Writer()
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte("boom\n")); err != nil {
			return err
		}
		return w.Close()
	})
	h, mode, prefix := blob, filemode.Regular, "f"
	for range levels {
		t := &object.Tree{}
		for i := range fanout {
			t.Entries = append(t.Entries, object.TreeEntry{Name: fmt.Sprintf("%s%d", prefix, i), Mode: mode, Hash: h})
		}
		h, mode, prefix = r.writeTree(t), filemode.Dir, "d"
	}
	return h.String()
}

// CommitGraft commits files as Commit does, then commits again with each
// tree of grafts (slash-separated path → tree hash, from Bomb say) put at its
// path, and returns the second commit. The worktree does not hold the
// grafted trees; a later Commit drops them again.
func (r *Repo) CommitGraft(msg string, files map[string]string, grafts map[string]string) string {
	r.t.Helper()
	first := r.Commit(msg, files)
	c, err := r.repo.CommitObject(plumbing.NewHash(first))
	if err != nil {
		r.t.Fatal(err)
	}
	root := c.TreeHash
	for p, tree := range grafts {
		root = r.graft(&root, strings.Split(p, "/"), plumbing.NewHash(tree))
	}
	r.n++
	next := &object.Commit{
		Author:       object.Signature{Name: "Test", Email: "test@example.invalid", When: time.Date(2026, 1, 1, 0, 0, r.n, 0, time.UTC)},
		Message:      msg,
		TreeHash:     root,
		ParentHashes: []plumbing.Hash{c.Hash},
	}
	next.Committer = next.Author
	h := r.writeObject(plumbing.CommitObject, next.Encode)
	head, err := r.repo.Head()
	if err != nil {
		r.t.Fatal(err)
	}
	r.SetRef(head.Name().String(), h.String())
	return h.String()
}

// graft returns the hash of tree (nil: an empty one) with the tree at put
// under the path parts, replacing whatever was there.
func (r *Repo) graft(tree *plumbing.Hash, parts []string, put plumbing.Hash) plumbing.Hash {
	t := &object.Tree{}
	if tree != nil {
		old, err := r.repo.TreeObject(*tree)
		if err != nil {
			r.t.Fatal(err)
		}
		t.Entries = slices.Clone(old.Entries)
	}
	h := put
	i := slices.IndexFunc(t.Entries, func(e object.TreeEntry) bool { return e.Name == parts[0] })
	if len(parts) > 1 {
		var sub *plumbing.Hash
		if i >= 0 && t.Entries[i].Mode == filemode.Dir {
			sub = &t.Entries[i].Hash
		}
		h = r.graft(sub, parts[1:], put)
	}
	if i >= 0 {
		t.Entries = slices.Delete(t.Entries, i, i+1)
	}
	t.Entries = append(t.Entries, object.TreeEntry{Name: parts[0], Mode: filemode.Dir, Hash: h})
	return r.writeTree(t)
}

// writeTree stores t with its entries in git's order, where a directory
// sorts as if its name ended in a slash.
func (r *Repo) writeTree(t *object.Tree) plumbing.Hash {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(t.Entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
	return r.writeObject(plumbing.TreeObject, t.Encode)
}

func (r *Repo) writeObject(typ plumbing.ObjectType, encode func(plumbing.EncodedObject) error) plumbing.Hash {
	r.t.Helper()
	o := r.repo.Storer.NewEncodedObject()
	o.SetType(typ)
	if err := encode(o); err != nil {
		r.t.Fatal(err)
	}
	h, err := r.repo.Storer.SetEncodedObject(o)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}
