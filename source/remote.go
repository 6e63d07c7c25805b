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
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// errEmptyRemote is a remote with no refs at all: no revision can exist.
var errEmptyRemote = errors.New("remote repository is empty")

// remoteName is only a label: the remote lives in memory, never in the
// cache's config, so the URL is not written to disk.
const remoteName = "origin"

// remoteHeadRef stores a detached remote HEAD, which has no branch to
// mirror.
const remoteHeadRef = plumbing.ReferenceName("refs/flotilla/HEAD")

func newRemote(repo *git.Repository, loc location) *git.Remote {
	return git.NewRemote(repo.Storer, &config.RemoteConfig{Name: remoteName, URLs: []string{loc.url()}})
}

// listRefs is ls-remote: the remote's refs, with annotated tags also listed
// peeled as "<name>^{}".
func listRefs(ctx context.Context, remote *git.Remote, loc location, a auth) (map[plumbing.ReferenceName]*plumbing.Reference, error) {
	list, err := remote.ListContext(ctx, &git.ListOptions{Auth: a.method, PeelingOption: git.AppendPeeled, ProxyOptions: connDeadline(ctx, loc)})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) || (err == nil && len(list) == 0) {
		return nil, errEmptyRemote
	}
	if err != nil {
		return nil, err
	}
	refs := make(map[plumbing.ReferenceName]*plumbing.Reference, len(list))
	for _, ref := range list {
		refs[ref.Name()] = ref
	}
	return refs, nil
}

// target is what to fetch for a revision and how to find its commit after.
type target struct {
	hash     plumbing.Hash // the commit (peeled) the remote listed
	refspecs []config.RefSpec
	local    plumbing.ReferenceName // where the fetch stores it; "" for a SHA
}

// shaTarget fetches every branch and tag: a bare SHA cannot be asked for by
// name, and not every server lets a client ask for it directly.
func shaTarget(h plumbing.Hash) target {
	return target{
		hash: h,
		refspecs: []config.RefSpec{
			"+refs/heads/*:refs/heads/*",
			"+refs/tags/*:refs/tags/*",
		},
	}
}

// resolve finds revision among the remote's refs the way git does for a
// short name: a full ref name, then a tag, then a branch; "HEAD" follows the
// remote's default branch. Tags are peeled to their commit.
func resolve(refs map[plumbing.ReferenceName]*plumbing.Reference, revision string) (target, bool) {
	if revision == "HEAD" {
		head, ok := refs[plumbing.HEAD]
		if !ok {
			return target{}, false
		}
		if head.Type() != plumbing.SymbolicReference {
			return mirror(refs, plumbing.HEAD, remoteHeadRef), true
		}
		if _, ok := refs[head.Target()]; !ok {
			return target{}, false
		}
		return mirror(refs, head.Target(), head.Target()), true
	}
	var candidates []plumbing.ReferenceName
	if strings.HasPrefix(revision, "refs/") {
		candidates = append(candidates, plumbing.ReferenceName(revision))
	}
	candidates = append(candidates,
		plumbing.NewTagReferenceName(revision),
		plumbing.NewBranchReferenceName(revision))
	for _, name := range candidates {
		if ref, ok := refs[name]; ok && ref.Type() == plumbing.HashReference {
			return mirror(refs, name, name), true
		}
	}
	return target{}, false
}

// mirror fetches the remote ref name into the cache as local.
func mirror(refs map[plumbing.ReferenceName]*plumbing.Reference, name, local plumbing.ReferenceName) target {
	h := refs[name].Hash()
	if peeled, ok := refs[name+"^{}"]; ok {
		h = peeled.Hash()
	}
	return target{
		hash:     h,
		refspecs: []config.RefSpec{config.RefSpec("+" + name.String() + ":" + local.String())},
		local:    local,
	}
}

// commit returns the target's commit from the cache after a fetch. For a ref
// it reads what the fetch stored, which is newer than the listing if the
// remote moved in between.
func (t target) commit(repo *git.Repository) (*object.Commit, error) {
	h := t.hash
	if t.local != "" {
		ref, err := repo.Storer.Reference(t.local)
		if err != nil {
			return nil, err
		}
		h = ref.Hash()
	}
	return peel(repo, h)
}

// fetchRefs fetches refspecs, whole history but no other tags. Depth-limited
// fetches are avoided: go-git's handling of shallow caches that are fetched
// into again is not dependable.
func fetchRefs(ctx context.Context, remote *git.Remote, loc location, a auth, refspecs []config.RefSpec) error {
	err := remote.FetchContext(ctx, &git.FetchOptions{
		RemoteName:   remoteName,
		RefSpecs:     refspecs,
		Auth:         a.method,
		Tags:         git.NoTags,
		Force:        true,
		ProxyOptions: connDeadline(ctx, loc),
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
}

// localCommit returns the commit h names (peeling tags), if the cache has it.
func localCommit(repo *git.Repository, h plumbing.Hash) (*object.Commit, bool) {
	c, err := peel(repo, h)
	return c, err == nil
}

// peel follows annotated tags from h to the commit they name.
func peel(repo *git.Repository, h plumbing.Hash) (*object.Commit, error) {
	for range 8 {
		obj, err := repo.Object(plumbing.AnyObject, h)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o, nil
		case *object.Tag:
			h = o.Target
		default:
			return nil, fmt.Errorf("%s is a %s, not a commit", h, obj.Type())
		}
	}
	return nil, fmt.Errorf("%s: tags nested too deep", h)
}

// isFullSHA reports whether s is a 40-digit hexadecimal commit id.
func isFullSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
