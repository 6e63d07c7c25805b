package web_test

import (
	"log/slog"
	"net"
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

// The console logs in through a real OIDC provider (the zitadel example OP,
// in this process): the sign-in form's link, the provider's own login page,
// the callback, and back to the list, which shows only what the user's
// group is bound to.
func TestBrowser_singleSignOnShowsTheApplicationsOfTheUsersGroupAndHidesTheSession(t *testing.T) {
	ctx := newTab(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	issuer := apitest.StartOP(t, base+"/auth/callback", map[string][]string{"alice": {"shop-devs"}})
	sso, err := api.NewSSO(api.SSOConfig{Issuer: issuer, ClientID: apitest.OPClientID,
		ClientSecret: apitest.OPClientSecret, RedirectURL: base + "/auth/callback"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Options{
		Controller: apitest.NewController(sample()...), Events: events.NewBroker(events.BrokerOptions{}),
		UI: web.Handler(), Logger: slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{{Name: "admin", Role: api.RoleAdmin, Secret: adminToken}},
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
	if rows := rowTexts(t, ctx); !strings.HasPrefix(rows[0], "shop") {
		t.Errorf("rows = %q, want only shop", rows)
	}
	if c := evalString(t, ctx, `document.cookie`); strings.Contains(c, "flotilla_session") {
		t.Errorf("the session cookie is readable by the page: %q", c)
	}
	screenshot(t, ctx, "sso-list")
}
