package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// builtBinary builds this command once per test run, so the tests drive it
// as a user would.
func builtBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flotilla-login-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "flotilla")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// loginEnv is a controller API with single sign-on and CLI login against
// the zitadel example OP, both on loopback in this process: alice operates
// shop through her group, bob views it, nobody is bound to billing.
type loginEnv struct {
	api, op string
}

func newLoginEnv(t *testing.T) *loginEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiURL := "http://" + ln.Addr().String()
	issuer := apitest.StartOPWith(t, apitest.OPOptions{RedirectURL: apiURL + "/auth/callback", Groups: map[string][]string{
		"alice": {"shop-devs"},
		"bob":   {"shop-readers"},
	}})
	sso, err := api.NewSSO(api.SSOConfig{Issuer: issuer, ClientID: apitest.OPClientID, ClientSecret: apitest.OPClientSecret,
		RedirectURL: apiURL + "/auth/callback", CLIClientID: apitest.OPCLIClientID})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Options{
		Controller: apitest.NewController(apitest.Sample()...), Events: events.NewBroker(events.BrokerOptions{}),
		Logger: slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: cliAdminToken}},
		Policy: access.NewPolicy([]application.Project{
			{Name: "shop", Applications: []string{"shop"}, Roles: []application.RoleBinding{
				{Role: "operator", Groups: []string{"shop-devs"}},
				{Role: "viewer", Groups: []string{"shop-readers"}},
			}},
			{Name: "bank", Applications: []string{"bill*"}},
		}),
		SSO: sso,
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &loginEnv{api: apiURL, op: issuer}
}

// cliEnviron is the environment the binary runs in: no token, so the
// stored login is what it uses.
func cliEnviron(server string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envToken+"=") && !strings.HasPrefix(kv, envTokenFile+"=") && !strings.HasPrefix(kv, envCredentialsFile+"=") {
			env = append(env, kv)
		}
	}
	return append(env, envServer+"="+server)
}

var userCodeRe = regexp.MustCompile(`enter the code (\S+)`)

// runLogin runs `flotilla login` with args and hands each line it prints
// to act, which plays the person at the provider and reports whether it
// did; it fails t unless the login succeeded and act did. It returns what
// the command printed.
func (e *loginEnv) runLogin(t *testing.T, what string, act func(line string) bool, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), builtBinary(t), append([]string{"login"}, args...)...)
	cmd.Env = cliEnviron(e.api)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	acted := false
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if !acted {
			acted = act(line)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("flotilla login: %v\n%s%s", err, out.String(), stderr.String())
	}
	if !acted {
		t.Fatalf("flotilla login printed no %s:\n%s", what, out.String())
	}
	return out.String()
}

// login runs `flotilla login` and approves its code at the provider as
// user, the way a person in a browser would.
func (e *loginEnv) login(t *testing.T, creds, user string) string {
	t.Helper()
	return e.runLogin(t, "code", func(line string) bool {
		m := userCodeRe.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		if !strings.Contains(line, e.op+"/device") {
			t.Errorf("the address to open is not the provider's device page: %q", line)
		}
		if err := apitest.ApproveDevice(t.Context(), e.op, m[1], user); err != nil {
			t.Fatal(err)
		}
		return true
	}, "--credentials-file", creds, "--timeout", "1m")
}

// loginInBrowser runs `flotilla login --flow browser` and plays the
// browser: it opens the printed address, submits the provider's login form
// as user and follows the redirects to the CLI's loopback callback.
func (e *loginEnv) loginInBrowser(t *testing.T, creds, user string) string {
	t.Helper()
	return e.runLogin(t, "address", func(line string) bool {
		if !strings.HasPrefix(line, e.op+"/") {
			return false
		}
		u, err := url.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if q := u.Query(); q.Get("code_challenge_method") != "S256" || !strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || q.Get("nonce") == "" {
			t.Errorf("the login address lacks PKCE, a nonce or the loopback redirect: %s", line)
		}
		// Another page's request to the callback is refused and does not
		// end the login.
		forged, err := http.Get(u.Query().Get("redirect_uri") + "?code=x&state=forged")
		if err != nil {
			t.Fatal(err)
		}
		forged.Body.Close()
		if forged.StatusCode != http.StatusBadRequest {
			t.Errorf("a callback with another state: %d, want 400", forged.StatusCode)
		}
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
		resp, err := browser.Get(line)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Request.URL.Query().Get("authRequestID")
		if id == "" {
			t.Fatalf("the address did not lead to the provider's login form: %s", resp.Request.URL)
		}
		resp, err = browser.PostForm(e.op+"/login/username", url.Values{"username": {user}, "password": {apitest.OPPassword}, "id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Request.URL.Host != strings.TrimPrefix(strings.Split(u.Query().Get("redirect_uri"), "/callback")[0], "http://") || !strings.Contains(string(b), "Logged in") {
			t.Errorf("the browser ended at %s with %d: %s", resp.Request.URL, resp.StatusCode, b)
		}
		return true
	}, "--flow", "browser", "--open=false", "--credentials-file", creds, "--timeout", "1m")
}

// run runs the binary with args and the stored login in creds.
func (e *loginEnv) run(t *testing.T, creds string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), builtBinary(t), append(args, "--credentials-file", creds)...)
	cmd.Env = cliEnviron(e.api)
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), s.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), s.String(), 0
}

func readLogin(t *testing.T, path, server string) login {
	t.Helper()
	c, err := readCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Logins[server]
	if l == nil {
		t.Fatalf("no login for %s in %s", server, path)
	}
	return *l
}

