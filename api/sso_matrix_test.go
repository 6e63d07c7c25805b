package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// newSSOMatrixEnv is the API with console sessions and CLI logins against
// the example OP: groups bind each role on project shop, and two groups
// are the global admin and viewer.
func newSSOMatrixEnv(t *testing.T, cliLifetime time.Duration) *ssoEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiURL := "http://" + ln.Addr().String()
	issuer := apitest.StartOPWith(t, apitest.OPOptions{RedirectURL: apiURL + "/auth/callback", CLIIDTokenLifetime: cliLifetime,
		Groups: map[string][]string{
			"vera": {"shop-viewers"}, "otto": {"shop-devs"}, "ada": {"shop-admins"},
			"gina": {"auditors"}, "paul": {"platform"}, "nobody": nil,
		}})
	sso, err := api.NewSSO(api.SSOConfig{Issuer: issuer, ClientID: apitest.OPClientID, ClientSecret: apitest.OPClientSecret,
		RedirectURL: apiURL + "/auth/callback", CLIClientID: apitest.OPCLIClientID,
		ViewerGroups: []string{"auditors"}, AdminGroups: []string{"platform"}})
	if err != nil {
		t.Fatal(err)
	}
	ctl := apitest.NewController(apitest.Sample()...)
	broker := events.NewBroker(events.BrokerOptions{})
	ctl.Events = broker
	for _, app := range []string{"shop", "billing"} {
		ctl.SetHistory(app, []charts.Release{{Revision: 1}})
	}
	audit := access.NewAudit(0, slog.New(slog.DiscardHandler))
	srv := httptest.NewUnstartedServer(api.New(api.Options{
		Controller: ctl, Events: broker, Metrics: metrics.New(),
		Logger: slog.New(slog.DiscardHandler), Audit: audit,
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: adminToken}},
		Policy: access.NewPolicy([]application.Project{
			{Name: "shop", Applications: []string{"shop"}, Roles: []application.RoleBinding{
				{Role: "viewer", Groups: []string{"shop-viewers"}},
				{Role: "operator", Groups: []string{"shop-devs"}},
				{Role: "admin", Groups: []string{"shop-admins"}},
			}},
			{Name: "bank", Applications: []string{"bill*"}},
		}),
		SSO: sso,
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &ssoEnv{api: apiURL, op: issuer, audit: audit}
}

