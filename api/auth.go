package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/flotilla-gitops/flotilla/access"
)

// Token is one bearer token. Its String and log rendering never show Secret.
type Token struct {
	// Name identifies the token in logs and release records ("admin").
	Name string
	// Role is the token's global role (access.Admin for the admin token,
	// access.Viewer for the read token); the roles are access's, so that
	// a global role and a project binding mean the same words.
	Role   access.Role
	Secret string
}

func (t Token) String() string { return fmt.Sprintf("%s (%s)", t.Name, t.Role) }

// Tokens are the bearer tokens the API accepts.
type Tokens []Token

// Has reports whether some token has role r.
func (ts Tokens) Has(r access.Role) bool {
	for _, t := range ts {
		if t.Role == r && t.Secret != "" {
			return true
		}
	}
	return false
}

// match returns the token whose secret equals presented. Every token is
// compared, each in constant time over a fixed-length digest, so neither the
// position of a match nor the length of a secret shows in the timing.
func (ts Tokens) match(presented string) (Token, bool) {
	p := sha256.Sum256([]byte(presented))
	var found Token
	ok := 0
	for _, t := range ts {
		if t.Secret == "" {
			continue
		}
		s := sha256.Sum256([]byte(t.Secret))
		if subtle.ConstantTimeCompare(p[:], s[:]) == 1 {
			found, ok = t, 1
		}
	}
	return found, ok == 1
}

// Environment variables TokensFromEnv reads. A *_FILE variable names a file
// holding the token (as mounted Docker secrets are); the plain one holds the
// token itself. Tokens are never taken from argv, where ps shows them.
const (
	EnvAdminToken     = "FLOTILLA_ADMIN_TOKEN"
	EnvAdminTokenFile = "FLOTILLA_ADMIN_TOKEN_FILE"
	EnvReadToken      = "FLOTILLA_READ_TOKEN"
	EnvReadTokenFile  = "FLOTILLA_READ_TOKEN_FILE"
)

// TokensFromEnv loads the admin and read-only tokens from the environment.
// Either may be absent; CheckListen decides whether that is acceptable.
func TokensFromEnv() (Tokens, error) {
	return tokensFrom(os.Getenv, os.ReadFile)
}

func tokensFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (Tokens, error) {
	var ts Tokens
	for _, spec := range []struct {
		name        string
		role        access.Role
		value, file string
	}{
		{"admin", access.Admin, EnvAdminToken, EnvAdminTokenFile},
		{"read", access.Viewer, EnvReadToken, EnvReadTokenFile},
	} {
		secret, err := tokenFrom(getenv, readFile, spec.value, spec.file)
		if err != nil {
			return nil, err
		}
		if secret != "" {
			ts = append(ts, Token{Name: spec.name, Role: spec.role, Secret: secret})
		}
	}
	if len(ts) == 2 && ts[0].Secret == ts[1].Secret {
		return nil, errors.New("the admin and read tokens are the same; a read token must not grant writes")
	}
	return ts, nil
}

func tokenFrom(getenv func(string) string, readFile func(string) ([]byte, error), valueVar, fileVar string) (string, error) {
	value, file := getenv(valueVar), getenv(fileVar)
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("both %s and %s are set; set one", valueVar, fileVar)
	case file != "":
		b, err := readFile(file)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", fileVar, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s names an empty file (%s)", fileVar, file)
		}
		return s, nil
	}
	return strings.TrimSpace(value), nil
}

