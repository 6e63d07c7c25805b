package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// tempPrefix marks a tree still being written; a crash leaves these behind
// and openRepo removes them.
const tempPrefix = ".tmp-"

// materialise writes the tree of c into dst, which must not exist. It walks
// git objects directly rather than checking out a worktree, so nothing but
// the tree is written: regular files with their mode, directories, and
// symlinks as symlinks (Contain later refuses those that leave the tree).
// The tree appears at dst complete or not at all. It is measured against b
// before anything is written, and ctx bounds both the measuring and the
// writing.
func materialise(ctx context.Context, s storer.EncodedObjectStorer, c *object.Commit, dst string, b TreeBudget) error {
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	if err := measureTree(ctx, s, tree, "", b); err != nil {
		return err
	}
	return writeTree(ctx, s, c, tree, "", dst, b)
}

// writeTree writes tree, already measured, at prefix (slash-separated, ""
// for the root) inside dst, which must not exist; dst appears complete or
// not at all.
func writeTree(ctx context.Context, s storer.EncodedObjectStorer, c *object.Commit, tree *object.Tree, prefix, dst string, b TreeBudget) (err error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), tempPrefix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if prefix != "" {
		if err := checkTreePath(prefix); err != nil {
			return err
		}
		p := tmp
		for part := range strings.SplitSeq(prefix, "/") {
			p = filepath.Join(p, part)
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
		}
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, entry, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("walk tree of %s: %w", c.Hash, err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("write tree of %s: %w", c.Hash, err)
		}
		name = joinTreePath(prefix, name)
		if err := checkTreePath(name); err != nil {
			return err
		}
		if err := writeEntry(s, filepath.Join(tmp, filepath.FromSlash(name)), entry, b.Blob); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return os.Rename(tmp, dst)
}

// joinTreePath puts a tree entry's name under prefix ("" for the root).
func joinTreePath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// checkTreePath refuses tree entry paths git itself would refuse; a crafted
// repository must not write outside the tree being materialised.
func checkTreePath(name string) error {
	for part := range strings.SplitSeq(name, "/") {
		if part == "" || part == "." || part == ".." || strings.ContainsRune(part, 0) {
			return fmt.Errorf("tree entry %q: invalid path", name)
		}
	}
	return nil
}

// writeEntry writes one entry; a file is cut at maxBlob bytes (negative: no
// limit), which measureTree has already checked against the object's size.
func writeEntry(s storer.EncodedObjectStorer, p string, e object.TreeEntry, maxBlob int64) error {
	switch e.Mode {
	case filemode.Dir, filemode.Submodule:
		// A submodule is left as an empty directory, like a checkout
		// without --recurse-submodules.
		return os.Mkdir(p, 0o755)
	case filemode.Regular, filemode.Deprecated:
		return writeBlob(s, p, e, 0o644, maxBlob)
	case filemode.Executable:
		return writeBlob(s, p, e, 0o755, maxBlob)
	case filemode.Symlink:
		r, err := openBlob(s, e)
		if err != nil {
			return err
		}
		defer r.Close()
		target, err := io.ReadAll(io.LimitReader(r, 4096))
		if err != nil {
			return err
		}
		return os.Symlink(string(target), p)
	default:
		return fmt.Errorf("unsupported file mode %s", e.Mode)
	}
}

// openBlob opens the content of a tree entry.
func openBlob(s storer.EncodedObjectStorer, e object.TreeEntry) (io.ReadCloser, error) {
	blob, err := object.GetBlob(s, e.Hash)
	if err != nil {
		return nil, err
	}
	return blob.Reader()
}

func writeBlob(s storer.EncodedObjectStorer, p string, e object.TreeEntry, perm os.FileMode, maxBlob int64) error {
	rc, err := openBlob(s, e)
	if err != nil {
		return err
	}
	defer rc.Close()
	var r io.Reader = rc
	if maxBlob >= 0 {
		r = io.LimitReader(rc, maxBlob)
	}
	// O_EXCL: never write through something already there.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Exact modes whatever the umask, so trees are the same everywhere.
	return os.Chmod(p, perm)
}

// pruneTrees keeps the trees of the keep most recently used commits in dir,
// and those of every leased commit whatever its age (each counts towards
// keep), and removes the rest. A commit's trees are its whole tree or its
// partial ones (see partialTreeName), kept or removed together, so that the
// applications reading different paths of one commit count once. Use is a
// directory's modification time, which serve sets on every Fetch that
// returns it; a commit was used when any of its trees was.
func pruneTrees(dir string, keep int, leased map[string]bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type commit struct {
		sha   string
		used  time.Time
		trees []string
	}
	bySHA := map[string]*commit{}
	var commits []*commit
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sha, _, ok := treeCommit(e.Name())
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		c := bySHA[sha]
		if c == nil {
			c = &commit{sha: sha}
			bySHA[sha] = c
			commits = append(commits, c)
		}
		c.trees = append(c.trees, e.Name())
		if info.ModTime().After(c.used) {
			c.used = info.ModTime()
		}
	}
	slices.SortFunc(commits, func(a, b *commit) int {
		if c := b.used.Compare(a.used); c != 0 {
			return c
		}
		return strings.Compare(a.sha, b.sha)
	})
	var errs []error
	kept := 0
	for _, c := range commits {
		if leased[c.sha] || kept < keep {
			kept++
			continue
		}
		for _, name := range c.trees {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeTemps deletes trees a crashed run left half written.
func removeTemps(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
