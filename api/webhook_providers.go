package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// provider is how one forge signs, names and shapes its deliveries.
type provider struct {
	// authHeader carries the signature or token; a delivery without it is
	// refused before its body is read.
	authHeader string
	verify     func(h http.Header, body []byte, secret string) error
	// eventHeader names the event; pushEvents are the values that are
	// pushes. Without an event header every delivery is a push.
	eventHeader string
	pushEvents  []string
	// idHeader carries the delivery id, if the forge sends one.
	idHeader string
	parse    func(body []byte) (pushEvent, error)
}

func providerOf(p WebhookProvider) provider {
	switch p {
	case ProviderGitHub:
		return provider{
			authHeader:  "X-Hub-Signature-256",
			verify:      hmacHeader("X-Hub-Signature-256", "sha256="),
			eventHeader: "X-GitHub-Event", pushEvents: []string{"push"},
			idHeader: "X-GitHub-Delivery",
			parse:    parseGitHubPush,
		}
	case ProviderGitLab:
		return provider{
			authHeader:  "X-Gitlab-Token",
			verify:      verifyGitLabToken,
			eventHeader: "X-Gitlab-Event", pushEvents: []string{"Push Hook", "Tag Push Hook"},
			idHeader: "X-Gitlab-Event-UUID",
			parse:    parseGitLabPush,
		}
	case ProviderGitea:
		return provider{
			authHeader:  "X-Gitea-Signature",
			verify:      hmacHeader("X-Gitea-Signature", ""),
			eventHeader: "X-Gitea-Event", pushEvents: []string{"push"},
			idHeader: "X-Gitea-Delivery",
			parse:    parseGitHubPush, // Gitea's push payload follows GitHub's
		}
	case ProviderBitbucket:
		return provider{
			authHeader:  "X-Hub-Signature",
			verify:      hmacHeader("X-Hub-Signature", "sha256="),
			eventHeader: "X-Event-Key", pushEvents: []string{"repo:push"},
			idHeader: "X-Request-UUID",
			parse:    parseBitbucketPush,
		}
	case ProviderGeneric:
		return provider{
			authHeader: "X-Flotilla-Signature",
			verify:     hmacHeader("X-Flotilla-Signature", "sha256="),
			parse:      parseGenericPush,
		}
	}
	panic(fmt.Sprintf("api: no webhook provider %q", p)) // serve checks the name first
}

// present checks that the delivery carries the provider's signature or
// token header at all, in the words verify would use.
func (pr provider) present(h http.Header) error {
	if strings.TrimSpace(h.Get(pr.authHeader)) == "" {
		return fmt.Errorf("missing %s: unsigned deliveries are refused", pr.authHeader)
	}
	return nil
}

// event returns the delivery's event name and whether it is a push.
func (pr provider) event(h http.Header) (string, bool) {
	if pr.eventHeader == "" {
		return "push", true
	}
	e := h.Get(pr.eventHeader)
	return e, slices.Contains(pr.pushEvents, e)
}

func (pr provider) deliveryID(h http.Header) string {
	if pr.idHeader == "" {
		return ""
	}
	return strings.TrimSpace(h.Get(pr.idHeader))
}

// hmacHeader verifies a hex HMAC-SHA256 of the body in header, after
// prefix. Error messages name the header and never repeat its value.
func hmacHeader(header, prefix string) func(http.Header, []byte, string) error {
	return func(h http.Header, body []byte, secret string) error {
		v := strings.TrimSpace(h.Get(header))
		if v == "" {
			return fmt.Errorf("missing %s: unsigned deliveries are refused", header)
		}
		sig, ok := strings.CutPrefix(v, prefix)
		got, err := hex.DecodeString(sig)
		if !ok || err != nil || len(got) != sha256.Size {
			return fmt.Errorf("%s is not %s<hex HMAC-SHA256>", header, prefix)
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		if !hmac.Equal(got, mac.Sum(nil)) {
			return fmt.Errorf("%s does not match the body: wrong secret or altered payload", header)
		}
		return nil
	}
}

// verifyGitLabToken compares GitLab's token, which is the secret itself,
// over fixed-length digests so the timing shows neither content nor length.
func verifyGitLabToken(h http.Header, _ []byte, secret string) error {
	v := h.Get("X-Gitlab-Token")
	if v == "" {
		return errors.New("missing X-Gitlab-Token: unsigned deliveries are refused")
	}
	got, want := sha256.Sum256([]byte(v)), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return errors.New("X-Gitlab-Token does not match the secret")
	}
	return nil
}

