package appset

import (
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forge"
)

// previewFeedback fills what a preview's feedback leaves out from the set
// that made it: the forge its pullRequest generator reads (so it is
// declared once), and the preview's own pull request for the plan comment.
func previewFeedback(a *application.Application, s *application.ApplicationSet, ps Params) {
	fb := a.Feedback
	if fb == nil {
		return
	}
	if fb.Forge == nil {
		if g := firstPullRequest(s.Generators); g != nil {
			if g.Forge != nil {
				f := *g.Forge
				fb.Forge = &f
			} else if kind, api, repo, ok := forge.Derive(g.RepoURL); ok {
				fb.Forge = &application.Forge{Kind: kind, API: api, Repo: repo}
			}
			if fb.Forge != nil && fb.Forge.Repo == "" {
				if _, _, repo, ok := forge.Derive(g.RepoURL); ok {
					fb.Forge.Repo = repo
				}
			}
		}
	}
	if n, ok := ps["number"].(string); ok && fb.PullRequest == "" {
		fb.PullRequest = n
	}
}

// firstPullRequest is the set's pullRequest generator, direct or in a
// matrix.
func firstPullRequest(gs []application.Generator) *application.PullRequestGenerator {
	for i := range gs {
		if g := gs[i].PullRequest; g != nil {
			return g
		}
		if m := gs[i].Matrix; m != nil {
			if g := firstPullRequest(m.Generators); g != nil {
				return g
			}
		}
	}
	return nil
}
