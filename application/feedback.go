package application

import (
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/flotilla-gitops/flotilla/forge"
)

// Feedback posts what the controller does with an application back to the
// forge its commits come from: a commit status on every commit it deploys,
// and the application's plan as a comment on a pull request, edited in
// place on each push. The forge is declared as for pull-request previews;
// its token is read from a file at every post and appears nowhere else.
// A forge that is down or refuses never holds up or fails a deploy.
type Feedback struct {
	// Forge is the API posted to, declared as a pullRequest generator's
	// forge, with kind github, gitea (Forgejo too) or gitlab, and a
	// tokenFile, required here. In a preview set's template it defaults
	// to the set's pullRequest generator's forge. Required otherwise.
	Forge *Forge `yaml:"forge,omitempty"`
	// Statuses posts a commit status "flotilla/<name>" on every commit a
	// sync deploys: pending when it starts, then success or failure.
	// Default false.
	Statuses bool `yaml:"statuses,omitempty"`
	// PullRequest is the number of the pull request (GitLab: merge
	// request) that gets a comment with the application's plan, found
	// again by a hidden marker and edited in place on every push. It is a
	// string so that a template may write "{{.number}}"; in a preview
	// set's template it defaults to the preview's own pull request.
	// Default: none, no comment.
	PullRequest string `yaml:"pullRequest,omitempty"`
}

// PullRequestNumber returns PullRequest as a number, 0 when unset or not
// a positive number.
func (f *Feedback) PullRequestNumber() int {
	if f == nil {
		return 0
	}
	n, err := strconv.Atoi(f.PullRequest)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// ForgeRepo returns the project the feedback goes to: Forge.Repo, or the
// one derived from a github.com repoURL.
func (f *Feedback) ForgeRepo(repoURL string) string {
	if f == nil || f.Forge == nil {
		return ""
	}
	if f.Forge.Repo != "" {
		return f.Forge.Repo
	}
	if _, _, repo, ok := forge.Derive(repoURL); ok && f.Forge.Kind == forge.GitHub {
		return repo
	}
	return ""
}

// feedback checks an application's feedback. The applications file is
// trusted; these catch mistakes, and a token about to be sent in clear.
func (c *checker) feedback(app, p string, a *Application) {
	fb := a.Feedback
	if fb == nil {
		return
	}
	p += ".feedback"
	if a.Source.FromRepository() {
		c.report(app, p, ErrInvalid, "a chart from a chart repository has no commit to report on; feedback is for applications deployed from git")
	}
	if !fb.Statuses && fb.PullRequest == "" {
		c.report(app, p, ErrInvalid, "says nothing to post: set statuses: true, pullRequest, or both")
	}
	if fb.PullRequest != "" && fb.PullRequestNumber() == 0 {
		c.report(app, p+".pullRequest", ErrInvalid, "%q is not a pull request number", fb.PullRequest)
	}
	f := fb.Forge
	if f == nil {
		c.report(app, p+".forge", ErrRequired, "required: {kind: github|gitea|gitlab, api: URL, repo: owner/name, tokenFile: /run/secrets/...}")
		return
	}
	c.tokenForge(app, p+".forge", f, fb.ForgeRepo(a.Source.RepoURL), "posting a status or a comment")
}

// tokenForge checks a forge that is written to with a token read from a
// file (feedback, image pull requests); repo is the project it resolves
// to, what needs the token.
func (c *checker) tokenForge(app, p string, f *Forge, repo, what string) {
	switch f.Kind {
	case forge.GitHub, forge.Gitea, forge.GitLab:
	default:
		c.report(app, p+".kind", ErrInvalid, "%q is not github, gitea (also for Forgejo) or gitlab", f.Kind)
	}
	u, err := url.Parse(f.API)
	switch {
	case f.API == "":
		c.report(app, p+".api", ErrRequired, "required: the API's base URL, such as https://api.github.com, https://git.example.com/api/v1 or https://gitlab.com/api/v4")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		c.report(app, p+".api", ErrInvalid, "%q is not an http(s) base URL without user, query or fragment", f.API)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		c.report(app, p+".api", ErrInvalid, "a token is not sent over plain http:// to %s; use https", u.Hostname())
	}
	switch {
	case f.Repo == "" && repo == "":
		c.report(app, p+".repo", ErrRequired, "required: the repository's owner/name on the forge (group/name on GitLab)")
	case f.Repo != "" && !forge.ValidFeedbackRepo(f.Kind, f.Repo):
		c.report(app, p+".repo", ErrInvalid, "%q is not owner/name (group/.../name on GitLab)", f.Repo)
	}
	switch {
	case f.TokenFile == "":
		c.report(app, p+".tokenFile", ErrRequired, "required: %s needs a token, read from an absolute path such as /run/secrets/forge-token", what)
	case !path.IsAbs(f.TokenFile):
		c.report(app, p+".tokenFile", ErrInvalid, "%q must be an absolute path", f.TokenFile)
	}
}

// templateFeedback checks a set's template's feedback before expansion:
// what an element fills in (a branch, an author) must not choose where the
// token goes, so only pullRequest may be a template.
func (c *checker) templateFeedback(p string, fb *Feedback) {
	if fb == nil || fb.Forge == nil {
		return
	}
	for field, v := range map[string]string{"kind": fb.Forge.Kind, "api": fb.Forge.API, "repo": fb.Forge.Repo, "tokenFile": fb.Forge.TokenFile} {
		if strings.Contains(v, "{{") {
			c.report("", p+".template.feedback.forge."+field, ErrInvalid, "must be fixed, not a template: generated input must not choose where the token is sent")
		}
	}
}
