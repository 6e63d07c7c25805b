package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/flotilla-gitops/flotilla/access"
)

// SSOConfig configures single sign-on for the console: the OpenID Connect
// authorization code flow with PKCE against one provider.
type SSOConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// on the first login, so a provider that is down at start does not
	// keep the controller from starting.
	Issuer string
	// ClientID and ClientSecret are the controller's client at the
	// provider. The secret may be empty for a public client.
	ClientID     string
	ClientSecret string
	// RedirectURL is this controller's /auth/callback as the browser
	// reaches it, registered at the provider. An https URL makes every
	// cookie Secure.
	RedirectURL string
	// GroupsClaim names the ID token claim that lists the user's groups.
	// Default "groups".
	GroupsClaim string
	// AdminGroups and ViewerGroups grant the global admin and viewer role
	// (the admin and read tokens' roles); project bindings' groups grant
	// roles on a project's applications.
	AdminGroups  []string
	ViewerGroups []string
	// Scopes are requested at login. Default openid, profile, email; some
	// providers (Dex) return groups only for a "groups" scope.
	Scopes []string
	// CLIClientID, when set, is the public client `flotilla login` uses
	// at the provider (device authorization flow); the API then accepts
	// ID tokens issued to it as bearer tokens (see sso_cli.go).
	CLIClientID string
	// SessionTTL is how long a session lasts after login. Default 8h.
	SessionTTL time.Duration
	// HTTPClient reaches the provider. Default http.DefaultClient.
	HTTPClient *http.Client
}

// DefaultSessionTTL is how long a console session lasts by default.
const DefaultSessionTTL = 8 * time.Hour

// loginTTL bounds the time between /auth/login and the callback.
const loginTTL = 10 * time.Minute

// SSO holds the provider, the signing key of the login cookie and the
// sessions. Sessions live in this process only: a restart logs every user
// out, and logout or expiry removes a session for every later request at
// once, which a self-contained signed session could not promise.
type SSO struct {
	cfg    SSOConfig
	key    []byte
	secure bool
	origin string
	now    func() time.Time

	mu       sync.Mutex
	provider *oidc.Provider
	keys     *keySet
	// discoveryFailed is when the provider last could not be discovered;
	// no new attempt is made within keysFetchInterval of it.
	discoveryFailed time.Time
	discoveryErr    error
	sessions        map[string]session
	// revoked holds digests of CLI login tokens ended by logout, until
	// each would have expired.
	revoked map[[32]byte]time.Time
}

// session is one logged-in user. Only what authorization needs is kept;
// the provider's tokens are dropped after the callback.
type session struct {
	subject string
	email   string
	groups  []string
	role    access.Role
	expires time.Time
}

// NewSSO checks cfg and returns single sign-on for Options.SSO.
func NewSSO(cfg SSOConfig) (*SSO, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("single sign-on needs an issuer, a client id and a redirect URL")
	}
	ru, err := url.Parse(cfg.RedirectURL)
	if err != nil || ru.Host == "" || (ru.Scheme != "https" && ru.Scheme != "http") {
		return nil, fmt.Errorf("redirect URL %q: want an absolute http(s) URL ending in /auth/callback", cfg.RedirectURL)
	}
	if ru.Path != "/auth/callback" {
		return nil, fmt.Errorf("redirect URL %q: its path must be /auth/callback, where the controller serves the callback", cfg.RedirectURL)
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	if !slices.Contains(cfg.Scopes, oidc.ScopeOpenID) {
		cfg.Scopes = append([]string{oidc.ScopeOpenID}, cfg.Scopes...)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("single sign-on key: %w", err)
	}
	return &SSO{cfg: cfg, key: key, secure: ru.Scheme == "https", origin: ru.Scheme + "://" + ru.Host,
		now: time.Now, sessions: map[string]session{}, revoked: map[[32]byte]time.Time{}}, nil
}

// Cookie names. With https the session cookie takes the __Host- prefix, so
// a sibling subdomain cannot plant one.
const (
	sessionCookie = "flotilla_session"
	loginCookie   = "flotilla_login"
)

func (s *SSO) cookieName(base string) string {
	if s.secure {
		return "__Host-" + base
	}
	return base
}

