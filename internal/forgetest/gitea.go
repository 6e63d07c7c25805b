package forgetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Gitea is a real Gitea server, started from a binary built from its Go
// module (code.gitea.io/gitea; see docs/security.md "Previews"), with the
// users ann (admin, owner of the repositories) and eve (who forks).
type Gitea struct {
	t      testing.TB
	URL    string // http://127.0.0.1:port
	labels map[string]int64
}

// Passwords of the test users.
const giteaPassword = "pw-flotilla-test-1"

// StartGitea starts a Gitea from $FLOTILLA_GITEA (the binary) with the
// options (locales) of $FLOTILLA_GITEA_ROOT, its module's source, by
// default the newest code.gitea.io/gitea in the module cache. Without
// FLOTILLA_GITEA the test is skipped, unless FLOTILLA_REQUIRE_GITEA=1.
func StartGitea(t testing.TB) *Gitea {
	t.Helper()
	bin := os.Getenv("FLOTILLA_GITEA")
	if bin == "" {
		if os.Getenv("FLOTILLA_REQUIRE_GITEA") == "1" {
			t.Fatal("FLOTILLA_REQUIRE_GITEA=1 but FLOTILLA_GITEA names no gitea binary")
		}
		t.Skip("FLOTILLA_GITEA names no gitea binary (go build code.gitea.io/gitea; docs/security.md, Previews)")
	}
	root := os.Getenv("FLOTILLA_GITEA_ROOT")
	if root == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			t.Fatalf("go env GOMODCACHE: %v", err)
		}
		dirs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "code.gitea.io", "gitea@*"))
		if len(dirs) == 0 {
			t.Fatal("no code.gitea.io/gitea in the module cache; set FLOTILLA_GITEA_ROOT")
		}
		root = dirs[len(dirs)-1]
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ini := filepath.Join(dir, "app.ini")
	conf := fmt.Sprintf(`APP_NAME = flotilla-test
RUN_USER = %s
RUN_MODE = prod
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true
WORK_PATH = %[2]s
[database]
DB_TYPE = sqlite3
PATH = %[2]s/gitea.db
[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]d
ROOT_URL = %[4]s/
DISABLE_SSH = true
OFFLINE_MODE = true
APP_DATA_PATH = %[2]s/data
STATIC_ROOT_PATH = %[5]s
[repository]
ROOT = %[2]s/repos
[security]
INSTALL_LOCK = true
[service]
DISABLE_REGISTRATION = true
[log]
MODE = console
LEVEL = warn
`, currentUser(), dir, port, url, root)
	if err := os.WriteFile(ini, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append(args, "-c", ini)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gitea %v: %v\n%s", args, err, out)
		}
	}
	run("migrate")
	run("admin", "user", "create", "--admin", "--username", "ann", "--password", giteaPassword, "--email", "ann@example.com", "--must-change-password=false")
	run("admin", "user", "create", "--username", "eve", "--password", giteaPassword, "--email", "eve@example.com", "--must-change-password=false")
	web := exec.Command(bin, "web", "-c", ini)
	web.Dir = dir
	logs := &bytes.Buffer{}
	web.Stdout, web.Stderr = logs, logs
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = web.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = web.Process.Kill()
		<-done
	})
	g := &Gitea{t: t, URL: url, labels: map[string]int64{}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(url + "/api/v1/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		select {
		case <-done:
			t.Fatalf("gitea web exited:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea did not answer within 90s:\n%s", logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// API is the base URL a forge client is given.
func (g *Gitea) API() string { return g.URL + "/api/v1" }

// RepoURL is the clone URL of owner/name.
func (g *Gitea) RepoURL(repo string) string { return g.URL + "/" + repo + ".git" }

// call makes an API call as user and decodes the answer into out.
func (g *Gitea) call(user, method, path string, body, out any) int {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.API()+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	req.SetBasicAuth(user, giteaPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		g.t.Fatalf("%s %s: %s\n%s", method, path, resp.Status, b)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			g.t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// CreateRepo makes ann/name with a first commit on main.
func (g *Gitea) CreateRepo(name string) {
	g.t.Helper()
	g.call("ann", http.MethodPost, "/user/repos", map[string]any{"name": name, "auto_init": true, "default_branch": "main"}, nil)
}

// Fork makes eve/<name> from ann/<name>.
func (g *Gitea) Fork(name string) {
	g.t.Helper()
	g.call("eve", http.MethodPost, "/repos/ann/"+name+"/forks", map[string]any{}, nil)
}

// Write commits content at path on branch of repo (owner/name) as user;
// with from, branch is created from it. It returns the commit.
func (g *Gitea) Write(user, repo, from, branch, path, content string) string {
	g.t.Helper()
	ref := branch
	if from != "" {
		ref = from
	}
	var cur struct {
		SHA string `json:"sha"`
	}
	exists := g.call(user, http.MethodGet, "/repos/"+repo+"/contents/"+path+"?ref="+ref, nil, &cur) == http.StatusOK
	body := map[string]any{"content": base64.StdEncoding.EncodeToString([]byte(content)), "message": "write " + path}
	if from != "" {
		body["branch"], body["new_branch"] = from, branch
	} else {
		body["branch"] = branch
	}
	method := http.MethodPost
	if exists {
		method, body["sha"] = http.MethodPut, cur.SHA
	}
	var out struct {
		Commit struct {
			SHA string `json:"sha"`
		} `json:"commit"`
	}
	g.call(user, method, "/repos/"+repo+"/contents/"+path, body, &out)
	return out.Commit.SHA
}

// OpenPR opens a pull request into ann/<name>:main from head ("branch" or
// "eve:branch") as user, and returns its number.
func (g *Gitea) OpenPR(user, name, head string) int {
	g.t.Helper()
	var out struct {
		Number int `json:"number"`
	}
	g.call(user, http.MethodPost, "/repos/ann/"+name+"/pulls", map[string]any{"head": head, "base": "main", "title": "change " + head}, &out)
	return out.Number
}

// Label puts label on pull request n of ann/<name>.
func (g *Gitea) Label(name string, n int, label string) {
	g.t.Helper()
	id, ok := g.labels[name+"/"+label]
	if !ok {
		var out struct {
			ID int64 `json:"id"`
		}
		g.call("ann", http.MethodPost, "/repos/ann/"+name+"/labels", map[string]any{"name": label, "color": "#00aabb"}, &out)
		id = out.ID
		g.labels[name+"/"+label] = id
	}
	g.call("ann", http.MethodPost, fmt.Sprintf("/repos/ann/%s/issues/%d/labels", name, n), map[string]any{"labels": []int64{id}}, nil)
}

// ClosePR closes pull request n of ann/<name>.
func (g *Gitea) ClosePR(name string, n int) {
	g.t.Helper()
	g.call("ann", http.MethodPatch, fmt.Sprintf("/repos/ann/%s/pulls/%d", name, n), map[string]any{"state": "closed"}, nil)
}

// Token creates an API token of user that may write statuses and comments
// and read the user, and returns it.
func (g *Gitea) Token(user string) string {
	g.t.Helper()
	var out struct {
		SHA1 string `json:"sha1"`
	}
	name := fmt.Sprintf("flotilla-%d", time.Now().UnixNano())
	g.call(user, http.MethodPost, "/users/"+user+"/tokens", map[string]any{"name": name,
		"scopes": []string{"write:repository", "write:issue", "read:user"}}, &out)
	if out.SHA1 == "" {
		g.t.Fatalf("token of %s: none returned", user)
	}
	return out.SHA1
}

// Status is one commit status as Gitea reports it.
type Status struct {
	State       string `json:"status"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// Statuses lists the statuses of commit sha of repo (owner/name), newest
// first, every state a context went through included.
func (g *Gitea) Statuses(repo, sha string) []Status {
	g.t.Helper()
	var out []Status
	g.call("ann", http.MethodGet, "/repos/"+repo+"/statuses/"+sha+"?sort=newest&limit=50", nil, &out)
	return out
}

// Comment is one comment of an issue or pull request.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// Comments lists the comments of pull request n of ann/<name>.
func (g *Gitea) Comments(name string, n int) []Comment {
	g.t.Helper()
	var out []Comment
	g.call("ann", http.MethodGet, fmt.Sprintf("/repos/ann/%s/issues/%d/comments", name, n), nil, &out)
	return out
}

// CommentAs writes a comment on pull request n of ann/<name> as user.
func (g *Gitea) CommentAs(user, name string, n int, body string) {
	g.t.Helper()
	g.call(user, http.MethodPost, fmt.Sprintf("/repos/ann/%s/issues/%d/comments", name, n), map[string]any{"body": body}, nil)
}

// CombinedState is the state Gitea shows for commit sha of repo: the
// newest status of every context, combined.
func (g *Gitea) CombinedState(repo, sha string) string {
	g.t.Helper()
	var out struct {
		State string `json:"state"`
	}
	g.call("ann", http.MethodGet, "/repos/"+repo+"/commits/"+sha+"/status", nil, &out)
	return out.State
}

// Pull is one pull request of ann/<name> as Gitea reports it.
type Pull struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Merged bool   `json:"merged"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	URL    string `json:"html_url"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// Pulls lists every pull request of ann/<name>, open and closed.
func (g *Gitea) Pulls(name string) []Pull {
	g.t.Helper()
	var out []Pull
	g.call("ann", http.MethodGet, "/repos/ann/"+name+"/pulls?state=all&limit=50", nil, &out)
	return out
}

// MergePR merges pull request n of ann/<name> with a merge commit. Gitea
// refuses a merge ("Please try again later") while it is still checking
// whether the pull request's newest push merges cleanly, so the merge is
// tried until it is taken or a deadline passes.
func (g *Gitea) MergePR(name string, n int) {
	g.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/repos/ann/%s/pulls/%d/merge", g.API(), name, n), strings.NewReader(`{"Do":"merge"}`))
		if err != nil {
			g.t.Fatal(err)
		}
		req.SetBasicAuth("ann", giteaPassword)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			g.t.Fatalf("merge #%d: %v", n, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 {
			return
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || time.Now().After(deadline) {
			g.t.Fatalf("merge #%d: %s\n%s", n, resp.Status, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Branch is one branch's tip commit.
type Branch struct {
	Commit struct {
		ID      string `json:"id"`
		Message string `json:"message"`
	} `json:"commit"`
}

// BranchHead returns the commit branch of repo (owner/name) points at, ""
// when there is no such branch.
func (g *Gitea) BranchHead(repo, branch string) string {
	g.t.Helper()
	var out Branch
	if g.call("ann", http.MethodGet, "/repos/"+repo+"/branches/"+url.PathEscape(branch), nil, &out) != http.StatusOK {
		return ""
	}
	return out.Commit.ID
}

// Parents returns the parents of commit sha of repo (owner/name).
func (g *Gitea) Parents(repo, sha string) []string {
	g.t.Helper()
	var out struct {
		Parents []struct {
			SHA string `json:"sha"`
		} `json:"parents"`
	}
	g.call("ann", http.MethodGet, "/repos/"+repo+"/git/commits/"+sha, nil, &out)
	var ps []string
	for _, p := range out.Parents {
		ps = append(ps, p.SHA)
	}
	return ps
}

// File returns the content of path at ref of repo (owner/name).
func (g *Gitea) File(repo, ref, path string) string {
	g.t.Helper()
	var out struct {
		Content string `json:"content"`
	}
	g.call("ann", http.MethodGet, "/repos/"+repo+"/contents/"+path+"?ref="+url.QueryEscape(ref), nil, &out)
	b, err := base64.StdEncoding.DecodeString(out.Content)
	if err != nil {
		g.t.Fatalf("%s at %s: %v", path, ref, err)
	}
	return string(b)
}
