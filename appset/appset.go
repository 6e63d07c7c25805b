// Package appset turns the application sets of an applications file into
// applications: each generator yields parameter sets (one per directory of
// a repository, list element, swarm, change-request ref, or pair of two
// generators' elements), and each parameter set fills the set's template.
//
// Generators read git through package source. One that fails (a
// repository that does not answer) must not look like one that yields
// nothing, since that would remove every application the set made: the
// Expander remembers each set's last good expansion and keeps it, and says
// which set failed and why.
package appset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/source"
)

// Fetcher makes a revision of a repository available on disk.
type Fetcher interface {
	Fetch(ctx context.Context, req source.Request) (*source.Revision, error)
}

// RefLister lists a repository's refs and the commits they point to.
type RefLister interface {
	ListRefs(ctx context.Context, repoURL string, creds *application.Credentials) (map[string]string, error)
}

// Options configure an Expander.
type Options struct {
	// Fetcher serves the git generator. Nil: git generators fail.
	Fetcher Fetcher
	// Refs serves the pull-request generator. Nil: it fails.
	Refs RefLister
	// Swarms names the swarms the controller deploys to, for the swarms
	// generator. Nil: only LocalSwarm.
	Swarms func() []string
	// Forges gives the pull-request generator its forge's client and the
	// repository's owner/name there. Nil: ForgeClient.
	Forges func(*application.PullRequestGenerator) (forge.Lister, string, error)
	// Now is the clock previews' TTL is measured with. Nil: time.Now.
	Now func() time.Time
	// Log receives which pull requests a preview set leaves out and why,
	// once per change. Nil: not logged.
	Log *slog.Logger
}

// LocalSwarm is the name the swarms generator gives the controller's own
// swarm when no other list is known.
const LocalSwarm = "local"

// Params are one element's parameters, as a template sees them.
type Params map[string]any

// Expander expands sets and remembers each set's last good expansion. It
// is safe for concurrent use.
type Expander struct {
	opts Options
	mu   sync.Mutex
	last map[string][]application.Application // by set name
	// left is each preview generator's last report of what it left out,
	// so that a report is logged when it changes, not every expansion.
	left map[string]string
}

// New returns an Expander.
func New(opts Options) *Expander {
	return &Expander{opts: opts, last: map[string][]application.Application{}, left: map[string]string{}}
}

// SetError is one set that could not be expanded this time.
type SetError struct {
	Set string
	// Kept is true when the set's previous applications were kept.
	Kept bool
	Err  error
}

func (e *SetError) Error() string {
	kept := "it generates nothing until it succeeds"
	if e.Kept {
		kept = "keeping the applications it generated before"
	}
	return fmt.Sprintf("application set %q: %v; %s", e.Set, e.Err, kept)
}

func (e *SetError) Unwrap() error { return e.Err }

// ReadError is a generator whose repository could not be read: what the set
// generates is unknown, which is not the same as wrong. Its message is the
// read's own.
type ReadError struct {
	RepoURL string
	Err     error
}

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Expand generates the applications of every set of f, in set order and,
// within a set, in generator order. A set that fails contributes its last
// good expansion (if any) and a *SetError in the joined error; the
// applications are returned either way. Sets that left the file are
// forgotten.
func (e *Expander) Expand(ctx context.Context, f *application.File) ([]application.Application, error) {
	var out []application.Application
	var errs []error
	seen := map[string]bool{}
	for i := range f.ApplicationSets {
		s := &f.ApplicationSets[i]
		seen[s.Name] = true
		apps, err := e.expandSet(ctx, s, i)
		e.mu.Lock()
		if err != nil {
			prev, ok := e.last[s.Name]
			errs = append(errs, &SetError{Set: s.Name, Kept: ok, Err: err})
			apps = prev
		} else {
			e.last[s.Name] = apps
		}
		e.mu.Unlock()
		out = append(out, apps...)
	}
	e.mu.Lock()
	for name := range e.last {
		if !seen[name] {
			delete(e.last, name)
		}
	}
	e.mu.Unlock()
	return out, errors.Join(errs...)
}

// expandSet runs the set's generators and fills its template once per
// element. Two elements that give one name are an error of the set.
func (e *Expander) expandSet(ctx context.Context, s *application.ApplicationSet, index int) ([]application.Application, error) {
	var elems []Params
	for i := range s.Generators {
		ps, err := e.generate(ctx, &s.Generators[i])
		if err != nil {
			return nil, fmt.Errorf("generators[%d]: %w", i, err)
		}
		elems = append(elems, ps...)
	}
	preview := s.MakesPreviews()
	prune := s.Prune || preview
	names := map[string]int{}
	out := make([]application.Application, 0, len(elems))
	for i, ps := range elems {
		a, err := Fill(s.Template, ps)
		if err != nil {
			return nil, fmt.Errorf("template for element %d (%s): %w", i, describe(ps), err)
		}
		if j, dup := names[a.Name]; dup {
			return nil, fmt.Errorf("elements %d and %d both make an application named %q; the template's name must differ per element", j, i, a.Name)
		}
		names[a.Name] = i
		if preview {
			// A preview runs a pull request's code: it never inherits
			// the template's allow list or key, only what the set grants
			// (its store entries come from the same block: Defaults).
			a.Allow = application.Allow{}
			a.SOPS = nil
			if s.Preview != nil {
				a.Allow = s.Preview.Allow
				a.SOPS = s.Preview.SOPS
			}
			previewFeedback(&a, s, ps)
		}
		a.Generated = &application.Generated{Set: s.Name, Prune: prune, Preview: preview, Index: index, Element: describe(ps)}
		out = append(out, a)
	}
	return out, nil
}

