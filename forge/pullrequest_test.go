package forge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/forge"
)

// prRequest is one request a recording server saw.
type prRequest struct {
	Method, Path, RawPath, Query, Auth, PrivateToken string
	Body                                             map[string]string
}

// prRecorder answers every request with answer(r) and records it. The
// answers are shaped as GitHub's and GitLab's documented REST answers
// (only the fields a client reads, plus some it must ignore).
type prRecorder struct {
	mu   sync.Mutex
	reqs []prRequest
}

func (rc *prRecorder) start(t *testing.T, answer func(r *http.Request) (int, any)) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := prRequest{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), PrivateToken: r.Header.Get("PRIVATE-TOKEN")}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.Body); err != nil {
				t.Errorf("%s %s: body %q is not a JSON object of strings", r.Method, r.URL, b)
			}
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, rec)
		rc.mu.Unlock()
		code, v := answer(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(s.Close)
	return s
}

func (rc *prRecorder) all() []prRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]prRequest(nil), rc.reqs...)
}

func ghPull(n int, headRepo, head, base, title string) map[string]any {
	return map[string]any{"number": n, "state": "open", "html_url": "https://github.com/acme/shop/pull/" + itoa(n),
		"title": title, "body": "b", "node_id": "PR_x", "locked": false,
		"head": map[string]any{"ref": head, "sha": strings.Repeat("a", 40), "repo": map[string]any{"full_name": headRepo}},
		"base": map[string]any{"ref": base, "sha": strings.Repeat("b", 40), "repo": map[string]any{"full_name": "acme/shop"}}}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// GitHub: the open pull request is found with head=owner:branch and base,
// a fork's pull request from a branch of the same name is not taken for
// it, and open and edit send the documented methods, paths and fields with
// the token.
func TestProposer_GitHub(t *testing.T) {
	rc := &prRecorder{}
	s := rc.start(t, func(r *http.Request) (int, any) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/repos/acme/shop/pulls":
			return 200, []any{
				ghPull(3, "eve/shop", "flotilla/images/web", "main", "a fork's"),
				ghPull(7, "acme/shop", "flotilla/images/web", "main", "images: update x 1.1"),
			}
		case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/shop/pulls":
			return 201, ghPull(8, "acme/shop", "flotilla/images/api", "main", "images: update y 2")
		case r.Method == http.MethodPatch && r.URL.Path == "/repos/acme/shop/pulls/7":
			return 200, ghPull(7, "acme/shop", "flotilla/images/web", "main", "images: update x 1.2")
		}
		return 404, map[string]string{"message": "Not Found"}
	})
	c := &forge.Client{Kind: forge.GitHub, API: s.URL, Token: "ghp_secret"}
	p, err := c.Proposer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	found, err := p.FindOpen(ctx, "acme/shop", "flotilla/images/web", "main")
	if err != nil {
		t.Fatal(err)
	}
	if found == nil || found.Number != 7 || found.Title != "images: update x 1.1" || found.URL != "https://github.com/acme/shop/pull/7" {
		t.Fatalf("found %+v, want #7 (not the fork's #3)", found)
	}
	opened, err := p.Open(ctx, "acme/shop", forge.ProposalRequest{Head: "flotilla/images/api", Base: "main", Title: "images: update y 2", Body: "body"})
	if err != nil || opened.Number != 8 {
		t.Fatalf("open: %+v, %v", opened, err)
	}
	edited, err := p.Edit(ctx, "acme/shop", 7, "images: update x 1.2", "new body")
	if err != nil || edited.Number != 7 || edited.Title != "images: update x 1.2" {
		t.Fatalf("edit: %+v, %v", edited, err)
	}
	reqs := rc.all()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		if r.Auth != "token ghp_secret" {
			t.Errorf("%s %s: Authorization %q", r.Method, r.Path, r.Auth)
		}
	}
	if q := reqs[0].Query; !strings.Contains(q, "head=acme%3Aflotilla%2Fimages%2Fweb") || !strings.Contains(q, "base=main") || !strings.Contains(q, "state=open") {
		t.Errorf("list query %q: want state=open, head=acme:flotilla/images/web, base=main", q)
	}
	want := map[string]string{"head": "flotilla/images/api", "base": "main", "title": "images: update y 2", "body": "body"}
	if reqs[1].Method != http.MethodPost || !equal(reqs[1].Body, want) {
		t.Errorf("open sent %s %+v, want POST %+v", reqs[1].Method, reqs[1].Body, want)
	}
	if reqs[2].Method != http.MethodPatch || !equal(reqs[2].Body, map[string]string{"title": "images: update x 1.2", "body": "new body"}) {
		t.Errorf("edit sent %s %+v", reqs[2].Method, reqs[2].Body)
	}
}

// GitHub: no open pull request from the branch is nil, not an error; a
// refusal is an error that does not quote the token.
func TestProposer_GitHubNoneAndRefused(t *testing.T) {
	rc := &prRecorder{}
	s := rc.start(t, func(r *http.Request) (int, any) {
		if r.Method == http.MethodGet {
			return 200, []any{}
		}
		return 422, map[string]string{"message": "Validation Failed ghp_secret"}
	})
	p, _ := (&forge.Client{Kind: forge.GitHub, API: s.URL, Token: "ghp_secret"}).Proposer()
	found, err := p.FindOpen(context.Background(), "acme/shop", "flotilla/images/web", "main")
	if err != nil || found != nil {
		t.Fatalf("found %+v, %v: want none", found, err)
	}
	_, err = p.Open(context.Background(), "acme/shop", forge.ProposalRequest{Head: "h", Base: "main", Title: "t"})
	if err == nil || strings.Contains(err.Error(), "ghp_secret") || !strings.Contains(err.Error(), "422") {
		t.Fatalf("refused open: %v", err)
	}
}

