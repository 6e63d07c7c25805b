package api

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestSSO_anExpiredSessionIsRefusedOnItsNextRequest(t *testing.T) {
	sso, err := NewSSO(SSOConfig{Issuer: "https://idp.example.com", ClientID: "f", RedirectURL: "https://ctl.example.com/auth/callback", SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sso.now = func() time.Time { return now }
	id := sso.open(session{subject: "u1", email: "u@example.com", expires: now.Add(time.Hour)})
	r := httptest.NewRequest("GET", "/api/v1/applications", nil)
	// Over https the cookie carries the __Host- prefix.
	r.Header.Set("Cookie", "__Host-flotilla_session="+id)
	if p, _, ok := sso.principal(r); !ok || p.Name != "sso:u@example.com" || !p.SSO {
		t.Fatalf("a live session: %+v %v", p, ok)
	}
	now = now.Add(time.Hour + time.Second)
	if _, present, ok := sso.principal(r); ok || !present {
		t.Fatalf("an expired session: ok=%v present=%v; want refused", ok, present)
	}
	if len(sso.sessions) != 0 {
		t.Errorf("the expired session is still kept: %d", len(sso.sessions))
	}
}

func TestSSO_theLoginCookieIsRefusedWhenChangedOrOld(t *testing.T) {
	sso, err := NewSSO(SSOConfig{Issuer: "https://idp.example.com", ClientID: "f", RedirectURL: "https://ctl.example.com/auth/callback"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sso.now = func() time.Time { return now }
	c := sso.sign(loginState{State: "s", Nonce: "n", Verifier: "v", Return: "/ui/", Expires: now.Add(loginTTL).Unix()})
	if st, ok := sso.verify(c); !ok || st.State != "s" {
		t.Fatalf("a fresh login cookie: %+v %v", st, ok)
	}
	other, _ := NewSSO(SSOConfig{Issuer: "https://idp.example.com", ClientID: "f", RedirectURL: "https://ctl.example.com/auth/callback"})
	if _, ok := other.verify(c); ok {
		t.Error("a cookie signed by another process's key verified")
	}
	if _, ok := sso.verify("x" + c); ok {
		t.Error("a changed cookie verified")
	}
	now = now.Add(loginTTL + time.Second)
	if _, ok := sso.verify(c); ok {
		t.Error("an old login cookie verified")
	}
}

// Every spelling a browser might read as another site, or that decodes to
// one, falls back to the console's home; paths of this site pass as sent.
func TestSafeReturn_keepsTheRedirectOnThisSite(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/#/app/shop":           "/ui/#/app/shop",
		"/api/v1/applications":     "/api/v1/applications",
		"/ui/?app=shop&tab=logs":   "/ui/?app=shop&tab=logs",
		"":                         "/ui/",
		"//evil.example":           "/ui/",
		"///evil.example":          "/ui/",
		"https://evil.example":     "/ui/",
		"HTTPS://evil.example/ui/": "/ui/",
		"javascript:alert(1)":      "/ui/",
		"evil.example/ui/":         "/ui/",
		`/\evil.example`:           "/ui/",
		`\\evil.example`:           "/ui/",
		"/ui/\\..\\..\\evil":       "/ui/",
		"/\t/evil.example/phish":   "/ui/", // the review's example, decoded
		"/%09/evil.example/phish":  "/ui/", // and encoded once more
		"/\n/evil.example":         "/ui/",
		"/\r\n/evil.example":       "/ui/",
		"/%0d%0a/evil.example":     "/ui/",
		"/\x00/evil.example":       "/ui/",
		"/\u0085/evil.example":     "/ui/",
		"/%2F/evil.example":        "/ui/",
		"/%2f%2fevil.example":      "/ui/",
		"/%5Cevil.example":         "/ui/",
		"/%5c%5cevil.example":      "/ui/",
		"%2F%2Fevil.example":       "/ui/",
		"/%":                       "/ui/",
		"/\xff/evil.example":       "/ui/",
		"/ui/\x7f":                 "/ui/",
	} {
		if got := safeReturn(in); got != want {
			t.Errorf("safeReturn(%q) = %q, want %q", in, got, want)
		}
	}
}
