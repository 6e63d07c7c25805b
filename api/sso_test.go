package api_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// ssoEnv is the API with single sign-on against the zitadel example OP,
// both on loopback in this process.
type ssoEnv struct {
	api, op string
	audit   *access.Audit
	events  *events.Broker
}

func newSSOEnv(t *testing.T) *ssoEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiURL := "http://" + ln.Addr().String()

	issuer := apitest.StartOP(t, apiURL+"/auth/callback", map[string][]string{
		"alice":  {"shop-devs"},
		"victor": {"auditors"},
		"nobody": nil,
	})
	sso, err := api.NewSSO(api.SSOConfig{Issuer: issuer, ClientID: apitest.OPClientID, ClientSecret: apitest.OPClientSecret,
		RedirectURL: apiURL + "/auth/callback", ViewerGroups: []string{"auditors"}, AdminGroups: []string{"platform"}})
	if err != nil {
		t.Fatal(err)
	}
	ctl := apitest.NewController(apitest.Sample()...)
	for _, app := range []string{"shop", "billing"} {
		ctl.SetHistory(app, []charts.Release{{Revision: 1}})
	}
	audit := access.NewAudit(0, slog.New(slog.DiscardHandler))
	broker := events.NewBroker(events.BrokerOptions{})
	srv := httptest.NewUnstartedServer(api.New(api.Options{
		Controller: ctl, Events: broker, Metrics: metrics.New(),
		Logger: slog.New(slog.DiscardHandler), Audit: audit,
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: adminToken}},
		Policy: access.NewPolicy([]application.Project{
			{Name: "shop", Applications: []string{"shop"}, Roles: []application.RoleBinding{{Role: "operator", Groups: []string{"shop-devs"}}}},
			{Name: "bank", Applications: []string{"bill*"}},
		}),
		SSO: sso,
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &ssoEnv{api: apiURL, op: issuer, audit: audit, events: broker}
}

