package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
)

// The CLI logs in at the provider itself, as a public client of its own
// (the device authorization flow), and presents the provider's ID token as
// its bearer token. The API verifies that token on every request against
// the provider's keys (issuer, audience = the CLI's client id, expiry) and
// reads the user's groups from it, exactly as a console login does. Nothing
// is kept in the controller, so a restart or the other controller of an HA
// pair accepts the same login; the token's own expiry bounds it, and the
// CLI renews it with its refresh token. flotilla logout revokes the refresh
// token at the provider and tells the controller, which refuses that ID
// token from then on, until it would have expired anyway.

// CLILogin is the answer of GET /auth/cli: what `flotilla login` needs to
// log in at the provider. None of it is secret.
type CLILogin struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"clientID"`
	Scopes   []string `json:"scopes"`
}

func (s *SSO) cliEnabled() bool { return s != nil && s.cfg.CLIClientID != "" }

// cliScopes are the console's scopes with offline_access, so that the
// provider hands the CLI a refresh token.
func (s *SSO) cliScopes() []string {
	sc := slices.Clone(s.cfg.Scopes)
	if !slices.Contains(sc, oidc.ScopeOfflineAccess) {
		sc = append(sc, oidc.ScopeOfflineAccess)
	}
	return sc
}

func (s *server) cliLogin(w http.ResponseWriter, _ *http.Request) error {
	sso := s.opts.SSO
	if !sso.cliEnabled() {
		return errorf(http.StatusNotFound, CodeNotFound, "this controller offers no CLI login; start it with --oidc-cli-client-id")
	}
	writeJSON(w, http.StatusOK, CLILogin{Issuer: sso.cfg.Issuer, ClientID: sso.cfg.CLIClientID, Scopes: sso.cliScopes()})
	return nil
}

// looksLikeJWT tells a provider's ID token from one of the controller's
// own tokens without parsing: three dot-separated parts, the first a JOSE
// header ("eyJ" is base64 of `{"`).
func looksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && strings.HasPrefix(tok, "eyJ")
}

// Errors of a CLI login token, each with what to do about it.
var (
	errLoginExpired = errors.New("the login has expired; run `flotilla login` again")
	errLoginEnded   = errors.New("this login was ended by `flotilla logout`; run `flotilla login` again")
	errLoginInvalid = errors.New("the login token did not verify; run `flotilla login` again")
)

// cliPrincipal verifies tok as an ID token issued to the CLI's client and
// returns its user.
func (s *SSO) cliPrincipal(ctx context.Context, tok string) (Principal, error) {
	idt, err := s.verifyIDToken(ctx, s.cfg.CLIClientID, tok)
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return Principal{}, errLoginExpired
	case err != nil:
		return Principal{}, fmt.Errorf("%w: %v", errLoginInvalid, err)
	}
	if s.isRevoked(tok) {
		return Principal{}, errLoginEnded
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Principal{}, fmt.Errorf("%w: its claims: %v", errLoginInvalid, err)
	}
	sess := session{subject: idt.Subject, groups: groupsOf(claims[s.cfg.GroupsClaim])}
	sess.email, _ = claims["email"].(string)
	return Principal{Name: sess.name(), Role: s.globalRole(sess.groups), Groups: sess.groups, SSO: true}, nil
}

// revoke refuses tok from now until it expires. Only a digest is kept.
func (s *SSO) revoke(ctx context.Context, tok string) bool {
	idt, err := s.verifyIDToken(ctx, s.cfg.CLIClientID, tok)
	if err != nil {
		return false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.revoked {
		if now.After(exp) {
			delete(s.revoked, k)
		}
	}
	s.revoked[sha256.Sum256([]byte(tok))] = idt.Expiry
	return true
}

func (s *SSO) isRevoked(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.revoked[sha256.Sum256([]byte(tok))]
	return ok
}