// CheckListen decides whether the API may serve on addr with tokens. Without
// an admin token it refuses, unless allowNoAuth is set and addr is loopback
// only (127.0.0.0/8, ::1 or localhost): an unauthenticated API that can
// deploy anything must not be reachable from another machine.
func CheckListen(addr string, tokens Tokens, allowNoAuth bool) error {
	if tokens.Has(access.Admin) {
		return nil
	}
	if !allowNoAuth {
		return fmt.Errorf("no admin token: set %s or %s (to run without authentication on a loopback address, say so explicitly)", EnvAdminTokenFile, EnvAdminToken)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("refusing to serve without authentication on %q: it is not loopback only; listen on 127.0.0.1 or set %s", addr, EnvAdminTokenFile)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Principal is who made a request. Role is its global role, empty for a
// token of the tokens file.
type Principal struct {
	Name string
	Role access.Role
	// Groups and SSO describe a user who logged in through single
	// sign-on: project bindings reach them by group, never by name.
	Groups []string
	SSO    bool
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// anonymous is the principal of every request when authentication is off.
var anonymous = Principal{Name: "anonymous", Role: access.Admin}

// bearer returns the token of an "Authorization: Bearer …" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authenticate resolves the request's principal: a global token (admin or
// read) or, failing that, a token of the tokens file, which has roles only
// through project bindings. What the principal may do is decided per route
// (authorize), where the application the route names is known.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.open(r) {
			// Logout is open, but its audit entry names the user.
			if p, _, ok := s.opts.SSO.principal(r); ok {
				r = r.WithContext(withPrincipal(r.Context(), p))
			} else if tok, ok := bearer(r); ok {
				if p, err := s.principal(r.Context(), tok); err == nil {
					r = r.WithContext(withPrincipal(r.Context(), p))
				}
			}
			next.ServeHTTP(w, r)
			return
		}
		p := anonymous
		if !s.opts.NoAuth {
			tok, ok := bearer(r)
			switch {
			case ok:
				var err error
				if p, err = s.principal(r.Context(), tok); err != nil {
					s.writeError(w, r, errorf(http.StatusUnauthorized, CodeUnauthorized, "%v", err))
					return
				}
			case s.opts.SSO != nil:
				var present bool
				if p, present, ok = s.opts.SSO.principal(r); !ok {
					msg := "missing bearer token or session; log in at /auth/login"
					if present {
						msg = "the session has ended or is not valid; log in again at /auth/login"
					}
					s.writeError(w, r, errorf(http.StatusUnauthorized, CodeUnauthorized, "%s", msg))
					return
				}
				if isWrite(r) && s.opts.SSO.crossSite(r) {
					s.writeError(w, r, errorf(http.StatusForbidden, CodeForbidden, "a write with the session cookie must come from the console's own origin"))
					return
				}
			default:
				s.writeError(w, r, errorf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token"))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// errInvalidToken refuses a bearer token that is none of the accepted ones.
var errInvalidToken = errors.New("invalid bearer token")

// principal finds the holder of tok. Both token sets are always compared,
// so the timing does not tell a global token from a tokens-file one; a
// token matching neither may be a CLI login (an ID token of the provider).
func (s *server) principal(ctx context.Context, tok string) (Principal, error) {
	t, global := s.opts.Tokens.match(tok)
	name, named := s.opts.TokenFile.Match(tok)
	switch {
	case global:
		return Principal{Name: t.Name, Role: t.Role}, nil
	case named:
		return Principal{Name: name}, nil
	case s.opts.SSO.cliEnabled() && looksLikeJWT(tok):
		p, err := s.opts.SSO.cliPrincipal(ctx, tok)
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, errLoginExpired), errors.Is(err, errLoginEnded):
			return Principal{}, err
		}
		// Why it did not verify (a signature, an audience, the provider
		// out of reach) is for the log; the caller learns only what to do.
		s.log.Info("a CLI login token was refused", "error", err)
		return Principal{}, errLoginInvalid
	}
	return Principal{}, errInvalidToken
}

// identity is p as the access package sees it: the admin token is a global
// admin, the read token a global viewer, a tokens-file token neither.
func (p Principal) identity() access.Identity {
	id := access.Identity{Name: p.Name}
	if p.SSO {
		id = access.Identity{Groups: p.Groups}
	}
	id.Global = p.Role
	return id
}

// open reports whether a route is served without a token.
func (s *server) open(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz":
		return true
	case "/metrics":
		return s.opts.PublicMetrics
	}
	if s.opts.SSO != nil && isSSOPath(r.URL.Path) {
		return true
	}
	return false
}
