package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/application"
)

// ErrPushRejected is returned when every attempt's push was refused
// because the branch moved on meanwhile.
var ErrPushRejected = errors.New("push rejected: the branch moved on")

// CommitRequest asks for a change to be committed to a branch and pushed,
// the one write to git Flotilla makes (image automation). The push goes
// over the same transports and credentials as fetches, and is never
// forced.
type CommitRequest struct {
	RepoURL     string
	Branch      string
	Credentials *application.Credentials
	Author      application.CommitAuthor
	// Change computes the edit on a fresh checkout of the branch's head,
	// writing through files; it returns the commit message, or "" when
	// nothing is to be committed (then nothing is written). After a
	// rejected push it is called again on the new head, so it must decide
	// from the files, not from what it did before.
	Change func(ctx context.Context, files *Files) (message string, err error)
	// DryRun runs Change and reports, without committing or pushing.
	DryRun bool
	// Attempts bounds push retries. Default 3.
	Attempts int
	// ScratchDir holds the temporary clone. Default os.TempDir().
	ScratchDir string
}

// CommitResult says what a CommitRequest did.
type CommitResult struct {
	// Base is the head Change last ran on.
	Base string
	// Commit is the pushed commit; "" when nothing was committed.
	Commit string
	// Message is the last message Change returned.
	Message string
	// Files are the paths Change wrote, relative to the repository.
	Files []string
	// Attempts is how many times Change ran.
	Attempts int
}

// Files gives Change the checkout's files: reads and writes stay inside
// the repository (a symlink out of it, or to anything but a regular file,
// is refused, since the repository's author does not decide what the
// controller writes), and the paths written are what the commit stages.
type Files struct {
	root    string
	written []string
}

// ReadFile reads the repository file rel (slash-separated).
func (f *Files) ReadFile(rel string) ([]byte, error) {
	p, err := f.regular(rel)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// WriteFile replaces the content of the existing repository file rel,
// keeping its mode.
func (f *Files) WriteFile(rel string, data []byte) error {
	p, err := f.regular(rel)
	if err != nil {
		return err
	}
	info, err := os.Stat(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, data, info.Mode().Perm()); err != nil {
		return err
	}
	if !slices.Contains(f.written, rel) {
		f.written = append(f.written, rel)
	}
	return nil
}

func (f *Files) regular(rel string) (string, error) {
	p, err := Contain(f.root, rel)
	if err != nil {
		return "", err
	}
	info, err := os.Lstat(filepath.Join(f.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (a symlink or other); it is not written", rel)
	}
	return p, nil
}

// Commit clones req.Branch, runs req.Change, and commits and pushes what it
// wrote. A push the remote rejects (the branch moved) fetches the new head,
// resets onto it and runs Change again, up to req.Attempts times; it never
// force-pushes. Errors are sanitised.
func Commit(ctx context.Context, req CommitRequest) (res CommitResult, err error) {
	loc, err := parseLocation(req.RepoURL)
	if err != nil {
		return res, err
	}
	a, err := loadAuth(loc, req.Credentials)
	if err != nil {
		return res, err
	}
	defer func() { err = sanitize(err, a.secrets) }()
	attempts := req.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	if req.ScratchDir != "" {
		if err := os.MkdirAll(req.ScratchDir, 0o700); err != nil {
			return res, fmt.Errorf("scratch clone: %w", err)
		}
	}
	dir, err := os.MkdirTemp(req.ScratchDir, "flotilla-commit-")
	if err != nil {
		return res, fmt.Errorf("scratch clone: %w", err)
	}
	defer os.RemoveAll(dir)
	branch := plumbing.NewBranchReferenceName(req.Branch)
	repo, err := git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{
		URL: loc.remote, Auth: a.method, ReferenceName: branch, SingleBranch: true, Tags: git.NoTags,
		ProxyOptions: connDeadline(ctx, loc),
	})
	if err != nil {
		return res, fmt.Errorf("clone %s branch %s: %w", loc.safe, req.Branch, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return res, err
	}
	for res.Attempts < attempts {
		res.Attempts++
		head, err := repo.Head()
		if err != nil {
			return res, err
		}
		res.Base = head.Hash().String()
		files := &Files{root: dir}
		msg, err := req.Change(ctx, files)
		if err != nil {
			return res, err
		}
		res.Message, res.Files = msg, files.written
		if msg == "" || len(files.written) == 0 || req.DryRun {
			return res, nil
		}
		for _, p := range files.written {
			if _, err := wt.Add(p); err != nil {
				return res, fmt.Errorf("stage %s: %w", p, err)
			}
		}
		now := time.Now()
		sig := &object.Signature{Name: req.Author.Name, Email: req.Author.Email, When: now}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
		if err != nil {
			return res, fmt.Errorf("commit: %w", err)
		}
		spec := config.RefSpec(branch + ":" + branch) // no "+": never forced
		err = repo.PushContext(ctx, &git.PushOptions{RemoteName: "origin", Auth: a.method, RefSpecs: []config.RefSpec{spec}, ProxyOptions: connDeadline(ctx, loc)})
		if err == nil {
			res.Commit = h.String()
			return res, nil
		}
		if !rejected(err) {
			return res, fmt.Errorf("push to %s branch %s: %w", loc.safe, req.Branch, err)
		}
		// The branch moved: start again from its new head.
		remoteRef := plumbing.NewRemoteReferenceName("origin", req.Branch)
		err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: a.method, Tags: git.NoTags,
			RefSpecs: []config.RefSpec{config.RefSpec("+" + branch + ":" + remoteRef)}, ProxyOptions: connDeadline(ctx, loc)})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return res, fmt.Errorf("fetch %s branch %s after a rejected push: %w", loc.safe, req.Branch, err)
		}
		ref, err := repo.Reference(remoteRef, true)
		if err != nil {
			return res, err
		}
		if err := repo.Storer.SetReference(plumbing.NewHashReference(branch, ref.Hash())); err != nil {
			return res, err
		}
		if err := wt.Reset(&git.ResetOptions{Commit: ref.Hash(), Mode: git.HardReset}); err != nil {
			return res, fmt.Errorf("reset onto the new head: %w", err)
		}
	}
	return res, fmt.Errorf("%s branch %s: %w (%d attempts)", loc.safe, req.Branch, ErrPushRejected, attempts)
}

// rejected reports whether a push failed because the remote branch is not
// an ancestor of ours, as go-git finds it before sending or as the server
// says after.
func rejected(err error) bool {
	if errors.Is(err, git.ErrNonFastForwardUpdate) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "non-fast-forward") || strings.Contains(s, "fetch first") || strings.Contains(s, "rejected")
}