// login goes through the whole flow as a browser would: the controller's
// redirect to the provider, the provider's login form, the callback.
func (e *ssoEnv) login(t *testing.T, user string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.Get(e.api + "/auth/login?return=/api/v1/applications")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if !strings.HasPrefix(resp.Request.URL.String(), e.op+"/login/") || id == "" {
		t.Fatalf("login did not reach the provider's form: %s (%d)", resp.Request.URL, resp.StatusCode)
	}
	resp, err = c.PostForm(e.op+"/login/username", url.Values{"username": {user}, "password": {apitest.OPPassword}, "id": {id}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/api/v1/applications" {
		t.Fatalf("login ended at %s with %d: %s", resp.Request.URL, resp.StatusCode, b)
	}
	return c
}

func (e *ssoEnv) do(t *testing.T, c *http.Client, method, path string, h map[string]string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("{}")
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, e.api+path, body)
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
	}
	for k, v := range h {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSSO_aUserReachesTheApplicationsItsGroupsBindAndNoOthers(t *testing.T) {
	e := newSSOEnv(t)
	alice := e.login(t, "alice")
	if code, b := e.do(t, alice, "GET", "/api/v1/applications", nil); code != 200 || !strings.Contains(b, `"shop"`) || strings.Contains(b, "billing") {
		t.Errorf("list: %d %s; want shop only", code, b)
	}
	if code, b := e.do(t, alice, "POST", "/api/v1/applications/shop/refresh", nil); code != 202 {
		t.Errorf("operator refresh of shop: %d %s", code, b)
	}
	if code, b := e.do(t, alice, "GET", "/api/v1/applications/billing", nil); code != 404 {
		t.Errorf("another project's application: %d %s; want 404", code, b)
	}
	if code, b := e.do(t, alice, "GET", "/api/v1/audit", nil); code != 403 {
		t.Errorf("audit as a project operator: %d %s; want 403", code, b)
	}
	var found bool
	for _, en := range e.audit.Entries() {
		if en.App == "shop" && en.Who == "sso:alice@example.com" && en.Role == access.Operator && en.Project == "shop" {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit entry names the user: %+v", e.audit.Entries())
	}

	victor := e.login(t, "victor")
	if code, b := e.do(t, victor, "GET", "/api/v1/applications/billing", nil); code != 200 {
		t.Errorf("global viewer read: %d %s", code, b)
	}
	if code, b := e.do(t, victor, "POST", "/api/v1/applications/shop/sync", nil); code != 403 {
		t.Errorf("global viewer sync: %d %s; want 403", code, b)
	}

	nobody := e.login(t, "nobody")
	if code, b := e.do(t, nobody, "GET", "/api/v1/applications/shop", nil); code != 404 {
		t.Errorf("a user in no bound group: %d %s; want 404", code, b)
	}
}

func TestSSO_aWriteWithTheSessionCookieNeedsTheRequestHeaderAndTheOwnOrigin(t *testing.T) {
	e := newSSOEnv(t)
	alice := e.login(t, "alice")
	if code, b := e.do(t, alice, "POST", "/api/v1/applications/shop/sync", map[string]string{api.RequestHeader: ""}); code != 403 || !strings.Contains(b, api.RequestHeader) {
		t.Errorf("without %s: %d %s; want 403", api.RequestHeader, code, b)
	}
	if code, b := e.do(t, alice, "POST", "/api/v1/applications/shop/sync", map[string]string{"Content-Type": "text/plain"}); code != 415 {
		t.Errorf("a text/plain write: %d %s; want 415", code, b)
	}
	if code, b := e.do(t, alice, "POST", "/api/v1/applications/shop/sync", map[string]string{"Origin": "https://evil.example"}); code != 403 {
		t.Errorf("a write from another origin: %d %s; want 403", code, b)
	}
	if code, b := e.do(t, alice, "POST", "/api/v1/applications/shop/sync", map[string]string{"Origin": e.api}); code != 202 {
		t.Errorf("a write from the console's origin: %d %s; want 202", code, b)
	}
}

func TestSSO_logoutEndsTheSessionAtOnceAndATamperedCookieIsRefused(t *testing.T) {
	e := newSSOEnv(t)
	alice := e.login(t, "alice")
	u, _ := url.Parse(e.api)
	var sid string
	for _, c := range alice.Jar.Cookies(u) {
		if c.Name == "flotilla_session" {
			sid = c.Value
		}
	}
	if sid == "" {
		t.Fatal("no session cookie after login")
	}
	tampered := sid[:len(sid)-1] + string("AB"[0+boolInt(sid[len(sid)-1] == 'A')])
	if code, _ := e.do(t, http.DefaultClient, "GET", "/api/v1/applications/shop", map[string]string{"Cookie": "flotilla_session=" + tampered}); code != 401 {
		t.Errorf("tampered cookie: %d; want 401", code)
	}
	if code, _ := e.do(t, http.DefaultClient, "GET", "/api/v1/applications/shop", map[string]string{"Cookie": "flotilla_session=" + sid}); code != 200 {
		t.Errorf("the real cookie from another client: %d; want 200", code)
	}
	if code, b := e.do(t, alice, "POST", "/auth/logout", nil); code != 204 {
		t.Fatalf("logout: %d %s", code, b)
	}
	// The old cookie value, replayed after logout, is refused too.
	if code, b := e.do(t, http.DefaultClient, "GET", "/api/v1/applications/shop", map[string]string{"Cookie": "flotilla_session=" + sid}); code != 401 || !strings.Contains(b, "session") {
		t.Errorf("after logout: %d %s; want 401", code, b)
	}
	var found bool
	for _, en := range e.audit.Entries() {
		if en.Route == "POST /auth/logout" && en.Who == "sso:alice@example.com" {
			found = true
		}
	}
	if !found {
		t.Errorf("logout not audited with the user's name: %+v", e.audit.Entries())
	}
}

func TestSSO_aCallbackWhoseStateDoesNotMatchTheLoginIsRefused(t *testing.T) {
	e := newSSOEnv(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(e.api + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 302 || loc.Query().Get("code_challenge_method") != "S256" || loc.Query().Get("nonce") == "" {
		t.Fatalf("login redirect %d %s: want PKCE S256 and a nonce", resp.StatusCode, loc)
	}
	if code, _ := e.do(t, c, "GET", "/auth/callback?code=x&state=forged", nil); code != 400 {
		t.Errorf("forged state: %d; want 400", code)
	}
	if code, _ := e.do(t, http.DefaultClient, "GET", "/auth/callback?code=x&state="+loc.Query().Get("state"), nil); code != 400 {
		t.Errorf("a callback without the login cookie: %d; want 400", code)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