func glMR(iid int, src, dst int64, head, base, title string) map[string]any {
	return map[string]any{"id": 1000 + iid, "iid": iid, "state": "opened", "web_url": "https://gitlab.example.com/group/sub/shop/-/merge_requests/" + itoa(iid),
		"title": title, "description": "d", "source_branch": head, "target_branch": base, "sha": strings.Repeat("c", 40),
		"source_project_id": src, "target_project_id": dst, "merge_status": "can_be_merged"}
}

// GitLab: merge requests under /projects/<escaped path>, filtered by
// source and target branch, a fork's (another source project) left out,
// description for the body, PUT to edit, and the token as PRIVATE-TOKEN.
func TestProposer_GitLab(t *testing.T) {
	rc := &prRecorder{}
	const project = "/projects/group%2Fsub%2Fshop"
	s := rc.start(t, func(r *http.Request) (int, any) {
		p := r.URL.EscapedPath()
		switch {
		case r.Method == http.MethodGet && p == "/api/v4"+project+"/merge_requests":
			return 200, []any{glMR(2, 99, 42, "flotilla/images/web", "main", "a fork's"), glMR(5, 42, 42, "flotilla/images/web", "main", "images: update x 1.1")}
		case r.Method == http.MethodPost && p == "/api/v4"+project+"/merge_requests":
			return 201, glMR(6, 42, 42, "flotilla/images/api", "main", "images: update y 2")
		case r.Method == http.MethodPut && p == "/api/v4"+project+"/merge_requests/5":
			return 200, glMR(5, 42, 42, "flotilla/images/web", "main", "images: update x 1.2")
		}
		return 404, map[string]string{"message": "404 Not Found"}
	})
	c := &forge.Client{Kind: forge.GitLab, API: s.URL + "/api/v4", Token: "glpat-secret"}
	p, err := c.Proposer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	found, err := p.FindOpen(ctx, "group/sub/shop", "flotilla/images/web", "main")
	if err != nil || found == nil || found.Number != 5 || found.Body != "d" {
		t.Fatalf("found %+v, %v: want !5 (not the fork's !2)", found, err)
	}
	opened, err := p.Open(ctx, "group/sub/shop", forge.ProposalRequest{Head: "flotilla/images/api", Base: "main", Title: "images: update y 2", Body: "body"})
	if err != nil || opened.Number != 6 || !strings.HasSuffix(opened.URL, "/merge_requests/6") {
		t.Fatalf("open: %+v, %v", opened, err)
	}
	if _, err := p.Edit(ctx, "group/sub/shop", 5, "images: update x 1.2", "new body"); err != nil {
		t.Fatal(err)
	}
	reqs := rc.all()
	if len(reqs) != 3 {
		t.Fatalf("%d requests: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		if r.PrivateToken != "glpat-secret" || r.Auth != "" {
			t.Errorf("%s %s: PRIVATE-TOKEN %q, Authorization %q", r.Method, r.RawPath, r.PrivateToken, r.Auth)
		}
	}
	if q := reqs[0].Query; !strings.Contains(q, "state=opened") || !strings.Contains(q, "source_branch=flotilla%2Fimages%2Fweb") || !strings.Contains(q, "target_branch=main") {
		t.Errorf("list query %q", q)
	}
	want := map[string]string{"source_branch": "flotilla/images/api", "target_branch": "main", "title": "images: update y 2", "description": "body"}
	if !equal(reqs[1].Body, want) {
		t.Errorf("open sent %+v, want %+v", reqs[1].Body, want)
	}
	if reqs[2].Method != http.MethodPut || !equal(reqs[2].Body, map[string]string{"title": "images: update x 1.2", "description": "new body"}) {
		t.Errorf("edit sent %s %+v", reqs[2].Method, reqs[2].Body)
	}
}

// Bad arguments are refused before anything is sent.
func TestProposer_refusesBadArguments(t *testing.T) {
	rc := &prRecorder{}
	s := rc.start(t, func(*http.Request) (int, any) { return 200, []any{} })
	for _, kind := range []string{forge.GitHub, forge.Gitea, forge.GitLab} {
		p, err := (&forge.Client{Kind: kind, API: s.URL, Token: "x"}).Proposer()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := p.FindOpen(ctx, "acme/shop", "bad branch", "main"); err == nil {
			t.Errorf("%s: a branch with a space was accepted", kind)
		}
		if _, err := p.Open(ctx, "acme/shop", forge.ProposalRequest{Head: "h", Base: "main", Title: "two\nlines"}); err == nil {
			t.Errorf("%s: a two-line title was accepted", kind)
		}
		if _, err := p.Edit(ctx, "acme/shop", 0, "t", "b"); err == nil {
			t.Errorf("%s: pull request 0 was accepted", kind)
		}
	}
	if n := len(rc.all()); n != 0 {
		t.Fatalf("%d requests sent for refused arguments", n)
	}
	if _, err := (&forge.Client{Kind: "bitbucket"}).Proposer(); err == nil {
		t.Fatal("an unknown kind has a proposer")
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
