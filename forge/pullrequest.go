package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Proposal is a pull request (GitLab: merge request) the controller opened
// to propose a change, as the forge reports it.
type Proposal struct {
	Number int
	// URL is the page a human reviews it on.
	URL         string
	Title, Body string
	// HeadSHA is the commit its head branch pointed at when the forge
	// answered.
	HeadSHA string
}

// ProposalRequest is a pull request to open: merge Head into Base, both
// branches of the same repository.
type ProposalRequest struct {
	Head, Base  string
	Title, Body string
}

// Proposer opens and edits the pull requests image automation proposes its
// updates in. One implementation per forge, each with its own API's words;
// Client.Proposer picks it.
type Proposer interface {
	// FindOpen returns the open pull request of repo from head into
	// base (both branches of repo itself, never a fork's), nil when
	// there is none.
	FindOpen(ctx context.Context, repo, head, base string) (*Proposal, error)
	// Open opens one.
	Open(ctx context.Context, repo string, r ProposalRequest) (Proposal, error)
	// Edit replaces the title and body of pull request number.
	Edit(ctx context.Context, repo string, number int, title, body string) (Proposal, error)
}

// MaxProposalBody bounds a proposal's body, as a comment's.
const MaxProposalBody = MaxCommentBytes

// Proposer returns the pull request API of c's forge.
func (c *Client) Proposer() (Proposer, error) {
	switch c.Kind {
	case Gitea:
		return giteaPulls{c}, nil
	case GitHub:
		return githubPulls{c}, nil
	case GitLab:
		return gitlabMergeRequests{c}, nil
	}
	return nil, fmt.Errorf("forge: unknown kind %q", c.Kind)
}

