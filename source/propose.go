package source

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/redact"
)

// ErrForeignCommit is returned when the branch a change is proposed on
// holds a commit its owner did not make: someone else pushed to it, and
// the proposal is held rather than pushed over their work.
var ErrForeignCommit = errors.New("the proposal branch holds a commit someone else made")

// ProposeRequest asks for a change to be proposed rather than committed:
// decided from the files at the head of Branch (the base), committed on
// that head, and pushed to Head, a branch the caller owns.
type ProposeRequest struct {
	CommitRequest
	// Head is the branch the commit is pushed to. It holds exactly one
	// commit on the base's head. While its tip is a commit Own (required)
	// accepts, it is replaced (a push leased on that tip: if the branch
	// moved, the push is refused); a commit Own does not accept stops the
	// proposal with ErrForeignCommit.
	Head string
}

// ProposeResult says what a ProposeRequest did.
type ProposeResult struct {
	CommitResult
	// Unchanged is true when Head's tip already proposed exactly this
	// change (its message is the one Change returned); nothing was
	// pushed.
	Unchanged bool
	// HeadCommit is Head's tip afterwards; "" when Head does not exist.
	HeadCommit string
}

// Propose clones the base branch (bare), runs Change on its head and, when
// Change returns a message, makes sure Head proposes it: nothing is pushed
// when Head's tip (the caller's own) already carries that message;
// otherwise the commit is built on the base's head and pushed to Head,
// created or replacing the caller's previous commit, never anyone else's.
// A push the remote refuses (Head or the base moved) fetches both again
// and decides anew, up to Attempts times. Errors are sanitised.
func Propose(ctx context.Context, req ProposeRequest) (res ProposeResult, err error) {
	if req.Head == "" || req.Head == req.Branch || req.Own == nil {
		return res, errors.New("propose: a head branch other than the base, and Own, are required")
	}
	base := plumbing.NewBranchReferenceName(req.Branch)
	head := plumbing.NewBranchReferenceName(req.Head)
	// The lease reads the remote's head from here.
	tracking := plumbing.NewRemoteReferenceName("origin", req.Head)
	sc, err := openScratch(ctx, req.CommitRequest, "flotilla-propose-", base)
	if err != nil {
		return res, err
	}
	defer sc.close()
	defer func() { err = redact.Error(err, sc.auth.secrets...) }()
	loc, a, signer, repo, attempts := sc.loc, sc.auth, sc.signer, sc.repo, sc.attempts
	// fetchHead brings Head's tip, if the branch exists, to tracking.
	fetchHead := func() (*object.Commit, error) {
		_ = repo.Storer.RemoveReference(tracking)
		err := repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: a.method, Tags: git.NoTags,
			RefSpecs: []config.RefSpec{config.RefSpec("+" + head + ":" + tracking)}, ProxyOptions: connDeadline(ctx, loc)})
		var missing git.NoMatchingRefSpecError
		switch {
		case errors.As(err, &missing):
			return nil, nil
		case err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate):
			return nil, fmt.Errorf("fetch %s branch %s: %w", loc.safe, req.Head, err)
		}
		ref, err := repo.Reference(tracking, true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return repo.CommitObject(ref.Hash())
	}
	for res.Attempts < attempts {
		res.Attempts++
		ref, err := repo.Reference(base, true)
		if err != nil {
			return res, fmt.Errorf("branch %s: %w", req.Branch, err)
		}
		parent, err := repo.CommitObject(ref.Hash())
		if err != nil {
			return res, err
		}
		tree, err := parent.Tree()
		if err != nil {
			return res, err
		}
		res.Base = parent.Hash.String()
		files := &Files{store: repo.Storer, tree: tree, written: map[string][]byte{}}
		msg, err := req.Change(ctx, files)
		if err != nil {
			return res, err
		}
		res.Message, res.Files = msg, files.order
		tip, err := fetchHead()
		if err != nil {
			return res, err
		}
		res.HeadCommit = ""
		if tip != nil {
			res.HeadCommit = tip.Hash.String()
		}
		if res.Attempts == 1 {
			// The head branch's tip is the last proposal; once it is
			// merged and deleted, the base has the updater's commit.
			if tip != nil && req.Own(tip) {
				res.LastOwn = commitRef(tip)
			} else if res.LastOwn, err = lastOwn(repo.Storer, parent.Hash, req.Own, OwnSearchDepth); err != nil {
				return res, fmt.Errorf("branch %s: looking for the last own commit: %w", req.Branch, err)
			}
		}
		if msg == "" || len(files.order) == 0 {
			// The base has it all: nothing to propose.
			return res, nil
		}
		if tip != nil && !req.Own(tip) {
			return res, fmt.Errorf("%s branch %s at %.12s: %w; not pushed over it", loc.safe, req.Head, tip.Hash, ErrForeignCommit)
		}
		if tip != nil && tip.Message == msg {
			res.Unchanged = true
			return res, nil
		}
		if req.DryRun {
			return res, nil
		}
		sig := signature(req.Author)
		h, err := files.commit(parent, msg, sig, signer)
		if err != nil {
			return res, fmt.Errorf("commit: %w", err)
		}
		if err := repo.Storer.SetReference(plumbing.NewHashReference(head, h)); err != nil {
			return res, err
		}
		opts := &git.PushOptions{RemoteName: "origin", Auth: a.method, ProxyOptions: connDeadline(ctx, loc),
			RefSpecs: []config.RefSpec{config.RefSpec(head + ":" + head)}}
		if tip != nil {
			// Replace the caller's own commit, and only it: the server
			// refuses the update unless the branch is still at tip.
			opts.ForceWithLease = &git.ForceWithLease{RefName: head, Hash: tip.Hash}
		}
		err = repo.PushContext(ctx, opts)
		if err == nil {
			res.Commit, res.HeadCommit, res.Time = h.String(), h.String(), sig.When
			return res, nil
		}
		if !rejected(err) && !strings.Contains(err.Error(), "failed to update ref") {
			return res, fmt.Errorf("push to %s branch %s: %w", loc.safe, req.Head, err)
		}
		// Head or the base moved: fetch the base again and decide anew.
		err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: a.method, Tags: git.NoTags,
			RefSpecs: []config.RefSpec{config.RefSpec("+" + base + ":" + base)}, ProxyOptions: connDeadline(ctx, loc)})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return res, fmt.Errorf("fetch %s branch %s after a rejected push: %w", loc.safe, req.Branch, err)
		}
	}
	return res, fmt.Errorf("%s branch %s: %w (%d attempts)", loc.safe, req.Head, ErrPushRejected, attempts)
}
