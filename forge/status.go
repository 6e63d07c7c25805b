package forge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// State is a commit status's state, in the words shared by GitHub and
// Gitea. GitLab's own words are mapped where the request is built.
type State string

// States a deploy moves through: pending while it runs, then success or
// failure.
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
)

// MaxDescription is the longest description sent: GitHub refuses more
// than 140 characters, and a longer one says nothing a link cannot.
const MaxDescription = 140

// CommitStatus is one status on one commit. Context identifies it: a new
// status with the same context replaces the old one in the forge's view.
type CommitStatus struct {
	State State
	// Context names the check ("flotilla/web"); GitLab calls it name.
	Context     string
	Description string
	// TargetURL is where the status links to; empty for none.
	TargetURL string
}

// SetStatus posts s on commit sha of repo: Gitea/Forgejo's and GitHub's
// POST /repos/{owner}/{repo}/statuses/{sha}, GitLab's
// POST /projects/{id}/statuses/{sha}.
func (c *Client) SetStatus(ctx context.Context, repo, sha string, s CommitStatus) error {
	if !isSHA(sha) {
		return fmt.Errorf("forge: status of %s: %q is not a commit SHA", repo, sha)
	}
	switch s.State {
	case StatePending, StateSuccess, StateFailure:
	default:
		return fmt.Errorf("forge: status of %s: unknown state %q", repo, s.State)
	}
	if s.Context == "" {
		return fmt.Errorf("forge: status of %s: no context", repo)
	}
	base, err := c.base()
	if err != nil {
		return err
	}
	raw, esc, err := c.projectPath(repo)
	if err != nil {
		return err
	}
	sha = strings.ToLower(sha)
	body := map[string]string{"state": string(s.State), "context": s.Context, "description": truncate(s.Description, MaxDescription)}
	if c.Kind == GitLab {
		// GitLab's states are pending, running, success, failed and
		// canceled; a deploy under way is running.
		state := map[State]string{StatePending: "running", StateSuccess: "success", StateFailure: "failed"}[s.State]
		body = map[string]string{"state": state, "name": s.Context, "description": body["description"]}
	}
	if s.TargetURL != "" {
		body["target_url"] = s.TargetURL
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	u := endpoint(base, raw+"/statuses/"+sha, esc+"/statuses/"+sha, nil)
	_, _, err = c.do(ctx, http.MethodPost, u, fmt.Sprintf("set status %s of %s at %.12s", s.Context, repo, sha), body, MaxWriteAnswer)
	return err
}

// truncate cuts s to at most n characters, marking the cut.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