// payloadOf returns the JSON of a delivery: the body, or its "payload" field
// when GitHub or Gitea were set to send a form.
func payloadOf(r *http.Request, body []byte) []byte {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return body
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return body // the JSON parser says what is wrong
	}
	return []byte(form.Get("payload"))
}

// Limits past which a forge's payload is taken to be cut short.
const (
	// maxListedCommits: GitHub lists at most 2048 commits in a push.
	maxListedCommits = 2048
	// maxListedFiles: forges list a few thousand paths per commit at most
	// and drop the rest silently, so a list this long may be incomplete.
	maxListedFiles = 3000
)

// forgeCommit is a commit as GitHub, GitLab and Gitea list it.
type forgeCommit struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Removed  []string `json:"removed"`
}

// changedFiles collects the paths commits changed, and whether the lists
// look whole. No commits at all says nothing about what changed.
func changedFiles(commits []forgeCommit, head *forgeCommit) ([]string, bool) {
	if head != nil {
		commits = append(slices.Clip(commits), *head)
	}
	complete := len(commits) > 0 && len(commits) < maxListedCommits
	var files []string
	for _, c := range commits {
		for _, list := range [][]string{c.Added, c.Modified, c.Removed} {
			if len(list) >= maxListedFiles {
				complete = false
			}
			files = append(files, list...)
		}
	}
	return files, complete
}

// fullRef makes a bare branch name a full ref.
func fullRef(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/heads/" + ref
}

// zeroCommit reports an all-zero commit id, which forges send as the
// "before" of a new ref and the "after" of a deleted one.
func zeroCommit(id string) bool {
	return id != "" && strings.Trim(id, "0") == ""
}

func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return strings.TrimSpace(s) == "" })
}