func (s *SSO) setCookie(w http.ResponseWriter, base, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(base), Value: value, Path: "/", MaxAge: maxAge,
		Secure: s.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// oauth discovers the provider once and returns the client configuration.
// A provider that could not be discovered is tried again only after
// keysFetchInterval, so that requests cannot turn into a stream of
// requests to it.
func (s *SSO) oauth(ctx context.Context) (*oidc.Provider, *oauth2.Config, error) {
	s.mu.Lock()
	p := s.provider
	failed, lastErr := s.discoveryFailed, s.discoveryErr
	s.mu.Unlock()
	if p == nil {
		if !failed.IsZero() && s.now().Sub(failed) < keysFetchInterval {
			return nil, nil, lastErr
		}
		np, err := oidc.NewProvider(oidc.ClientContext(ctx, s.cfg.HTTPClient), s.cfg.Issuer)
		var ks *keySet
		if err == nil {
			ks, err = s.newKeySet(np)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.discoveryFailed = s.now()
			s.discoveryErr = fmt.Errorf("discover the OIDC provider %s: %w", s.cfg.Issuer, err)
			return nil, nil, s.discoveryErr
		}
		if s.provider == nil {
			s.provider, s.keys = np, ks
		}
		p = s.provider
	}
	return p, &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.cfg.RedirectURL, Scopes: s.cfg.Scopes}, nil
}

// loginState travels in the signed login cookie from /auth/login to the
// callback. It is signed, not encrypted: the verifier is worthless without
// the code, which only the provider's redirect carries.
type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r"`
	Expires  int64  `json:"e"`
}

