package api_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api/apitest"
)

// loginReturning logs in with ?return=ret and gives the Location the
// callback answers with, without following it.
func (e *ssoEnv) loginReturning(t *testing.T, user, ret string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			// The provider has a path of that name too.
			if last := via[len(via)-1].URL; last.Path == "/auth/callback" && "http://"+last.Host == e.api {
				return http.ErrUseLastResponse
			}
			return nil
		}}
	resp, err := c.Get(e.api + "/auth/login?return=" + url.QueryEscape(ret))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("login did not reach the provider's form: %s (%d)", resp.Request.URL, resp.StatusCode)
	}
	resp, err = c.PostForm(e.op+"/login/username", url.Values{"username": {user}, "password": {apitest.OPPassword}, "id": {id}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if "http://"+resp.Request.URL.Host != e.api || resp.Request.URL.Path != "/auth/callback" || resp.StatusCode != http.StatusFound {
		t.Fatalf("the login did not end at the callback's redirect: %s %d: %s", resp.Request.URL, resp.StatusCode, b)
	}
	return resp.Header.Get("Location")
}

// After a login the browser goes back only to a path of this site, however
// the return address is spelt.
func TestSSO_theReturnAfterLoginStaysOnThisSite(t *testing.T) {
	e := newSSOEnv(t)
	for _, ret := range []string{"/\t/evil.example/phish", "/\\evil.example", "//evil.example/", "https://evil.example/ui/", "/%2F/evil.example"} {
		if got := e.loginReturning(t, "alice", ret); got != "/ui/" {
			t.Errorf("return=%q: the callback sends the browser to %q, want /ui/", ret, got)
		}
	}
	if got := e.loginReturning(t, "alice", "/ui/#/app/shop"); !strings.HasPrefix(got, "/ui/#/app/shop") {
		t.Errorf("a path of this site: the callback sends the browser to %q", got)
	}
}
