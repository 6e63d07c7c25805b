package source

import (
	"context"
	"errors"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/application"
)

func refOf(t *testing.T, dir, branch string) string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return ref.Hash().String()
}

func parentsOf(t *testing.T, dir, sha string) []string {
	t.Helper()
	repo, _ := git.PlainOpen(dir)
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range c.ParentHashes {
		out = append(out, p.String())
	}
	return out
}

// pushAs makes someone else's commit the tip of branch in origin.
func pushAs(t *testing.T, src *testRepo, origin, branch, file string) string {
	t.Helper()
	sha := src.write(map[string]string{file: "theirs\n"}).commit("their change")
	rem, err := src.repo.CreateRemoteAnonymous(&config.RemoteConfig{Name: "anonymous", URLs: []string{origin}})
	if err != nil {
		t.Fatal(err)
	}
	spec := config.RefSpec("+refs/heads/master:refs/heads/" + branch)
	if err := rem.Push(&git.PushOptions{RemoteName: "anonymous", RefSpecs: []config.RefSpec{spec}}); err != nil {
		t.Fatal(err)
	}
	return sha
}

// Propose keeps the head branch at one commit of its own on the base's
// head: created, left alone when it already says the same, replaced when
// the change differs, never pushed over someone else's commit (seen before
// the push, or pushed while the updater was deciding: the lease), and
// nothing at all when the base needs no change.
func TestPropose_oneOwnCommitOnTheBaseNeverOverAnotherOne(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"compose.yaml": "v1\n"}).commit("initial")
	origin := bareCopy(t, src)
	base := refOf(t, origin, "master")
	const head = "flotilla/images/shop"
	author := application.CommitAuthor{Name: "Bot", Email: "bot@example.invalid"}
	content, msg := "v2\n", "update to v2\n\nFlotilla-Application: shop\n"
	req := ProposeRequest{
		CommitRequest: CommitRequest{RepoURL: origin, Branch: "master", Author: author,
			Change: func(_ context.Context, f *Files) (string, error) {
				if msg == "" {
					return "", nil
				}
				return msg, f.WriteFile("compose.yaml", []byte(content))
			},
			Own: func(c *object.Commit) bool { return c.Author.Email == author.Email },
		},
		Head: head,
	}
	ctx := context.Background()

	res, err := Propose(ctx, req)
	if err != nil || res.Commit == "" || res.Unchanged {
		t.Fatalf("first: %+v, %v", res, err)
	}
	first := refOf(t, origin, head)
	if first != res.Commit || refOf(t, origin, "master") != base {
		t.Fatalf("head at %s (pushed %s), master at %s (was %s)", first, res.Commit, refOf(t, origin, "master"), base)
	}
	if ps := parentsOf(t, origin, first); len(ps) != 1 || ps[0] != base {
		t.Fatalf("parents %v, want the base %s", ps, base)
	}

	if res.LastOwn != (CommitRef{}) {
		t.Fatalf("first: last own commit %+v before any was made", res.LastOwn)
	}
	firstTime := res.Time
	if res, err = Propose(ctx, req); err != nil || !res.Unchanged || res.Commit != "" || refOf(t, origin, head) != first {
		t.Fatalf("same change: %+v, %v", res, err)
	}
	// A writer that forgot (restarted) finds its proposal on the branch.
	if res.LastOwn.Hash != first || !res.LastOwn.Time.Equal(firstTime) || firstTime.IsZero() {
		t.Fatalf("same change: last own commit %+v, want %s at %v", res.LastOwn, first, firstTime)
	}

	content, msg = "v3\n", "update to v3\n\nFlotilla-Application: shop\n"
	res, err = Propose(ctx, req)
	second := refOf(t, origin, head)
	if err != nil || res.Commit == "" || second != res.Commit || second == first {
		t.Fatalf("new change: %+v, %v; head %s", res, err, second)
	}
	if ps := parentsOf(t, origin, second); len(ps) != 1 || ps[0] != base {
		t.Fatalf("the replacing commit's parents %v, want only the base %s (not the old proposal)", ps, base)
	}

	// Someone pushes while the updater decides: the leased push is
	// refused, the next attempt sees their commit and holds.
	content, msg = "v4\n", "update to v4\n\nFlotilla-Application: shop\n"
	var theirs string
	own := req.Own
	req.Own = func(c *object.Commit) bool {
		if theirs == "" {
			theirs = pushAs(t, src, origin, head, "NOTES")
		}
		return own(c)
	}
	res, err = Propose(ctx, req)
	if !errors.Is(err, ErrForeignCommit) || refOf(t, origin, head) != theirs || res.Attempts != 2 {
		t.Fatalf("a push in between: %+v, %v; head %s, theirs %s", res, err, refOf(t, origin, head), theirs)
	}
	req.Own = own
	if res, err = Propose(ctx, req); !errors.Is(err, ErrForeignCommit) || refOf(t, origin, head) != theirs {
		t.Fatalf("their commit on the branch: %v; head %s", err, refOf(t, origin, head))
	}
	if res.LastOwn != (CommitRef{}) {
		t.Fatalf("their commit on the branch: last own commit %+v, want none (theirs is not, the base has none)", res.LastOwn)
	}

	// Nothing to change on the base: nothing pushed, whatever the branch holds.
	msg = ""
	if res, err = Propose(ctx, req); err != nil || res.Commit != "" || res.Message != "" || refOf(t, origin, head) != theirs {
		t.Fatalf("nothing to propose: %+v, %v", res, err)
	}
}