func (s *SSO) sign(v loginState) string {
	b, _ := json.Marshal(v)
	p := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(p))
	return p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *SSO) verify(c string) (loginState, bool) {
	p, sig, ok := strings.Cut(c, ".")
	if !ok {
		return loginState{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return loginState{}, false
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(p))
	if !hmac.Equal(got, m.Sum(nil)) {
		return loginState{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	var v loginState
	if err != nil || json.Unmarshal(b, &v) != nil || s.now().Unix() > v.Expires {
		return loginState{}, false
	}
	return v, true
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// safeReturn keeps the post-login redirect on this site: anything but a
// path of this site is replaced by the console's home. Browsers read
// Location more loosely than url.Parse does (they drop tabs and newlines,
// take a backslash for a slash, and "//host" is another site), so both the
// value as sent and its decoded path must start with exactly one slash and
// hold no control character and no backslash.
func safeReturn(p string) string {
	const home = "/ui/"
	if !sitePath(p) {
		return home
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !sitePath(u.Path) {
		return home
	}
	return p
}

// sitePath reports whether p starts with a single slash and holds no
// control character or backslash.
func sitePath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	for _, r := range p {
		if r == '\\' || unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// ssoLogin starts the flow: a fresh state, nonce and PKCE verifier in the
// signed login cookie, and a redirect to the provider.
func (s *server) ssoLogin(w http.ResponseWriter, r *http.Request) error {
	sso := s.opts.SSO
	_, cfg, err := sso.oauth(r.Context())
	if err != nil {
		return errorf(http.StatusBadGateway, CodeUnavailable, "single sign-on is unavailable: %v", err)
	}
	st := loginState{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		Return: safeReturn(r.URL.Query().Get("return")), Expires: sso.now().Add(loginTTL).Unix()}
	sso.setCookie(w, loginCookie, sso.sign(st), int(loginTTL.Seconds()))
	http.Redirect(w, r, cfg.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), http.StatusFound)
	return nil
}

// ssoCallback ends the flow: it checks state against the login cookie,
// exchanges the code with the verifier, verifies the ID token and its nonce,
// and opens a session with the user's groups and global role.
func (s *server) ssoCallback(w http.ResponseWriter, r *http.Request) error {
	sso := s.opts.SSO
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the identity provider refused the login: %s", e)
	}
	c, err := r.Cookie(sso.cookieName(loginCookie))
	if err != nil {
		return errorf(http.StatusBadRequest, CodeBadRequest, "no login in progress (or it took longer than %s); start at /auth/login", loginTTL)
	}
	st, ok := sso.verify(c.Value)
	if !ok || q.Get("state") == "" || !hmac.Equal([]byte(q.Get("state")), []byte(st.State)) {
		return errorf(http.StatusBadRequest, CodeBadRequest, "the login's state does not match; start again at /auth/login")
	}
	sso.setCookie(w, loginCookie, "", -1)
	p, cfg, err := sso.oauth(r.Context())
	if err != nil {
		return errorf(http.StatusBadGateway, CodeUnavailable, "single sign-on is unavailable: %v", err)
	}
	ctx := oidc.ClientContext(r.Context(), sso.cfg.HTTPClient)
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		s.log.Warn("single sign-on code exchange failed", "error", err)
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the identity provider did not accept the login code")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the identity provider returned no ID token")
	}
	idt, err := sso.verifyIDToken(ctx, sso.cfg.ClientID, raw)
	if err != nil {
		s.log.Warn("single sign-on ID token refused", "error", err)
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the ID token did not verify")
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(st.Nonce)) {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the ID token's nonce does not match this login")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the ID token's claims: %v", err)
	}
	sess := session{subject: idt.Subject, groups: groupsOf(claims[sso.cfg.GroupsClaim]), expires: sso.now().Add(sso.cfg.SessionTTL)}
	sess.email, _ = claims["email"].(string)
	if sess.email == "" {
		// Many providers put the email only in the userinfo answer.
		if ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			sess.email = ui.Email
		}
	}
	sess.role = sso.globalRole(sess.groups)
	id := sso.open(sess)
	sso.setCookie(w, sessionCookie, id, int(sso.cfg.SessionTTL.Seconds()))
	s.log.Info("single sign-on login", "user", sess.name(), "groups", sess.groups, "role", string(sess.role))
	http.Redirect(w, r, st.Return, http.StatusFound)
	return nil
}

// ssoLogout ends the session at once, for every later request; a CLI
// login token presented as the bearer is refused from then on.
func (s *server) ssoLogout(w http.ResponseWriter, r *http.Request) error {
	sso := s.opts.SSO
	if tok, ok := bearer(r); ok && sso.cliEnabled() && looksLikeJWT(tok) {
		sso.revoke(r.Context(), tok)
	}
	if c, err := r.Cookie(sso.cookieName(sessionCookie)); err == nil {
		sso.mu.Lock()
		delete(sso.sessions, c.Value)
		sso.mu.Unlock()
	}
	sso.setCookie(w, sessionCookie, "", -1)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// SessionInfo is the answer of GET /auth/session: who the session cookie
// belongs to, so the console can offer to sign out. User is empty without
// a session.
type SessionInfo struct {
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// ssoSession says whose session the request carries; no session is not an
// error, just an empty answer.
func (s *server) ssoSession(w http.ResponseWriter, r *http.Request) error {
	var info SessionInfo
	if p, _, ok := s.opts.SSO.principal(r); ok {
		info = SessionInfo{User: p.Name, Groups: p.Groups}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, info)
	return nil
}

// groupsOf reads a groups claim: a list of strings, or one string.
func groupsOf(v any) []string {
	switch g := v.(type) {
	case string:
		return []string{g}
	case []any:
		var out []string
		for _, e := range g {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func (s *SSO) globalRole(groups []string) access.Role {
	for _, g := range groups {
		if slices.Contains(s.cfg.AdminGroups, g) {
			return access.Admin
		}
	}
	for _, g := range groups {
		if slices.Contains(s.cfg.ViewerGroups, g) {
			return access.Viewer
		}
	}
	return ""
}

// name is how the user appears in audit entries and logs.
func (ss session) name() string {
	if ss.email != "" {
		return "sso:" + ss.email
	}
	return "sso:" + ss.subject
}

// open stores sess under a new random id, dropping expired sessions.
func (s *SSO) open(sess session) string {
	id := randomString()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.sessions {
		if now.After(v.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[id] = sess
	return id
}

// principal resolves the session cookie of r. present says whether r
// carried one at all.
func (s *SSO) principal(r *http.Request) (p Principal, present, ok bool) {
	if s == nil {
		return Principal{}, false, false
	}
	c, err := r.Cookie(s.cookieName(sessionCookie))
	if err != nil || c.Value == "" {
		return Principal{}, false, false
	}
	s.mu.Lock()
	sess, found := s.sessions[c.Value]
	if found && s.now().After(sess.expires) {
		delete(s.sessions, c.Value)
		found = false
	}
	s.mu.Unlock()
	if !found {
		return Principal{}, true, false
	}
	return Principal{Name: sess.name(), Role: sess.role, Groups: sess.groups, SSO: true}, true, true
}

// crossSite reports whether a write made with the session cookie comes
// from another site. guardWrites already needs a custom header no other
// origin can send without a preflight this API never grants; this refuses
// such writes earlier and by the browser's own account of the origin.
func (s *SSO) crossSite(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != s.origin {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	return false
}

// isSSOPath reports whether r is one of the routes that log in and out.
func isSSOPath(path string) bool {
	switch path {
	case "/auth/login", "/auth/callback", "/auth/logout", "/auth/cli", "/auth/session":
		return true
	}
	return false
}
