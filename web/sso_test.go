package web_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/web"
)

// ssoConsole serves the console with single sign-on against the zitadel
// example OP in this process; alice operates shop through her group.
func ssoConsole(t *testing.T) (ctx context.Context, base, issuer string) {
	t.Helper()
	ctx = newTab(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "http://" + ln.Addr().String()
	issuer = apitest.StartOP(t, base+"/auth/callback", map[string][]string{"alice": {"shop-devs"}})
	sso, err := api.NewSSO(api.SSOConfig{Issuer: issuer, ClientID: apitest.OPClientID,
		ClientSecret: apitest.OPClientSecret, RedirectURL: base + "/auth/callback"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Options{
		Controller: apitest.NewController(sample()...), Events: events.NewBroker(events.BrokerOptions{}),
		UI: web.Handler(), Logger: slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: adminToken}},
		Policy: access.NewPolicy([]application.Project{{Name: "shop", Applications: []string{"shop"},
			Roles: []application.RoleBinding{{Role: "operator", Groups: []string{"shop-devs"}}}}}),
		SSO: sso,
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	// Tabs share the browser's cookies; leave none for other tests.
	t.Cleanup(func() { _, _ = chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}) })
	return ctx, base, issuer
}

// ssoSignIn goes from the sign-in form through the provider's login page
// back to the list.
func ssoSignIn(t *testing.T, ctx context.Context, base, issuer string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(base+"/ui/"))
	waitJS(t, ctx, "the sign-in form", `!document.getElementById('login').hidden`)
	if evalBool(t, ctx, `!document.getElementById('login-error').hidden`) {
		t.Errorf("the first visit shows an error: %s", evalString(t, ctx, `document.getElementById('login-error').textContent`))
	}
	run(t, ctx, chromedp.Click(chromedp.ID("sso")))
	waitJS(t, ctx, "the provider's login page", `location.href.startsWith(`+quote(issuer+"/login/")+`) && !!document.getElementById('username')`)
	run(t, ctx,
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), apitest.OPPassword),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	waitJS(t, ctx, "the list after login", `location.href.startsWith(`+quote(base+"/ui/")+`) && document.querySelectorAll('#apps tbody tr').length === 1`)
}

// The console logs in through a real OIDC provider (the zitadel example OP,
// in this process): the sign-in form's link, the provider's own login page,
// the callback, and back to the list, which shows only what the user's
// group is bound to.
func TestBrowser_singleSignOnShowsTheApplicationsOfTheUsersGroupAndHidesTheSession(t *testing.T) {
	ctx, base, issuer := ssoConsole(t)
	ssoSignIn(t, ctx, base, issuer)
	if rows := rowTexts(t, ctx); !strings.HasPrefix(rows[0], "shop") {
		t.Errorf("rows = %q, want only shop", rows)
	}
	if c := evalString(t, ctx, `document.cookie`); strings.Contains(c, "flotilla_session") {
		t.Errorf("the session cookie is readable by the page: %q", c)
	}
	screenshot(t, ctx, "sso-list")
}

// Signed in through single sign-on, the header shows the user and a Sign
// out button instead of "Forget token"; the button ends the session at the
// controller, so the old cookie opens nothing, and shows the sign-in form.
func TestBrowser_signOutEndsTheSingleSignOnSessionAndReturnsToTheSignInForm(t *testing.T) {
	ctx, base, issuer := ssoConsole(t)
	ssoSignIn(t, ctx, base, issuer)
	waitJS(t, ctx, "the Sign out button", `!document.getElementById('sso-signout').hidden`)
	if evalBool(t, ctx, `!document.getElementById('signout').hidden`) {
		t.Error("Forget token is shown for a single sign-on session")
	}
	if u := evalString(t, ctx, `document.getElementById('sso-user').textContent`); u != "alice@example.com" {
		t.Errorf("the header names %q, want alice@example.com", u)
	}
	var sid string
	got, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Cookies {
		if c.Name == "flotilla_session" {
			sid = c.Value
		}
	}
	if sid == "" {
		t.Fatal("no session cookie after sign-in")
	}
	screenshot(t, ctx, "sso-signed-in-header")
	run(t, ctx, chromedp.Click(chromedp.ID("sso-signout")))
	waitJS(t, ctx, "the sign-in form after sign-out", `!document.getElementById('login').hidden && document.getElementById('list').hidden && document.getElementById('sso-signout').hidden`)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v1/applications", nil)
	req.AddCookie(&http.Cookie{Name: "flotilla_session", Value: sid})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session after sign-out: %d, want 401", resp.StatusCode)
	}
	// A reload stays signed out: the browser dropped the cookie too.
	run(t, ctx, chromedp.Navigate(base+"/ui/"))
	waitJS(t, ctx, "the sign-in form after a reload", `!document.getElementById('login').hidden`)
}
