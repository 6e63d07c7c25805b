package forge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/forge"
)

// recorded is one request a recorded-answer server received.
type recorded struct {
	Method, Path, RawPath, Query string
	Header                       http.Header
	Body                         map[string]any
}

// recorder answers each request with the first answer whose "METHOD path"
// prefix matches, in the shape the forge's documentation gives, and keeps
// what it received.
type recorder struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	answers []answer
}

type answer struct {
	route string // "POST /repos/ann/web/statuses/"
	code  int
	body  string
}

func newRecorder(t *testing.T, answers ...answer) *recorder {
	r := &recorder{answers: answers}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		rec := recorded{Method: req.Method, Path: req.URL.Path, RawPath: req.URL.EscapedPath(), Query: req.URL.RawQuery, Header: req.Header.Clone()}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.Body); err != nil {
				t.Errorf("%s %s: body is not JSON: %s", req.Method, req.URL, b)
			}
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, rec)
		r.mu.Unlock()
		for _, a := range r.answers {
			if strings.HasPrefix(req.Method+" "+req.URL.EscapedPath(), a.route) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(a.code)
				_, _ = io.WriteString(w, a.body)
				return
			}
		}
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

const commit = "0123456789abcdef0123456789abcdef01234567"

// GitHub's "Create a commit status" (POST /repos/{owner}/{repo}/statuses/{sha},
// 201 with the status) and GitLab's "Set the pipeline status of a commit"
// (POST /projects/:id/statuses/:sha, states pending, running, success,
// failed, canceled; name for the context; the project's path as id with
// its slash encoded), with each forge's own token header.
func TestClient_SetStatus(t *testing.T) {
	gh := newRecorder(t, answer{"POST /repos/ann/web/statuses/", 201, `{"id":1,"state":"success","context":"flotilla/web"}`})
	c := &forge.Client{Kind: forge.GitHub, API: gh.URL, Token: "ghp-secret"}
	if err := c.SetStatus(context.Background(), "ann/web", commit, forge.CommitStatus{State: forge.StateSuccess, Context: "flotilla/web",
		Description: strings.Repeat("long ", 60), TargetURL: "https://console.example.com/#/apps/web"}); err != nil {
		t.Fatal(err)
	}
	r := gh.requests()[0]
	if r.Method != "POST" || r.Path != "/repos/ann/web/statuses/"+commit || r.Header.Get("Authorization") != "token ghp-secret" ||
		r.Header.Get("Accept") != "application/vnd.github+json" {
		t.Fatalf("GitHub request %+v", r)
	}
	if r.Body["state"] != "success" || r.Body["context"] != "flotilla/web" || r.Body["target_url"] != "https://console.example.com/#/apps/web" ||
		len([]rune(r.Body["description"].(string))) != forge.MaxDescription {
		t.Fatalf("GitHub body %v", r.Body)
	}

	gl := newRecorder(t, answer{"POST /api/v4/projects/grp%2Fsub%2Fweb/statuses/", 201, `{"id":1,"status":"running","name":"flotilla/web"}`})
	c = &forge.Client{Kind: forge.GitLab, API: gl.URL + "/api/v4", Token: "glpat-secret"}
	for _, st := range []forge.State{forge.StatePending, forge.StateSuccess, forge.StateFailure} {
		if err := c.SetStatus(context.Background(), "grp/sub/web", commit, forge.CommitStatus{State: st, Context: "flotilla/web", Description: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	var states []any
	for _, r := range gl.requests() {
		if r.RawPath != "/api/v4/projects/grp%2Fsub%2Fweb/statuses/"+commit || r.Header.Get("PRIVATE-TOKEN") != "glpat-secret" || r.Header.Get("Authorization") != "" {
			t.Fatalf("GitLab request %+v", r)
		}
		if r.Body["name"] != "flotilla/web" || r.Body["context"] != nil || r.Body["target_url"] != nil {
			t.Fatalf("GitLab body %v", r.Body)
		}
		states = append(states, r.Body["state"])
	}
	if want := []any{"running", "success", "failed"}; !equalAny(states, want) {
		t.Fatalf("GitLab states %v, want %v", states, want)
	}
}

func equalAny(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A forge that fails answers with an error naming the operation and the
// code; neither the token nor the forge's body is in it; a redirect is not
// followed (the token stays with the configured origin).
func TestClient_SetStatusFailures(t *testing.T) {
	srv := newRecorder(t, answer{"POST /repos/ann/web/statuses/", 500, `{"message":"boom ghp-secret"}`})
	c := &forge.Client{Kind: forge.GitHub, API: srv.URL, Token: "ghp-secret"}
	err := c.SetStatus(context.Background(), "ann/web", commit, forge.CommitStatus{State: forge.StatePending, Context: "flotilla/web"})
	var se *forge.StatusError
	if !errors.As(err, &se) || se.Code != 500 || strings.Contains(err.Error(), "ghp-secret") {
		t.Fatalf("error %v", err)
	}

	other := newRecorder(t)
	redirect := newRecorder(t, answer{"POST /repos/ann/web/statuses/", 0, ""})
	redirect.Config.Handler = http.RedirectHandler(other.URL+"/steal", http.StatusTemporaryRedirect)
	c = &forge.Client{Kind: forge.GitHub, API: redirect.URL, Token: "ghp-secret"}
	if err := c.SetStatus(context.Background(), "ann/web", commit, forge.CommitStatus{State: forge.StatePending, Context: "flotilla/web"}); err == nil {
		t.Fatal("a redirect was taken as success")
	}
	if n := len(other.requests()); n != 0 {
		t.Fatalf("the redirect was followed: %d requests elsewhere", n)
	}

	for _, bad := range []struct{ repo, sha string }{{"ann", commit}, {"ann/web/x", commit}, {"ann/web", "HEAD"}, {"../x/web", commit}} {
		if err := c.SetStatus(context.Background(), bad.repo, bad.sha, forge.CommitStatus{State: forge.StatePending, Context: "x"}); err == nil {
			t.Errorf("SetStatus(%q, %q) accepted", bad.repo, bad.sha)
		}
	}
}

// GitHub's issue comments (GET /repos/{owner}/{repo}/issues/{n}/comments
// paged with per_page and page, POST there, PATCH
// /repos/{owner}/{repo}/issues/comments/{id}) and GitLab's merge request
// notes (GET/POST /projects/:id/merge_requests/:iid/notes, PUT
// .../notes/:note_id; system notes and others' notes skipped).
func TestClient_UpsertComment(t *testing.T) {
	marker := forge.PlanMarker("web")
	page1 := make([]map[string]any, 100)
	for i := range page1 {
		page1[i] = map[string]any{"id": i + 1, "body": marker + "\nnot mine", "user": map[string]any{"login": "eve"}}
	}
	p1, _ := json.Marshal(page1)
	p2, _ := json.Marshal([]map[string]any{{"id": 500, "body": marker + "\nold", "user": map[string]any{"login": "flotilla-bot"}}})
	gh := newRecorder(t,
		answer{"GET /user", 200, `{"login":"flotilla-bot","id":9}`},
		answer{"PATCH /repos/ann/web/issues/comments/500", 200, `{"id":500}`},
	)
	gh.Config.Handler = pageHandler(gh.Config.Handler, "/repos/ann/web/issues/7/comments", string(p1), string(p2))
	c := &forge.Client{Kind: forge.GitHub, API: gh.URL, Token: "ghp-secret"}
	res, err := c.UpsertComment(context.Background(), "ann/web", 7, marker, "new plan")
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || res.ID != 500 {
		t.Fatalf("result %+v, want comment 500 edited", res)
	}
	last := gh.requests()[len(gh.requests())-1]
	if last.Method != "PATCH" || last.Body["body"] != marker+"\nnew plan" {
		t.Fatalf("last request %+v", last)
	}

	gl := newRecorder(t,
		answer{"GET /api/v4/user", 200, `{"username":"flotilla-bot","id":9}`},
		answer{"GET /api/v4/projects/ann%2Fweb/merge_requests/3/notes", 200,
			`[{"id":1,"body":"` + marker + `","system":true,"author":{"username":"flotilla-bot"}},{"id":2,"body":"hi","author":{"username":"ann"}}]`},
		answer{"POST /api/v4/projects/ann%2Fweb/merge_requests/3/notes", 201, `{"id":3,"body":"x","author":{"username":"flotilla-bot"}}`},
	)
	c = &forge.Client{Kind: forge.GitLab, API: gl.URL + "/api/v4", Token: "glpat-secret"}
	res, err = c.UpsertComment(context.Background(), "ann/web", 3, marker, "plan")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.ID != 3 {
		t.Fatalf("GitLab result %+v", res)
	}
	reqs := gl.requests()
	if q := reqs[1].Query; !strings.Contains(q, "per_page=100") || !strings.Contains(q, "sort=asc") {
		t.Fatalf("GitLab listing query %q", q)
	}
	if post := reqs[len(reqs)-1]; post.Method != "POST" || post.Header.Get("PRIVATE-TOKEN") != "glpat-secret" || post.Body["body"] != marker+"\nplan" {
		t.Fatalf("GitLab post %+v", post)
	}
}

// pageHandler serves pages of one listing by ?page=, like GitHub, and
// leaves other paths to next.
func pageHandler(next http.Handler, path string, pages ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != path {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Query().Get("per_page") != "100" {
			http.Error(w, "per_page", http.StatusBadRequest)
			return
		}
		i := 0
		switch r.URL.Query().Get("page") {
		case "1":
		case "2":
			i = 1
		default:
			_, _ = io.WriteString(w, "[]")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, pages[i])
	})
}