// pull is the part of a pull request Gitea and GitHub share.
type pull struct {
	Number  int    `json:"number"`
	State   string `json:"state"`
	HTMLURL string `json:"html_url"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	Head    *struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
	Base *struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func (p *pull) proposal() Proposal {
	out := Proposal{Number: p.Number, URL: p.HTMLURL, Title: p.Title, Body: p.Body}
	if p.Head != nil {
		out.HeadSHA = strings.ToLower(p.Head.SHA)
	}
	return out
}

// matches says whether p is open, from head of repo itself into base.
func (p *pull) matches(repo, head, base string) bool {
	return p.State == "open" && p.Number > 0 && p.Head != nil && p.Base != nil &&
		p.Head.Ref == head && p.Base.Ref == base && p.Head.Repo != nil && strings.EqualFold(p.Head.Repo.FullName, repo)
}

// proposalArgs checks the arguments every call shares and returns the
// base URL and the repository's API path.
func (c *Client) proposalArgs(repo string, branches ...string) (*url.URL, string, string, error) {
	for _, b := range branches {
		if b == "" || strings.ContainsAny(b, " \t\r\n~^:?*[\\") || strings.HasPrefix(b, "-") {
			return nil, "", "", fmt.Errorf("forge: %q is not a branch name", b)
		}
	}
	base, err := c.base()
	if err != nil {
		return nil, "", "", err
	}
	raw, esc, err := c.projectPath(repo)
	if err != nil {
		return nil, "", "", err
	}
	return base, raw, esc, nil
}

func checkProposal(r ProposalRequest) error {
	if strings.TrimSpace(r.Title) == "" || strings.ContainsAny(r.Title, "\r\n") {
		return fmt.Errorf("forge: a pull request's title is one non-empty line")
	}
	if len(r.Body) > MaxProposalBody {
		return fmt.Errorf("forge: a pull request's body is %d bytes, more than %d: %w", len(r.Body), MaxProposalBody, ErrTooLarge)
	}
	return nil
}

// giteaPulls is Gitea's and Forgejo's /repos/{owner}/{repo}/pulls.
type giteaPulls struct{ c *Client }

// FindOpen pages GET /repos/{owner}/{repo}/pulls?state=open: Gitea's
// listing has no head filter, so the match is made here.
func (g giteaPulls) FindOpen(ctx context.Context, repo, head, base string) (*Proposal, error) {
	return findPull(ctx, g.c, repo, head, base, 50, func(q url.Values, page, per int) {
		q.Set("page", strconv.Itoa(page))
		q.Set("limit", strconv.Itoa(per))
	})
}

// Open is POST /repos/{owner}/{repo}/pulls.
func (g giteaPulls) Open(ctx context.Context, repo string, r ProposalRequest) (Proposal, error) {
	return openPull(ctx, g.c, repo, r)
}

// Edit is PATCH /repos/{owner}/{repo}/pulls/{index}.
func (g giteaPulls) Edit(ctx context.Context, repo string, number int, title, body string) (Proposal, error) {
	return editPull(ctx, g.c, repo, number, title, body)
}

// githubPulls is GitHub's REST API, /repos/{owner}/{repo}/pulls
// (docs.github.com/en/rest/pulls/pulls).
type githubPulls struct{ c *Client }

// FindOpen is GET /repos/{owner}/{repo}/pulls?state=open&head=owner:head&base=base;
// the answer is matched again here, as a forge's filter is not trusted.
func (g githubPulls) FindOpen(ctx context.Context, repo, head, base string) (*Proposal, error) {
	owner, _, _ := strings.Cut(repo, "/")
	return findPull(ctx, g.c, repo, head, base, 100, func(q url.Values, page, per int) {
		q.Set("head", owner+":"+head)
		q.Set("base", base)
		q.Set("page", strconv.Itoa(page))
		q.Set("per_page", strconv.Itoa(per))
	})
}

// Open is POST /repos/{owner}/{repo}/pulls.
func (g githubPulls) Open(ctx context.Context, repo string, r ProposalRequest) (Proposal, error) {
	return openPull(ctx, g.c, repo, r)
}

// Edit is PATCH /repos/{owner}/{repo}/pulls/{pull_number}.
func (g githubPulls) Edit(ctx context.Context, repo string, number int, title, body string) (Proposal, error) {
	return editPull(ctx, g.c, repo, number, title, body)
}

func findPull(ctx context.Context, c *Client, repo, head, base string, per int, query func(q url.Values, page, per int)) (*Proposal, error) {
	b, raw, esc, err := c.proposalArgs(repo, head, base)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	what := fmt.Sprintf("list open pull requests of %s from %s", repo, head)
	seen := map[int]bool{}
	for page := 1; ; page++ {
		if page > MaxPages {
			return nil, fmt.Errorf("forge: %s: more than %d pages: %w", what, MaxPages, ErrTooLarge)
		}
		q := url.Values{"state": {"open"}}
		query(q, page, per)
		body, _, err := c.do(ctx, http.MethodGet, endpoint(b, raw+"/pulls", esc+"/pulls", q), what, nil, MaxPageBytes)
		if err != nil {
			return nil, err
		}
		var ps []pull
		if err := json.Unmarshal(body, &ps); err != nil {
			return nil, fmt.Errorf("forge: %s: %w", what, err)
		}
		fresh := 0
		for i := range ps {
			if seen[ps[i].Number] {
				continue
			}
			seen[ps[i].Number] = true
			fresh++
			if ps[i].matches(repo, head, base) {
				p := ps[i].proposal()
				return &p, nil
			}
		}
		// Pages are counted, never taken from an answer; a short page, or
		// one with nothing new, is the last.
		if len(ps) < per || fresh == 0 {
			return nil, nil
		}
	}
}

func openPull(ctx context.Context, c *Client, repo string, r ProposalRequest) (Proposal, error) {
	if err := checkProposal(r); err != nil {
		return Proposal{}, err
	}
	b, raw, esc, err := c.proposalArgs(repo, r.Head, r.Base)
	if err != nil {
		return Proposal{}, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	what := fmt.Sprintf("open a pull request on %s from %s", repo, r.Head)
	body, _, err := c.do(ctx, http.MethodPost, endpoint(b, raw+"/pulls", esc+"/pulls", nil), what,
		map[string]string{"head": r.Head, "base": r.Base, "title": r.Title, "body": r.Body}, MaxWriteAnswer)
	if err != nil {
		return Proposal{}, err
	}
	return decodePull(body, what)
}

func editPull(ctx context.Context, c *Client, repo string, number int, title, text string) (Proposal, error) {
	if number <= 0 {
		return Proposal{}, fmt.Errorf("forge: edit a pull request of %s: number %d", repo, number)
	}
	if err := checkProposal(ProposalRequest{Title: title, Body: text}); err != nil {
		return Proposal{}, err
	}
	b, raw, esc, err := c.proposalArgs(repo)
	if err != nil {
		return Proposal{}, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	n := strconv.Itoa(number)
	what := fmt.Sprintf("edit pull request %s#%d", repo, number)
	body, _, err := c.do(ctx, http.MethodPatch, endpoint(b, raw+"/pulls/"+n, esc+"/pulls/"+n, nil), what,
		map[string]string{"title": title, "body": text}, MaxWriteAnswer)
	if err != nil {
		return Proposal{}, err
	}
	return decodePull(body, what)
}

func decodePull(body []byte, what string) (Proposal, error) {
	var p pull
	if err := json.Unmarshal(body, &p); err != nil {
		return Proposal{}, fmt.Errorf("forge: %s: %w", what, err)
	}
	if p.Number <= 0 {
		return Proposal{}, fmt.Errorf("forge: %s: the answer names no pull request number", what)
	}
	return p.proposal(), nil
}

// gitlabMergeRequests is GitLab's /projects/{id}/merge_requests
// (docs.gitlab.com/api/merge_requests): iid is the number a human sees,
// description the body.
type gitlabMergeRequests struct{ c *Client }

type mergeRequest struct {
	IID          int    `json:"iid"`
	State        string `json:"state"`
	WebURL       string `json:"web_url"`
	Title        string `json:"title"`
	Description  string `json:"description"`
	SourceBranch string `json:"source_branch"`
	TargetBranch string `json:"target_branch"`
	SHA          string `json:"sha"`
	SourceID     int64  `json:"source_project_id"`
	TargetID     int64  `json:"target_project_id"`
}

func (m *mergeRequest) proposal() Proposal {
	return Proposal{Number: m.IID, URL: m.WebURL, Title: m.Title, Body: m.Description, HeadSHA: strings.ToLower(m.SHA)}
}

// FindOpen is GET /projects/{id}/merge_requests?state=opened&source_branch=head&target_branch=base,
// matched again here; a merge request from a fork (another source
// project) is not the updater's.
func (g gitlabMergeRequests) FindOpen(ctx context.Context, repo, head, base string) (*Proposal, error) {
	c := g.c
	b, raw, esc, err := c.proposalArgs(repo, head, base)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	what := fmt.Sprintf("list open merge requests of %s from %s", repo, head)
	seen := map[int]bool{}
	const per = 100
	for page := 1; ; page++ {
		if page > MaxPages {
			return nil, fmt.Errorf("forge: %s: more than %d pages: %w", what, MaxPages, ErrTooLarge)
		}
		q := url.Values{"state": {"opened"}, "source_branch": {head}, "target_branch": {base},
			"page": {strconv.Itoa(page)}, "per_page": {strconv.Itoa(per)}}
		body, _, err := c.do(ctx, http.MethodGet, endpoint(b, raw+"/merge_requests", esc+"/merge_requests", q), what, nil, MaxPageBytes)
		if err != nil {
			return nil, err
		}
		var ms []mergeRequest
		if err := json.Unmarshal(body, &ms); err != nil {
			return nil, fmt.Errorf("forge: %s: %w", what, err)
		}
		fresh := 0
		for i := range ms {
			m := &ms[i]
			if seen[m.IID] {
				continue
			}
			seen[m.IID] = true
			fresh++
			if m.State == "opened" && m.IID > 0 && m.SourceBranch == head && m.TargetBranch == base && m.SourceID == m.TargetID {
				p := m.proposal()
				return &p, nil
			}
		}
		if len(ms) < per || fresh == 0 {
			return nil, nil
		}
	}
}

// Open is POST /projects/{id}/merge_requests.
func (g gitlabMergeRequests) Open(ctx context.Context, repo string, r ProposalRequest) (Proposal, error) {
	c := g.c
	if err := checkProposal(r); err != nil {
		return Proposal{}, err
	}
	b, raw, esc, err := c.proposalArgs(repo, r.Head, r.Base)
	if err != nil {
		return Proposal{}, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	what := fmt.Sprintf("open a merge request on %s from %s", repo, r.Head)
	body, _, err := c.do(ctx, http.MethodPost, endpoint(b, raw+"/merge_requests", esc+"/merge_requests", nil), what,
		map[string]string{"source_branch": r.Head, "target_branch": r.Base, "title": r.Title, "description": r.Body}, MaxWriteAnswer)
	if err != nil {
		return Proposal{}, err
	}
	return decodeMergeRequest(body, what)
}

// Edit is PUT /projects/{id}/merge_requests/{iid}.
func (g gitlabMergeRequests) Edit(ctx context.Context, repo string, number int, title, text string) (Proposal, error) {
	c := g.c
	if number <= 0 {
		return Proposal{}, fmt.Errorf("forge: edit a merge request of %s: number %d", repo, number)
	}
	if err := checkProposal(ProposalRequest{Title: title, Body: text}); err != nil {
		return Proposal{}, err
	}
	b, raw, esc, err := c.proposalArgs(repo)
	if err != nil {
		return Proposal{}, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	n := strconv.Itoa(number)
	what := fmt.Sprintf("edit merge request %s!%d", repo, number)
	body, _, err := c.do(ctx, http.MethodPut, endpoint(b, raw+"/merge_requests/"+n, esc+"/merge_requests/"+n, nil), what,
		map[string]string{"title": title, "description": text}, MaxWriteAnswer)
	if err != nil {
		return Proposal{}, err
	}
	return decodeMergeRequest(body, what)
}

func decodeMergeRequest(body []byte, what string) (Proposal, error) {
	var m mergeRequest
	if err := json.Unmarshal(body, &m); err != nil {
		return Proposal{}, fmt.Errorf("forge: %s: %w", what, err)
	}
	if m.IID <= 0 {
		return Proposal{}, fmt.Errorf("forge: %s: the answer names no merge request iid", what)
	}
	return m.proposal(), nil
}

// Compile-time claims: one implementation per forge.
var (
	_ Proposer = giteaPulls{}
	_ Proposer = githubPulls{}
	_ Proposer = gitlabMergeRequests{}
)