// Prunes says whether the set removes the stacks of the applications it
// stops generating: it says prune, or it makes pull-request previews, whose
// stacks go with their pull request. The controller asks it of the sets of
// the file it runs, so that a stack a set made before a restart is judged
// by what the set says now.
func Prunes(s *application.ApplicationSet) bool {
	return s.Prune || s.MakesPreviews()
}

// Fill returns a copy of tpl with every string executed as a template over
// ps. A parameter the element does not have is an error, not an empty
// string: an application named "svc-" is worse than none.
func Fill(tpl application.Application, ps Params) (application.Application, error) {
	a := tpl
	a.Generated = nil
	err := application.WalkStrings(&a, func(field, v string) (string, error) {
		if !strings.Contains(v, "{{") {
			return v, nil
		}
		t, err := template.New(field).Funcs(application.TemplateFuncs).Option("missingkey=error").Parse(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, map[string]any(ps)); err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return b.String(), nil
	})
	return a, err
}

// describe names an element in messages by its parameters, sorted.
func describe(ps Params) string {
	keys := slices.Sorted(maps.Keys(ps))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, ps[k]))
	}
	return strings.Join(parts, " ")
}

// generate runs one generator.
func (e *Expander) generate(ctx context.Context, g *application.Generator) ([]Params, error) {
	switch {
	case g.List != nil:
		out := make([]Params, len(g.List.Elements))
		for i, el := range g.List.Elements {
			out[i] = Params(maps.Clone(map[string]any(el)))
		}
		return out, nil
	case g.Git != nil:
		return e.directories(ctx, g.Git)
	case g.Swarms != nil:
		return e.swarms(g.Swarms), nil
	case g.PullRequest != nil:
		return e.pullRequests(ctx, g.PullRequest)
	case g.Matrix != nil:
		return e.matrix(ctx, g.Matrix)
	}
	return nil, errors.New("the generator names no kind")
}

// directories lists the directories of the repository matching the
// generator's patterns, minus its excludes, sorted, each once.
func (e *Expander) directories(ctx context.Context, g *application.GitGenerator) ([]Params, error) {
	if e.opts.Fetcher == nil {
		return nil, errors.New("git generator: no fetcher configured")
	}
	// No Path: the patterns are matched against the whole tree, so a
	// tree over the git tree budget fails the generator.
	rev, err := e.opts.Fetcher.Fetch(ctx, source.Request{RepoURL: g.RepoURL, Revision: g.Revision, Credentials: g.Credentials})
	if err != nil {
		return nil, fmt.Errorf("git generator: %w", &ReadError{RepoURL: g.RepoURL, Err: err})
	}
	defer rev.Release()
	found := map[string]bool{}
	for _, pat := range g.Directories {
		matches, err := filepath.Glob(filepath.Join(rev.Dir, filepath.FromSlash(pat)))
		if err != nil {
			return nil, fmt.Errorf("git generator: directories %q: %w", pat, err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(rev.Dir, m)
			if err != nil {
				continue
			}
			rel = filepath.ToSlash(rel)
			// A symlink leading out of the checkout is not a directory
			// of the repository.
			abs, err := source.Contain(rev.Dir, rel)
			if err != nil {
				continue
			}
			if fi, err := os.Stat(abs); err != nil || !fi.IsDir() || rel == ".git" || strings.HasPrefix(rel, ".git/") {
				continue
			}
			if excluded(rel, g.Exclude) {
				continue
			}
			found[rel] = true
		}
	}
	out := make([]Params, 0, len(found))
	for _, rel := range slices.Sorted(maps.Keys(found)) {
		out = append(out, Params{"path": rel, "basename": path.Base(rel)})
	}
	return out, nil
}

func excluded(rel string, pats []string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, rel); ok || p == rel {
			return true
		}
	}
	return false
}

// swarms yields one element per swarm whose name matches the generator's
// globs (every swarm without any).
func (e *Expander) swarms(g *application.SwarmsGenerator) []Params {
	names := []string{LocalSwarm}
	if e.opts.Swarms != nil {
		names = e.opts.Swarms()
	}
	var out []Params
	for _, n := range names {
		if len(g.Names) > 0 && !excluded(n, g.Names) {
			continue
		}
		out = append(out, Params{"name": n})
	}
	return out
}

// matrix yields every pair of the two generators' elements, merged.
func (e *Expander) matrix(ctx context.Context, m *application.MatrixGenerator) ([]Params, error) {
	if len(m.Generators) != 2 {
		return nil, fmt.Errorf("matrix: %d generators, want 2", len(m.Generators))
	}
	a, err := e.generate(ctx, &m.Generators[0])
	if err != nil {
		return nil, fmt.Errorf("matrix generators[0]: %w", err)
	}
	b, err := e.generate(ctx, &m.Generators[1])
	if err != nil {
		return nil, fmt.Errorf("matrix generators[1]: %w", err)
	}
	out := make([]Params, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			p := maps.Clone(x)
			for k, v := range y {
				if _, both := p[k]; both {
					return nil, fmt.Errorf("matrix: both generators set the parameter %q", k)
				}
				p[k] = v
			}
			out = append(out, p)
		}
	}
	return out, nil
}
