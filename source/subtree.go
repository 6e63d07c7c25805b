package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// A tree over the budget may still be served in part: when a request names
// the directory its application reads (Request.Path), and that directory
// alone is within the budget, only it is written, at its own place, into a
// directory of its own beside the commit's whole trees:
//
//	trees/<commit>/               the whole tree
//	trees/<commit>-<path digest>/ only <path>, at <path> within it
//
// so that a git bomb elsewhere in a monorepo refuses only the applications
// that read it. Both kinds are leased and pruned by commit (see pruneTrees).

// partialSep separates a commit from its path's digest in the name of a
// partial tree's directory.
const partialSep = "-"

// cleanRequestPath returns p slash-separated and clean, "" for the whole
// tree. It refuses a path that is absolute or climbs with "..", even one
// that would come back (a/../b): Path names a directory inside the
// repository and nothing else.
func cleanRequestPath(p string) (string, error) {
	slashed := filepath.ToSlash(p)
	if path.IsAbs(slashed) || filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q: %w (absolute path)", p, ErrOutsideRepository)
	}
	for part := range strings.SplitSeq(slashed, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q: %w", p, ErrOutsideRepository)
		}
	}
	clean := path.Clean(slashed)
	if clean == "." {
		return "", nil
	}
	if err := checkTreePath(clean); err != nil {
		return "", fmt.Errorf("path %q: %w", p, err)
	}
	return clean, nil
}

// partialTreeName names the directory holding only p of commit sha. A digest
// rather than p itself: p may be long and holds slashes.
func partialTreeName(sha, p string) string {
	sum := sha256.Sum256([]byte(p))
	return sha + partialSep + hex.EncodeToString(sum[:8])
}

// treeCommit returns the commit a directory of the trees directory holds
// (whole or in part), and whether the name is one of those at all.
func treeCommit(name string) (sha string, partial, ok bool) {
	if isFullSHA(name) {
		return name, false, true
	}
	sha, digest, found := strings.Cut(name, partialSep)
	if !found || !isFullSHA(sha) || len(digest) != 16 {
		return "", false, false
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return "", false, false
	}
	return sha, true, true
}

// removePartials deletes the partial trees of an earlier run: they were
// measured against the budget of that run, and the whole tree may fit the
// budget of this one.
func removePartials(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, partial, ok := treeCommit(e.Name()); ok && partial {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// errNotADirectory is why a path cannot be written alone: the commit has no
// directory there.
var errNotADirectory = errors.New("not a directory in the tree")

// materialiseSubtree writes only the directory p of c's tree into dst, at p
// within it, so that dst joined with p reads as the whole tree's would. It
// measures the directory against b, as materialise measures the whole tree,
// before anything is written.
func materialiseSubtree(ctx context.Context, s storer.EncodedObjectStorer, c *object.Commit, p, dst string, b TreeBudget) error {
	root, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	sub, err := subtree(s, root, p)
	if err != nil {
		return fmt.Errorf("path %s: %w", p, err)
	}
	if err := measureTree(ctx, s, sub, p, b); err != nil {
		return err
	}
	return writeTree(ctx, s, c, sub, p, dst, b)
}

// subtree returns the directory at p (clean, slash-separated) of root,
// following only directory entries: a file, symlink or submodule anywhere
// along p is not a directory of the tree.
func subtree(s storer.EncodedObjectStorer, root *object.Tree, p string) (*object.Tree, error) {
	t := root
	for part := range strings.SplitSeq(p, "/") {
		var next *object.TreeEntry
		for i := range t.Entries {
			if t.Entries[i].Name == part {
				next = &t.Entries[i]
				break
			}
		}
		if next == nil || next.Mode != filemode.Dir {
			return nil, errNotADirectory
		}
		var err error
		if t, err = object.GetTree(s, next.Hash); err != nil {
			return nil, err
		}
	}
	return t, nil
}