// parseGitHubPush reads GitHub's push payload, and Gitea's, which has the
// same shape and adds total_commits.
func parseGitHubPush(body []byte) (pushEvent, error) {
	var pl struct {
		Ref          string        `json:"ref"`
		Before       string        `json:"before"`
		After        string        `json:"after"`
		Created      bool          `json:"created"`
		Deleted      bool          `json:"deleted"`
		Forced       bool          `json:"forced"`
		Size         *int          `json:"size"`
		TotalCommits *int          `json:"total_commits"`
		Commits      []forgeCommit `json:"commits"`
		HeadCommit   *forgeCommit  `json:"head_commit"`
		Repository   *struct {
			CloneURL      string `json:"clone_url"`
			SSHURL        string `json:"ssh_url"`
			HTMLURL       string `json:"html_url"`
			GitURL        string `json:"git_url"`
			DefaultBranch string `json:"default_branch"`
			MasterBranch  string `json:"master_branch"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &pl); err != nil {
		return pushEvent{}, fmt.Errorf("decode: %w", err)
	}
	if pl.Repository == nil || pl.Ref == "" {
		return pushEvent{}, errors.New("no repository or ref")
	}
	repo := pl.Repository
	ev := pushEvent{repos: nonEmpty(repo.CloneURL, repo.SSHURL, repo.HTMLURL, repo.GitURL), defaultBranch: repo.DefaultBranch}
	if ev.defaultBranch == "" {
		ev.defaultBranch = repo.MasterBranch
	}
	if len(ev.repos) == 0 {
		return pushEvent{}, errors.New("the repository has no URL")
	}
	ref := fullRef(pl.Ref)
	if pl.Deleted || zeroCommit(pl.After) {
		return ev, nil
	}
	ev.refs = []string{ref}
	ev.files, ev.complete = changedFiles(pl.Commits, pl.HeadCommit)
	for _, total := range []*int{pl.Size, pl.TotalCommits} {
		if total != nil && *total > len(pl.Commits) {
			ev.complete = false
		}
	}
	// A new ref, a rewritten history or a tag has no meaningful "changed
	// files": what the application ran before may differ anywhere.
	if pl.Created || pl.Forced || zeroCommit(pl.Before) || strings.HasPrefix(ref, "refs/tags/") {
		ev.complete = false
	}
	return ev, nil
}

// parseGitLabPush reads GitLab's push and tag push payloads.
func parseGitLabPush(body []byte) (pushEvent, error) {
	var pl struct {
		Ref               string        `json:"ref"`
		Before            string        `json:"before"`
		After             string        `json:"after"`
		TotalCommitsCount *int          `json:"total_commits_count"`
		Commits           []forgeCommit `json:"commits"`
		Project           *struct {
			GitHTTPURL    string `json:"git_http_url"`
			GitSSHURL     string `json:"git_ssh_url"`
			WebURL        string `json:"web_url"`
			DefaultBranch string `json:"default_branch"`
		} `json:"project"`
		Repository *struct {
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
			Homepage   string `json:"homepage"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &pl); err != nil {
		return pushEvent{}, fmt.Errorf("decode: %w", err)
	}
	if pl.Ref == "" || (pl.Project == nil && pl.Repository == nil) {
		return pushEvent{}, errors.New("no project or ref")
	}
	var ev pushEvent
	if p := pl.Project; p != nil {
		ev.repos = append(ev.repos, nonEmpty(p.GitHTTPURL, p.GitSSHURL, p.WebURL)...)
		ev.defaultBranch = p.DefaultBranch
	}
	if r := pl.Repository; r != nil {
		ev.repos = append(ev.repos, nonEmpty(r.GitHTTPURL, r.GitSSHURL, r.Homepage)...)
	}
	if len(ev.repos) == 0 {
		return pushEvent{}, errors.New("the project has no URL")
	}
	ref := fullRef(pl.Ref)
	if zeroCommit(pl.After) {
		return ev, nil
	}
	ev.refs = []string{ref}
	ev.files, ev.complete = changedFiles(pl.Commits, nil)
	if pl.TotalCommitsCount != nil && *pl.TotalCommitsCount > len(pl.Commits) {
		ev.complete = false // GitLab lists the last 20 commits only
	}
	if zeroCommit(pl.Before) || strings.HasPrefix(ref, "refs/tags/") {
		ev.complete = false
	}
	return ev, nil
}

// parseBitbucketPush reads Bitbucket Cloud's repo:push payload. It lists no
// files, so every application on a pushed branch or tag is touched.
func parseBitbucketPush(body []byte) (pushEvent, error) {
	var pl struct {
		Push *struct {
			Changes []struct {
				New *struct {
					Type string `json:"type"`
					Name string `json:"name"`
				} `json:"new"`
			} `json:"changes"`
		} `json:"push"`
		Repository *struct {
			FullName string `json:"full_name"`
			Links    struct {
				HTML struct {
					Href string `json:"href"`
				} `json:"html"`
			} `json:"links"`
			MainBranch *struct {
				Name string `json:"name"`
			} `json:"mainbranch"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &pl); err != nil {
		return pushEvent{}, fmt.Errorf("decode: %w", err)
	}
	if pl.Push == nil || pl.Repository == nil {
		return pushEvent{}, errors.New("no push or repository")
	}
	repo := pl.Repository
	var ev pushEvent
	switch {
	case repo.Links.HTML.Href != "":
		ev.repos = []string{repo.Links.HTML.Href}
	case repo.FullName != "":
		ev.repos = []string{"https://bitbucket.org/" + repo.FullName}
	default:
		return pushEvent{}, errors.New("the repository has no link or full name")
	}
	if repo.MainBranch != nil {
		ev.defaultBranch = repo.MainBranch.Name
	}
	for _, c := range pl.Push.Changes {
		if c.New == nil || c.New.Name == "" {
			continue // a deleted branch or tag
		}
		var ref string
		switch c.New.Type {
		case "branch":
			ref = "refs/heads/" + c.New.Name
		case "tag", "annotated_tag":
			ref = "refs/tags/" + c.New.Name
		default:
			continue // Mercurial bookmarks and named branches
		}
		if !slices.Contains(ev.refs, ref) {
			ev.refs = append(ev.refs, ref)
		}
	}
	return ev, nil
}

// parseGenericPush reads a GenericPush strictly: it is Flotilla's own
// format, so an unknown field is a mistake worth reporting.
func parseGenericPush(body []byte) (pushEvent, error) {
	var pl GenericPush
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pl); err != nil {
		return pushEvent{}, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return pushEvent{}, errors.New("decode: data after the JSON object")
	}
	if strings.TrimSpace(pl.Repository) == "" || strings.TrimSpace(pl.Ref) == "" {
		return pushEvent{}, errors.New(`"repository" and "ref" are required`)
	}
	ev := pushEvent{
		id:    strings.TrimSpace(pl.ID),
		repos: []string{pl.Repository},
		refs:  []string{fullRef(strings.TrimSpace(pl.Ref))},
		files: pl.Paths,
	}
	ev.complete = len(pl.Paths) > 0
	return ev, nil
}