func TestLogin_theDeviceFlowLogsInAndAppListShowsOnlyTheUsersProjectsWithTheGroupsRoles(t *testing.T) {
	e := newLoginEnv(t)
	dir := t.TempDir()
	aliceCreds := filepath.Join(dir, "alice", "credentials.json")
	if out := e.login(t, aliceCreds, "alice"); !strings.Contains(out, "Logged in to "+e.api+" as alice@example.com") {
		t.Errorf("login output:\n%s", out)
	}
	fi, err := os.Stat(aliceCreds)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %v, want 0600", fi.Mode().Perm())
	}
	if l := readLogin(t, aliceCreds, e.api); l.RefreshToken == "" || l.ClientID != apitest.OPCLIClientID {
		t.Errorf("stored login %+v: want a refresh token for the CLI client", l)
	}

	out, stderr, code := e.run(t, aliceCreds, "app", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("app list: exit %d: %s", code, stderr)
	}
	var list api.ApplicationList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "shop" {
		t.Errorf("alice's list = %+v, want shop only", list.Items)
	}
	if _, stderr, code := e.run(t, aliceCreds, "app", "sync", "shop"); code != 0 {
		t.Errorf("an operator's sync: exit %d: %s", code, stderr)
	}
	if _, stderr, code := e.run(t, aliceCreds, "app", "get", "billing"); code == 0 || !strings.Contains(stderr, "404") {
		t.Errorf("another project's application: exit %d: %s; want 404", code, stderr)
	}

	bobCreds := filepath.Join(dir, "bob.json")
	e.login(t, bobCreds, "bob")
	if _, stderr, code := e.run(t, bobCreds, "app", "get", "shop"); code != 0 {
		t.Errorf("a viewer's read: exit %d: %s", code, stderr)
	}
	if _, stderr, code := e.run(t, bobCreds, "app", "sync", "shop"); code == 0 || !strings.Contains(stderr, "403") {
		t.Errorf("a viewer's sync: exit %d: %s; want 403", code, stderr)
	}
}

func TestLogin_theBrowserFlowLogsInThroughALoopbackCallback(t *testing.T) {
	e := newLoginEnv(t)
	creds := filepath.Join(t.TempDir(), "credentials.json")
	if out := e.loginInBrowser(t, creds, "alice"); !strings.Contains(out, "Logged in to "+e.api+" as alice@example.com") {
		t.Errorf("login output:\n%s", out)
	}
	out, stderr, code := e.run(t, creds, "app", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("app list: exit %d: %s", code, stderr)
	}
	var list api.ApplicationList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "shop" {
		t.Errorf("alice's list = %+v, want shop only", list.Items)
	}
	if l := readLogin(t, creds, e.api); l.RefreshToken == "" {
		t.Errorf("no refresh token from the browser flow: %+v", l)
	}
}

func TestLogin_anExpiredLoginIsRenewedWithTheRefreshTokenAndLogoutEndsItAtOnce(t *testing.T) {
	e := newLoginEnv(t)
	creds := filepath.Join(t.TempDir(), "credentials.json")
	e.login(t, creds, "alice")
	before := readLogin(t, creds, e.api)

	// The CLI renews a login its file says has expired before using it.
	c, _ := readCredentials(creds)
	c.Logins[e.api].Expiry = time.Now().Add(-time.Minute)
	if err := c.write(creds); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a new ID token differs in its iat
	if _, stderr, code := e.run(t, creds, "app", "get", "shop"); code != 0 {
		t.Fatalf("app get with an expired login: exit %d: %s", code, stderr)
	}
	after := readLogin(t, creds, e.api)
	if after.IDToken == before.IDToken || after.RefreshToken == before.RefreshToken || !after.Expiry.After(time.Now()) {
		t.Errorf("the login was not renewed: before %v %q, after %v %q", before.Expiry, before.RefreshToken, after.Expiry, after.RefreshToken)
	}

	out, stderr, code := e.run(t, creds, "logout")
	if code != 0 || !strings.Contains(out, "Logged out of "+e.api) || stderr != "" {
		t.Fatalf("logout: exit %d: %s %s", code, out, stderr)
	}
	if _, err := os.Stat(creds); !os.IsNotExist(err) {
		t.Errorf("the credentials file is still there after the last logout: %v", err)
	}
	// The ID token of the ended login is refused at once, and its refresh
	// token no longer renews it: put it back and the CLI says to log in.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.api+"/api/v1/applications/shop", nil)
	req.Header.Set("Authorization", "Bearer "+after.IDToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("the logged-out ID token: %d, want 401", resp.StatusCode)
	}
	c = &credentials{Logins: map[string]*login{e.api: &after}}
	if err := c.write(creds); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := e.run(t, creds, "app", "get", "shop"); code == 0 || !strings.Contains(stderr, "401") || !strings.Contains(stderr, "flotilla logout") || !strings.Contains(stderr, "run flotilla login") {
		t.Errorf("a logged-out login put back: exit %d: %s", code, stderr)
	}
	c.Logins[e.api].Expiry = time.Now().Add(-time.Minute)
	if err := c.write(creds); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := e.run(t, creds, "app", "get", "shop"); code == 0 || !strings.Contains(stderr, "could not be renewed") || !strings.Contains(stderr, "run flotilla login") {
		t.Errorf("a revoked refresh token: exit %d: %s", code, stderr)
	}
}