// cliLogin logs user in as `flotilla login` does (the device flow of the
// CLI's public client) and returns the ID token the CLI presents.
func (e *ssoEnv) cliLogin(t *testing.T, user string) string {
	t.Helper()
	var cl api.CLILogin
	code, b := e.do(t, http.DefaultClient, "GET", "/auth/cli", nil)
	if code != 200 {
		t.Fatalf("GET /auth/cli: %d %s", code, b)
	}
	cl = decode[api.CLILogin](t, []byte(b))
	if cl.Issuer != e.op || cl.ClientID != apitest.OPCLIClientID || !strings.Contains(strings.Join(cl.Scopes, " "), "offline_access") {
		t.Fatalf("GET /auth/cli = %+v", cl)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := oauth2.Config{ClientID: cl.ClientID, Scopes: cl.Scopes, Endpoint: oauth2.Endpoint{
		DeviceAuthURL: e.op + "/device_authorization", TokenURL: e.op + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := apitest.ApproveDevice(ctx, e.op, da.UserCode, user); err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no ID token from the device flow")
	}
	return raw
}

// ssoCaller is a row of the matrix: how the request is authenticated.
type ssoCaller struct {
	caller
	client *http.Client
	bearer string
}

func (e *ssoEnv) call(t *testing.T, c ssoCaller, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, e.api+path, rd)
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
	}
	if path == "/api/v1/events" {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req = req.WithContext(ctx)
	}
	hc := c.client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if path == "/api/v1/events" {
		return resp.StatusCode, nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The role matrix again, for users of single sign-on: console sessions
// whose groups bind each role, the global groups, a user in no bound
// group, and the ID token of a CLI login as the bearer, over every route.
func TestAPI_roleMatrixForSingleSignOnSessionsAndCLILogins(t *testing.T) {
	e := newSSOMatrixEnv(t, 0)
	otto := e.cliLogin(t, "otto")
	tampered := otto[:len(otto)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[!strings.HasSuffix(otto, "AAAA")]
	rows := []ssoCaller{
		{caller: caller{"session: project viewer", "", 200, 403, 404, 404, 403, 403, 200, []string{"shop"}}, client: e.login(t, "vera")},
		{caller: caller{"session: project operator", "", 200, 202, 404, 404, 403, 403, 200, []string{"shop"}}, client: e.login(t, "otto")},
		{caller: caller{"session: project admin", "", 200, 202, 404, 404, 403, 403, 200, []string{"shop"}}, client: e.login(t, "ada")},
		{caller: caller{"session: global viewer", "", 200, 403, 200, 403, 403, 200, 200, []string{"billing", "shop"}}, client: e.login(t, "gina")},
		{caller: caller{"session: global admin", "", 200, 202, 200, 202, 200, 200, 200, []string{"billing", "shop"}}, client: e.login(t, "paul")},
		{caller: caller{"session: no bound group", "", 404, 404, 404, 404, 403, 403, 200, nil}, client: e.login(t, "nobody")},
		{caller: caller{"CLI login: project operator", "", 200, 202, 404, 404, 403, 403, 200, []string{"shop"}}, bearer: otto},
		{caller: caller{"CLI login: a changed signature", "", 401, 401, 401, 401, 401, 401, 401, nil}, bearer: tampered},
	}
	_, missing := e.call(t, rows[4], "GET", "/api/v1/applications/nope", "")
	for _, c := range rows {
		t.Run(c.name, func(t *testing.T) {
			call := func(method, path, body string) (int, []byte) { return e.call(t, c, method, path, body) }
			checkAppRoutes(t, c.caller, missing, call)
			checkGlobalRoutes(t, c.caller, []globalRoute{{"/api/v1/audit", c.audit}, {"/metrics", c.metrics}, {"/api/v1/swarms", c.metrics}, {"/api/v1/applications", c.list}, {"/api/v1/events", c.list}}, call)
		})
	}
	var named bool
	for _, en := range e.audit.Entries() {
		if en.Who == "sso:otto@example.com" && en.Role == access.Operator && en.App == "shop" && en.Status == 202 {
			named = true
		}
		if regexp.MustCompile(`eyJ[A-Za-z0-9_-]{10,}`).MatchString(en.Who + en.Route) {
			t.Errorf("an audit entry holds a token: %+v", en)
		}
	}
	if !named {
		t.Error("no audit entry names the CLI user")
	}
}

func TestSSO_anExpiredCLILoginIsRefusedAtOnceAndSaysToLogInAgain(t *testing.T) {
	e := newSSOMatrixEnv(t, 2*time.Second)
	tok := e.cliLogin(t, "otto")
	c := ssoCaller{bearer: tok}
	if code, b := e.call(t, c, "GET", "/api/v1/applications/shop", ""); code != 200 {
		t.Fatalf("a fresh login: %d %s", code, b)
	}
	time.Sleep(2500 * time.Millisecond)
	if code, b := e.call(t, c, "GET", "/api/v1/applications/shop", ""); code != 401 || !strings.Contains(string(b), "flotilla login") || !strings.Contains(string(b), "expired") {
		t.Errorf("an expired login: %d %s; want 401 saying to run flotilla login", code, b)
	}
}

func TestSSO_aCLILoginEndedByLogoutIsRefusedOnTheNextRequest(t *testing.T) {
	e := newSSOMatrixEnv(t, 0)
	c := ssoCaller{bearer: e.cliLogin(t, "otto")}
	if code, b := e.call(t, c, "POST", "/auth/logout", "{}"); code != 204 {
		t.Fatalf("logout: %d %s", code, b)
	}
	if code, b := e.call(t, c, "GET", "/api/v1/applications/shop", ""); code != 401 || !strings.Contains(string(b), "flotilla logout") {
		t.Errorf("after logout: %d %s; want 401", code, b)
	}
	var named bool
	for _, en := range e.audit.Entries() {
		named = named || (en.Route == "POST /auth/logout" && en.Who == "sso:otto@example.com")
	}
	if !named {
		t.Errorf("the logout is not audited with the user's name: %+v", e.audit.Entries())
	}
}

// An ID token the provider issued to another client (here the console's
// own web client) is not a CLI login: its audience is not the CLI's.
func TestSSO_anIDTokenIssuedToAnotherClientIsRefused(t *testing.T) {
	e := newSSOMatrixEnv(t, 0)
	cfg := oauth2.Config{ClientID: apitest.OPClientID, ClientSecret: apitest.OPClientSecret, RedirectURL: e.api + "/auth/callback",
		Scopes: []string{"openid", "email"}, Endpoint: oauth2.Endpoint{AuthURL: e.op + "/auth", TokenURL: e.op + "/oauth/token"}}
	jar, _ := cookiejar.New(nil)
	var code string
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), e.api) {
			code = r.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := browser.Get(cfg.AuthCodeURL("state-1"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = browser.PostForm(e.op+"/login/username", url.Values{"username": {"paul"}, "password": {apitest.OPPassword},
		"id": {resp.Request.URL.Query().Get("authRequestID")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code == "" {
		t.Fatal("the provider returned no code")
	}
	tok, err := cfg.Exchange(t.Context(), code)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no ID token")
	}
	if code, b := e.call(t, ssoCaller{bearer: raw}, "GET", "/api/v1/applications", ""); code != 401 {
		t.Errorf("a global admin's ID token for the console's client: %d %s; want 401", code, b)
	}
}

func TestSSO_withoutACLIClientTheControllerOffersNoCLILogin(t *testing.T) {
	e := newSSOEnv(t)
	if code, b := e.do(t, http.DefaultClient, "GET", "/auth/cli", nil); code != 404 || !strings.Contains(b, "--oidc-cli-client-id") {
		t.Errorf("GET /auth/cli: %d %s; want 404 naming the flag", code, b)
	}
}
