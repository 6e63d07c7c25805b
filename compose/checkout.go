package compose

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/source"
)

// The project's view of the checkout: how a render reads files of the
// application's repository (never outside it), and how paths the loader made
// absolute under its made-up root are turned back into the user's.

// refuseCheckoutPaths refuses a manifest that still names the loader's
// made-up checkout: $PWD used in a value that is not a file path (an
// environment variable, a label, a command) would hand the container a
// directory that exists on no node.
func (p *project) refuseCheckoutPaths(manifest string) error {
	if !strings.Contains(manifest, loaderTop) {
		return nil
	}
	f := p.files[0]
	return &fault.Error{File: f.rel, Err: fmt.Errorf(
		"$PWD is the application's directory in the repository checkout and may only be used in a file path (configs, secrets, env_file); a value that keeps it would name a directory no swarm node has: %w",
		ErrUnsupported)}
}

// repoRel is name, relative to base (itself relative to the repository
// root), relative to the repository root: slash-separated, as messages show
// it. An absolute name is shown as given.
func repoRel(base, name string) string {
	if filepath.IsAbs(name) {
		return filepath.ToSlash(name)
	}
	return path.Join(base, filepath.ToSlash(name))
}

// read returns the content of name, relative to the project directory.
func (p *project) read(name string) ([]byte, error) { return p.readAt(p.dir, name) }

// readAt returns the content of name, relative to base, refusing anything
// outside the checkout. Error messages name the file by its repository
// path, never by where the checkout happens to be.
func (p *project) readAt(base, name string) ([]byte, error) {
	if filepath.IsAbs(name) {
		return nil, fmt.Errorf("%q: %w (absolute path)", name, source.ErrOutsideRepository)
	}
	rel := repoRel(base, name)
	data, err := p.readRaw(rel)
	if err != nil {
		return nil, err
	}
	p.inputs.read(rel, data)
	return p.decrypt(rel, data)
}

// readRaw returns the content of rel, relative to the repository root, as
// stored: contained, within the size limit, not decrypted.
func (p *project) readRaw(rel string) ([]byte, error) {
	abs, err := source.Contain(p.root, filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	if err := p.checkFileSize(rel, abs); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, &fs.PathError{Op: "read", Path: rel, Err: pe.Err}
		}
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return data, nil
}

func (p *project) exists(name string) bool {
	ok := p.isFile(repoRel(p.dir, name))
	p.inputs.exists(repoRel(p.dir, name), ok)
	return ok
}

// isFile reports whether rel, relative to the repository root, is a
// regular file inside the checkout.
func (p *project) isFile(rel string) bool {
	abs, err := source.Contain(p.root, filepath.FromSlash(rel))
	if err != nil {
		return false
	}
	st, err := os.Stat(abs)
	return err == nil && st.Mode().IsRegular()
}

// inCheckout turns a path that $PWD made absolute under the loader's root
// back into one relative to the first compose file, as if written "./";
// any other path is returned as it is.
func (p *project) inCheckout(name string) string {
	if !within(loaderRoot, name) {
		return name
	}
	rel, err := filepath.Rel(path.Join(loaderRoot, p.work), name)
	if err != nil {
		return name
	}
	return filepath.ToSlash(rel)
}

// userPath shows a path the loader made absolute the way the user could
// have written it: relative to the project when it was relative.
func (p *project) userPath(abs string) string {
	if within(loaderTop, abs) {
		if rel, err := filepath.Rel(path.Join(loaderRoot, p.work), abs); err == nil {
			rel = filepath.ToSlash(rel)
			if !strings.HasPrefix(rel, "../") {
				rel = "./" + rel
			}
			return rel
		}
	}
	return abs
}

func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
