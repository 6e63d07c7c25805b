package imagewrite

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/source"
)

// PullRequest is the pull request (GitLab: merge request) an application's
// image updates are proposed in.
type PullRequest struct {
	Number int
	URL    string
	// Head and Base are the branches: the updater's own, and the one the
	// updates are proposed to.
	Head, Base string
	// Commit is the head branch's tip: the commit that proposes them.
	Commit string
	// Opened is true when this run opened it, Edited when it changed its
	// title and body.
	Opened, Edited bool
}

// ForgeClient is how the Updater reaches a forge; nil fields take
// defaults. Tests point HTTP at their server.
type ForgeClient struct {
	// HTTP sends the requests. Default: a client that follows no
	// redirect, so the token never leaves the forge's API origin.
	HTTP *http.Client
}

// propose pushes the run's commit to the application's head branch and
// opens or edits the pull request from it into the base branch. It writes
// nothing the pull request already says: the head branch's tip carrying
// the same message is not pushed again, and a pull request whose title
// and body already list these updates is not edited. Nothing is opened
// when the base branch has every update.
func (u *Updater) propose(ctx context.Context, app *application.Application, req source.CommitRequest, log *slog.Logger) (source.CommitResult, *PullRequest, error) {
	iu := app.ImageUpdates
	pr := iu.PullRequest
	head := pr.HeadBranch(app.Name)
	pres, err := source.Propose(ctx, source.ProposeRequest{CommitRequest: req, Head: head})
	cr := pres.CommitResult
	if err != nil || cr.Message == "" || req.DryRun {
		return cr, nil, err
	}
	if cr.Commit != "" {
		log.Info("image updates pushed to their pull request's branch; merging it deploys them", "revision", cr.Commit, "branch", head)
	}
	token, err := forge.ReadTokenFile(pr.Forge.TokenFile)
	if err != nil {
		return cr, nil, fmt.Errorf("imageUpdates.pullRequest.forge: %w", err)
	}
	c := &forge.Client{Kind: pr.Forge.Kind, API: pr.Forge.API, Token: token, HTTP: u.Forge.HTTP}
	p, err := c.Proposer()
	if err != nil {
		return cr, nil, err
	}
	repo := pr.RepoFor(app.Source.RepoURL)
	title, body := proposalText(cr.Message)
	out := &PullRequest{Head: head, Base: iu.Branch, Commit: pres.HeadCommit}
	found, err := p.FindOpen(ctx, repo, head, iu.Branch)
	if err != nil {
		return cr, nil, err
	}
	var got forge.Proposal
	switch {
	case found == nil:
		got, err = p.Open(ctx, repo, forge.ProposalRequest{Head: head, Base: iu.Branch, Title: title, Body: body})
		out.Opened = err == nil
	case found.Title != title || found.Body != body:
		got, err = p.Edit(ctx, repo, found.Number, title, body)
		out.Edited = err == nil
	default:
		got = *found
	}
	if err != nil {
		return cr, nil, err
	}
	out.Number, out.URL = got.Number, got.URL
	switch {
	case out.Opened:
		log.Info("image updates proposed in a new pull request", "number", out.Number, "url", out.URL)
	case out.Edited:
		log.Info("image updates pull request edited to list the new updates", "number", out.Number, "url", out.URL)
	}
	return cr, out, nil
}

// proposalText is a pull request's title and body for a commit message:
// its subject, and the rest (one line per image old -> new, the fields,
// the trailer) under a line saying what merging does.
func proposalText(msg string) (title, body string) {
	title, rest, _ := strings.Cut(msg, "\n")
	rest = strings.TrimSpace(rest)
	var b strings.Builder
	b.WriteString("Flotilla found newer images for this application. Merging deploys them through the normal sync.\n\n```\n")
	b.WriteString(rest)
	b.WriteString("\n```\n")
	return title, b.String()
}
