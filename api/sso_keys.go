package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// keysFetchInterval is the least time between two reads of the provider's
// key set (its jwks_uri), and between two attempts to discover a provider
// that could not be reached. A token signed with a key this controller
// does not know makes the key set be read again, since the provider may
// have rotated its keys; anyone can send such a token (the CLI's client id
// is public at /auth/cli), so without this bound every such request would
// become a request to the provider.
const keysFetchInterval = 30 * time.Second

// errKeysFetchedRecently refuses a read of the key set within
// keysFetchInterval of the last one; the token is then refused as not
// verified, without any traffic to the provider.
var errKeysFetchedRecently = errors.New("the provider's keys were read less than 30s ago")

// signingAlgs are the ID token signature algorithms accepted when the
// provider names them in its discovery document (go-oidc's own list).
var signingAlgs = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// keySet is the provider's key set as this controller reads it: one per
// SSO, shared by the console's callback and CLI logins, read through a
// client that allows one GET of jwksURL per keysFetchInterval.
type keySet struct {
	keys *oidc.RemoteKeySet
	algs []string
}

// newKeySet reads jwks_uri and the signing algorithms from p's discovery
// document.
func (s *SSO) newKeySet(p *oidc.Provider) (*keySet, error) {
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return nil, fmt.Errorf("the discovery document of %s names no jwks_uri", s.cfg.Issuer)
	}
	var algs []string
	for _, a := range meta.Algs {
		if slices.Contains(signingAlgs, a) {
			algs = append(algs, a)
		}
	}
	// The key set requests the URL as parsed, which is what the limiter
	// compares against.
	u, err := url.Parse(meta.JWKSURL)
	if err != nil {
		return nil, fmt.Errorf("the jwks_uri of %s: %w", s.cfg.Issuer, err)
	}
	client := *s.cfg.HTTPClient
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	client.Transport = &keysLimiter{next: next, url: u.String(), now: func() time.Time { return s.now() }}
	ctx := oidc.ClientContext(context.Background(), &client)
	return &keySet{keys: oidc.NewRemoteKeySet(ctx, meta.JWKSURL), algs: algs}, nil
}

// verifyIDToken checks raw as an ID token of the provider issued to
// clientID: its signature by a key of the provider's key set, its issuer,
// audience and expiry.
func (s *SSO) verifyIDToken(ctx context.Context, clientID, raw string) (*oidc.IDToken, error) {
	if _, _, err := s.oauth(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	ks := s.keys
	s.mu.Unlock()
	v := oidc.NewVerifier(s.cfg.Issuer, ks.keys, &oidc.Config{ClientID: clientID, SupportedSigningAlgs: ks.algs, Now: s.now})
	return v.Verify(ctx, raw)
}

// keysLimiter lets one GET of url through per keysFetchInterval and
// refuses the others without sending them. Anything else (a redirect the
// key set's URL answers with) goes through.
type keysLimiter struct {
	next http.RoundTripper
	url  string
	now  func() time.Time

	mu   sync.Mutex
	last time.Time
}

func (l *keysLimiter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.String() == l.url {
		l.mu.Lock()
		now := l.now()
		if !l.last.IsZero() && now.Sub(l.last) < keysFetchInterval {
			l.mu.Unlock()
			return nil, errKeysFetchedRecently
		}
		l.last = now
		l.mu.Unlock()
	}
	return l.next.RoundTrip(req)
}
