package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideRepository is wrapped by every refusal to read a path that leaves
// the repository checkout.
var ErrOutsideRepository = errors.New("path leaves the repository checkout")

// Contain resolves rel against root and returns the absolute path, refusing
// any path that ends up outside root: an absolute path, a ".." that climbs out,
// or a symlink (at any component) that points out. root itself must exist.
// The file named need not exist; the existing part of its path is resolved.
func Contain(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q: %w (absolute path)", rel, ErrOutsideRepository)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("resolve repository root: %w", err)
	}
	realRoot, err = filepath.Abs(realRoot)
	if err != nil {
		return "", err
	}
	joined := filepath.Join(realRoot, rel)
	if !within(realRoot, joined) {
		return "", fmt.Errorf("%q: %w", rel, ErrOutsideRepository)
	}
	resolved, err := evalExisting(joined)
	if err != nil {
		return "", err
	}
	if !within(realRoot, resolved) {
		return "", fmt.Errorf("%q: %w (symlink to %s)", rel, ErrOutsideRepository, resolved)
	}
	return resolved, nil
}

// evalExisting resolves symlinks in the longest existing prefix of p and
// appends the rest unchanged.
func evalExisting(p string) (string, error) {
	rest := ""
	cur := p
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		// A component that exists but cannot be resolved is a dangling
		// symlink. Its target is unknown until something creates it, so it
		// is refused rather than approved as a missing file.
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("%s: %w (dangling symlink)", cur, ErrOutsideRepository)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func within(root, p string) bool {
	if p == root {
		return true
	}
	return strings.HasPrefix(p, root+string(filepath.Separator))
}
