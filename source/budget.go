package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// ErrTreeTooLarge means a commit's tree would expand past the Fetcher's
// TreeBudget; nothing of it was written. It is bad input: the same commit
// is refused again until the repository changes or the operator raises the
// budget.
var ErrTreeTooLarge = errors.New("tree exceeds the git tree budget")

// Defaults of TreeBudget, generous for a configuration repository and small
// enough that a few of them fit on a controller's disk at once.
const (
	// DefaultMaxTreeEntries: a large monorepo checkout (the Linux kernel)
	// is about 90,000 files.
	DefaultMaxTreeEntries = 100_000
	// DefaultMaxTreeBytes: the size GitHub asks repositories to stay under.
	DefaultMaxTreeBytes = 1 << 30
	// DefaultMaxTreeDepth: deeper than any path a real tree holds, and far
	// below PATH_MAX.
	DefaultMaxTreeDepth = 64
	// DefaultMaxBlobBytes: GitHub refuses files larger than 100 MiB, so no
	// repository hosted there holds one.
	DefaultMaxBlobBytes = 100 << 20
)

// TreeBudget bounds what one commit's tree may expand to on disk. A tree
// that holds the same subtree many times (a "git bomb") is a few kilobytes
// of objects and millions of files once written; the budget counts every
// occurrence, and the whole tree is measured before anything is written.
// A zero field takes its default; a negative one means no limit.
type TreeBudget struct {
	// Entries bounds files, directories and symlinks together.
	Entries int
	// Bytes bounds the sum of the sizes of every file written.
	Bytes int64
	// Depth bounds the number of path elements of any entry.
	Depth int
	// Blob bounds the size of any one file.
	Blob int64
}

// withDefaults fills zero fields.
func (b TreeBudget) withDefaults() TreeBudget {
	if b.Entries == 0 {
		b.Entries = DefaultMaxTreeEntries
	}
	if b.Bytes == 0 {
		b.Bytes = DefaultMaxTreeBytes
	}
	if b.Depth == 0 {
		b.Depth = DefaultMaxTreeDepth
	}
	if b.Blob == 0 {
		b.Blob = DefaultMaxBlobBytes
	}
	return b
}

// measureTree walks tree as writeTree will write it at prefix ("" for the
// root) and refuses it at the first entry past b, naming that entry's path
// in the repository and the limit; the directories of prefix count too.
// Its work is bounded by b.Entries however the tree is shaped, since it
// stops there; it reads blob sizes from object headers, never their
// content.
func measureTree(ctx context.Context, s storer.EncodedObjectStorer, tree *object.Tree, prefix string, b TreeBudget) error {
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	var entries int
	var bytes int64
	if prefix != "" {
		entries = strings.Count(prefix, "/") + 1
		if b.Entries >= 0 && entries > b.Entries {
			return overBudget(prefix, "more than %d files and directories", b.Entries)
		}
		if b.Depth >= 0 && entries > b.Depth {
			return overBudget(prefix, "deeper than %d directories", b.Depth)
		}
	}
	sizes := make(map[plumbing.Hash]int64)
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("walk tree: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("measure tree: %w", err)
		}
		name = joinTreePath(prefix, name)
		if err := checkTreePath(name); err != nil {
			return err
		}
		entries++
		if b.Entries >= 0 && entries > b.Entries {
			return overBudget(name, "more than %d files and directories", b.Entries)
		}
		if depth := strings.Count(name, "/") + 1; b.Depth >= 0 && depth > b.Depth {
			return overBudget(name, "deeper than %d directories", b.Depth)
		}
		if !isFileMode(e.Mode) {
			continue
		}
		size, ok := sizes[e.Hash]
		if !ok {
			o, err := s.EncodedObject(plumbing.BlobObject, e.Hash)
			if err != nil {
				return fmt.Errorf("tree entry %s: %w", name, err)
			}
			size = o.Size()
			sizes[e.Hash] = size
		}
		if b.Blob >= 0 && size > b.Blob {
			return overBudget(name, "a file of %d bytes, more than %d", size, b.Blob)
		}
		bytes += size
		if b.Bytes >= 0 && bytes > b.Bytes {
			return overBudget(name, "more than %d bytes in all", b.Bytes)
		}
	}
}

func isFileMode(m filemode.FileMode) bool {
	switch m {
	case filemode.Regular, filemode.Deprecated, filemode.Executable, filemode.Symlink:
		return true
	}
	return false
}

func overBudget(name, format string, args ...any) error {
	return fmt.Errorf("at %s: %s: %w", name, fmt.Sprintf(format, args...), ErrTreeTooLarge)
}
