// Package forge asks a forge (GitHub, Gitea, Forgejo) which pull requests
// of a repository are open, for pull-request previews. A ref such as
// refs/pull/7/head says nothing about whether its change is still open, who
// opened it or from where: GitHub keeps those refs after a pull request is
// closed, and creates them for pull requests from any fork. Only the
// forge's API knows.
//
// It also writes what the controller reports back (status.go, comment.go):
// commit statuses and a pull request comment edited in place, on GitHub,
// Gitea/Forgejo and GitLab.
//
// The applications file that names the forge is trusted; the forge's
// answers are not. Every answer is bounded in size, pages and time, and
// nothing in an answer chooses where the client goes next.
package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PullRequest is one open pull request as the forge reports it.
type PullRequest struct {
	Number int
	// HeadSHA is the commit the forge says the pull request's head is.
	HeadSHA string
	// HeadRepo is the full name (owner/name) of the repository the head
	// branch lives in; empty when the forge no longer knows it (a deleted
	// fork).
	HeadRepo string
	// Fork is true when the head repository is not the base repository,
	// or is unknown.
	Fork   bool
	Author string
	// AuthorAssociation is GitHub's OWNER, MEMBER, COLLABORATOR,
	// CONTRIBUTOR...; empty on Gitea.
	AuthorAssociation string
	Labels            []string
	Draft             bool
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Lister lists a repository's open pull requests.
type Lister interface {
	ListOpen(ctx context.Context, repo string) ([]PullRequest, error)
}

// Kinds of forge API.
const (
	GitHub = "github"
	Gitea  = "gitea" // Forgejo serves the same API
)

// Limits on what one listing reads. A forge that answers with more is
// refused, not truncated: a truncated list would remove the previews of
// the pull requests it left out.
const (
	MaxPages     = 20
	MaxPageBytes = 4 << 20
	Timeout      = 30 * time.Second
)

// Client reads one forge's API.
type Client struct {
	// Kind is GitHub or Gitea; GitLab for statuses and comments only.
	Kind string
	// API is the API's base URL: https://api.github.com, a Gitea's
	// https://git.example.com/api/v1, or a GitLab's .../api/v4.
	API string
	// Token, when set, is sent as "Authorization: token ..." (GitHub and
	// Gitea accept it), or as GitLab's PRIVATE-TOKEN. Only ever to API's
	// origin.
	Token string
	// HTTP is the client used; nil means one without redirects.
	HTTP *http.Client
	// Timeout bounds a whole listing, status or comment update; zero
	// means Timeout.
	Timeout time.Duration
}

// ErrTooLarge is an answer over the limits.
var ErrTooLarge = errors.New("forge answer over the limits")

// ListOpen returns the open pull requests of repo ("owner/name"), every
// page, or an error: never a partial list.
func (c *Client) ListOpen(ctx context.Context, repo string) ([]PullRequest, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !validName(owner) || !validName(name) {
		return nil, fmt.Errorf("forge: %q is not owner/name", repo)
	}
	base, err := url.Parse(strings.TrimSuffix(c.API, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("forge: API %q is not an http(s) URL", c.API)
	}
	d := c.Timeout
	if d <= 0 {
		d = Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var out []PullRequest
	seen := map[int]bool{}
	for page := 1; ; page++ {
		if page > MaxPages {
			return nil, fmt.Errorf("forge: %s: more than %d pages of open pull requests: %w", repo, MaxPages, ErrTooLarge)
		}
		u := *base
		u.Path += "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/pulls"
		q := url.Values{"state": {"open"}, "page": {fmt.Sprint(page)}}
		per := 0
		switch c.Kind {
		case GitHub:
			per = 100
			q.Set("per_page", fmt.Sprint(per))
		case Gitea:
			per = 50
			q.Set("limit", fmt.Sprint(per))
		default:
			return nil, fmt.Errorf("forge: unknown kind %q", c.Kind)
		}
		u.RawQuery = q.Encode()
		prs, err := c.page(ctx, u.String(), repo)
		if err != nil {
			return nil, err
		}
		for _, p := range prs {
			if !seen[p.Number] {
				seen[p.Number] = true
				out = append(out, p)
			}
		}
		// Pages are counted here, not followed from Link headers: an
		// answer never chooses the next URL. A short page is the last.
		if len(prs) < per {
			return out, nil
		}
	}
}

// wire is the part of a pull request both APIs share (GitHub's "pulls"
// and Gitea's PullRequest objects).
type wire struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Draft  bool   `json:"draft"`
	User   *struct {
		Login string `json:"login"`
	} `json:"user"`
	AuthorAssociation string `json:"author_association"`
	Labels            []struct {
		Name string `json:"name"`
	} `json:"labels"`
	Head *struct {
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (c *Client) page(ctx context.Context, u, repo string) ([]PullRequest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("forge: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.Kind == GitHub {
		req.Header.Set("Accept", "application/vnd.github+json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "token "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = noRedirects
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("forge: list open pull requests of %s: %w", repo, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("forge: list open pull requests of %s: %w", repo, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("forge: list open pull requests of %s: %s", repo, resp.Status)
	}
	if len(body) > MaxPageBytes {
		return nil, fmt.Errorf("forge: list open pull requests of %s: a page over %d bytes: %w", repo, MaxPageBytes, ErrTooLarge)
	}
	out, err := decode(body, repo)
	if err != nil {
		return nil, fmt.Errorf("forge: list open pull requests of %s: %w", repo, err)
	}
	return out, nil
}

// decode reads one page of either API's answer.
func decode(body []byte, repo string) ([]PullRequest, error) {
	var ws []wire
	if err := json.Unmarshal(body, &ws); err != nil {
		return nil, err
	}
	out := make([]PullRequest, 0, len(ws))
	for i, w := range ws {
		p, err := w.pullRequest(repo)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if p == nil {
			continue
		}
		out = append(out, *p)
	}
	return out, nil
}

// pullRequest checks one item; an item that is not open (a forge that
// ignores state=open) is dropped, one that is malformed fails the listing.
func (w *wire) pullRequest(repo string) (*PullRequest, error) {
	if w.State != "open" {
		return nil, nil
	}
	if w.Number <= 0 {
		return nil, fmt.Errorf("number %d", w.Number)
	}
	if w.Head == nil || !isSHA(w.Head.SHA) {
		return nil, fmt.Errorf("pull request %d: no head commit SHA", w.Number)
	}
	p := &PullRequest{Number: w.Number, HeadSHA: strings.ToLower(w.Head.SHA), Draft: w.Draft,
		AuthorAssociation: w.AuthorAssociation, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if w.User != nil {
		p.Author = w.User.Login
	}
	for _, l := range w.Labels {
		p.Labels = append(p.Labels, l.Name)
	}
	if w.Head.Repo != nil {
		p.HeadRepo = w.Head.Repo.FullName
	}
	// Compared with the repository asked about, not with the answer's own
	// base: an unknown head repository is a fork.
	p.Fork = p.HeadRepo == "" || !strings.EqualFold(p.HeadRepo, repo)
	return p, nil
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}}

func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range strings.ToLower(s) {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// validName is an owner or repository name as forges allow them.
func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// ValidRepo reports whether repo is owner/name.
func ValidRepo(repo string) bool {
	owner, name, ok := strings.Cut(repo, "/")
	return ok && validName(owner) && validName(name)
}

// Derive returns the kind, API base URL and owner/name of the forge that
// serves repoURL when it can tell: github.com only. Other hosts run
// anything, so their forge must be named.
func Derive(repoURL string) (kind, api, repo string, ok bool) {
	s := strings.TrimSuffix(strings.TrimSuffix(repoURL, "/"), ".git")
	for _, pre := range []string{"https://github.com/", "http://github.com/", "ssh://git@github.com/", "git@github.com:"} {
		if rest, found := strings.CutPrefix(s, pre); found && ValidRepo(rest) {
			return GitHub, "https://api.github.com", rest, true
		}
	}
	return "", "", "", false
}
