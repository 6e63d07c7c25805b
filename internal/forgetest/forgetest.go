// Package forgetest serves forges for tests of previews: Server answers the
// pull-request listings of the GitHub and Gitea/Forgejo APIs from answers
// shaped like the real ones (GitHub's "List pull requests", Gitea's
// PullRequest schema in modules/structs/pull.go: every field a client
// reads, plus a few it must ignore), and StartGitea runs a real Gitea
// built from its Go module (docs/security.md, "Previews").
package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// PR is one pull request the server knows.
type PR struct {
	Number   int
	HeadSHA  string
	HeadRef  string
	HeadRepo string // owner/name; "" is a deleted fork (head.repo null)
	Author   string
	Assoc    string // GitHub author_association
	Labels   []string
	State    string // "open" (default) or "closed"
	Merged   bool
	Updated  time.Time
}

// Server is a recorded-answer forge for one repository.
type Server struct {
	*httptest.Server
	Repo string // owner/name
	mu   sync.Mutex
	prs  []PR
	// Requests counts the listing requests served.
	Requests int
	// IgnoreState serves closed pull requests too, like a forge that
	// ignored ?state=open.
	IgnoreState bool
}

// New starts a server for repo; closed with the test.
func New(t testing.TB, repo string) *Server {
	s := &Server{Repo: repo}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// GitHubAPI and GiteaAPI are the API base URLs a client is given.
func (s *Server) GitHubAPI() string { return s.URL }
func (s *Server) GiteaAPI() string  { return s.URL + "/api/v1" }

// Set replaces the pull requests.
func (s *Server) Set(prs ...PR) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prs = slices.Clone(prs)
}

// Close a pull request (it stays listed with state=closed).
func (s *Server) ClosePR(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.prs {
		if s.prs[i].Number == n {
			s.prs[i].State = "closed"
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	gitea := strings.HasPrefix(r.URL.Path, "/api/v1/")
	p := strings.TrimPrefix(r.URL.Path, "/api/v1")
	if r.Method != http.MethodGet || p != "/repos/"+s.Repo+"/pulls" {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if gitea {
		per, _ = strconv.Atoi(q.Get("limit"))
	}
	if per <= 0 {
		per = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	s.mu.Lock()
	s.Requests++
	var list []PR
	for _, pr := range s.prs {
		st := pr.State
		if st == "" {
			st = "open"
		}
		if q.Get("state") == "open" && st != "open" && !s.IgnoreState {
			continue
		}
		pr.State = st
		list = append(list, pr)
	}
	s.mu.Unlock()
	// Both forges list the newest first by default.
	slices.SortFunc(list, func(a, b PR) int { return b.Number - a.Number })
	lo, hi := min((page-1)*per, len(list)), min(page*per, len(list))
	items := make([]map[string]any, 0, hi-lo)
	for _, pr := range list[lo:hi] {
		items = append(items, s.item(pr, gitea))
	}
	if hi < len(list) {
		next := *r.URL
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.String()))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if gitea {
		w.Header().Set("X-Total-Count", strconv.Itoa(len(list)))
	}
	_ = json.NewEncoder(w).Encode(items)
}

// item is one pull request in the forge's own shape.
func (s *Server) item(pr PR, gitea bool) map[string]any {
	updated := pr.Updated
	if updated.IsZero() {
		updated = time.Now().Add(-time.Hour)
	}
	labels := []map[string]any{}
	for i, l := range pr.Labels {
		labels = append(labels, map[string]any{"id": 100 + i, "name": l, "color": "ededed", "description": ""})
	}
	user := map[string]any{"login": pr.Author, "id": len(pr.Author) + 1000}
	repo := func(full string) any {
		if full == "" {
			return nil
		}
		owner, _, _ := strings.Cut(full, "/")
		return map[string]any{"id": len(full), "full_name": full, "name": strings.SplitN(full, "/", 2)[1],
			"owner": map[string]any{"login": owner}, "fork": full != s.Repo, "private": false}
	}
	ref := pr.HeadRef
	if ref == "" {
		ref = "change-" + strconv.Itoa(pr.Number)
	}
	head := map[string]any{"label": ref, "ref": ref, "sha": pr.HeadSHA, "repo": repo(pr.HeadRepo)}
	base := map[string]any{"label": "main", "ref": "main", "sha": strings.Repeat("0", 40), "repo": repo(s.Repo)}
	m := map[string]any{
		"id": 5000 + pr.Number, "number": pr.Number, "state": pr.State, "title": "change " + strconv.Itoa(pr.Number),
		"body": "", "user": user, "labels": labels, "draft": false, "head": head, "base": base,
		"created_at": updated.Add(-time.Hour).UTC().Format(time.RFC3339), "updated_at": updated.UTC().Format(time.RFC3339),
	}
	if gitea {
		head["repo_id"] = 0
		if pr.HeadRepo != "" {
			head["repo_id"] = len(pr.HeadRepo)
		}
		m["merged"] = pr.Merged
		m["mergeable"] = true
		m["html_url"] = s.URL + "/" + s.Repo + "/pulls/" + strconv.Itoa(pr.Number)
	} else {
		m["author_association"] = pr.Assoc
		m["html_url"] = "https://github.com/" + s.Repo + "/pull/" + strconv.Itoa(pr.Number)
		m["merged_at"] = nil
		m["node_id"] = "PR_x"
	}
	return m
}
