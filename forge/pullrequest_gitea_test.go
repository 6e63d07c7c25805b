package forge_test

import (
	"context"
	"testing"

	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

// Against a real Gitea: no open pull request from the branch is nil; a
// fork's pull request from a branch of the same name is not taken for the
// updater's; open and edit keep the number, and the listing finds it again.
func TestProposerAgainstARealGitea(t *testing.T) {
	g := forgetest.StartGitea(t)
	g.CreateRepo("web")
	g.Fork("web")
	const head = "flotilla/images/web"
	g.Write("eve", "eve/web", "main", head, "README.md", "eve's\n")
	fork := g.OpenPR("eve", "web", "eve:"+head)
	p, err := (&forge.Client{Kind: forge.Gitea, API: g.API(), Token: g.Token("ann")}).Proposer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if found, err := p.FindOpen(ctx, "ann/web", head, "main"); err != nil || found != nil {
		t.Fatalf("with only eve's #%d from her fork: found %+v, %v", fork, found, err)
	}
	g.Write("ann", "ann/web", "main", head, "README.md", "ann's\n")
	opened, err := p.Open(ctx, "ann/web", forge.ProposalRequest{Head: head, Base: "main", Title: "images: update x 1.1", Body: "one"})
	if err != nil || opened.Number <= 0 || opened.Number == fork || opened.URL == "" {
		t.Fatalf("open: %+v, %v", opened, err)
	}
	found, err := p.FindOpen(ctx, "ann/web", head, "main")
	if err != nil || found == nil || found.Number != opened.Number || found.Title != "images: update x 1.1" || found.Body != "one" {
		t.Fatalf("found %+v, %v; want #%d", found, err, opened.Number)
	}
	edited, err := p.Edit(ctx, "ann/web", opened.Number, "images: update x 1.2", "two")
	if err != nil || edited.Number != opened.Number || edited.Title != "images: update x 1.2" || edited.Body != "two" {
		t.Fatalf("edit: %+v, %v", edited, err)
	}
	g.ClosePR("web", opened.Number)
	if found, err := p.FindOpen(ctx, "ann/web", head, "main"); err != nil || found != nil {
		t.Fatalf("after closing: found %+v, %v", found, err)
	}
}
