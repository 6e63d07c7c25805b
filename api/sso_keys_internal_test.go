package api

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
)

// keysProvider is an OIDC provider that serves discovery and a key set it
// can rotate, counting the reads of the key set.
type keysProvider struct {
	srv       *httptest.Server
	jwksGets  atomic.Int32
	discovery atomic.Int32
	mu        sync.Mutex
	keys      map[string]*rsa.PrivateKey // kid → key, as published
}

func newKeysProvider(t *testing.T) *keysProvider {
	t.Helper()
	p := &keysProvider{keys: map[string]*rsa.PrivateKey{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			p.discovery.Add(1)
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/auth",
				"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/keys",
				"id_token_signing_alg_values_supported": []string{"RS256", "HS256", "none"}})
		case "/keys":
			p.jwksGets.Add(1)
			p.mu.Lock()
			var keys []map[string]string
			for kid, k := range p.keys {
				keys = append(keys, map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
					"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
			}
			p.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *keysProvider) publish(kid string, k *rsa.PrivateKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = k
}

// idToken signs an ID token for the CLI's client with k under kid.
func idToken(t *testing.T, issuer, kid string, k *rsa.PrivateKey, now time.Time) string {
	t.Helper()
	head := map[string]string{"alg": "RS256", "typ": "JWT"}
	if kid != "" {
		head["kid"] = kid
	}
	h, _ := json.Marshal(head)
	c, _ := json.Marshal(map[string]any{"iss": issuer, "aud": "cli", "sub": "u1", "email": "u@example.com",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	signed := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + b64(sig)
}

// A token signed by a key the controller does not know makes it read the
// provider's key set at most once per keysFetchInterval: in between, such
// tokens are refused without any request to the provider, while tokens
// signed by a known key still verify, and a key the provider rotated in is
// picked up once the interval has passed.
func TestSSO_theKeySetIsReadAtMostOncePerInterval(t *testing.T) {
	op := newKeysProvider(t)
	k1, evil := newRSAKey(t), newRSAKey(t)
	op.publish("k1", k1)
	sso, err := NewSSO(SSOConfig{Issuer: op.srv.URL, ClientID: "console", CLIClientID: "cli", RedirectURL: "http://127.0.0.1:1/auth/callback"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var clock sync.Mutex
	sso.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	ctx := t.Context()

	if p, err := sso.cliPrincipal(ctx, idToken(t, op.srv.URL, "k1", k1, sso.now())); err != nil || p.Name != "sso:u@example.com" {
		t.Fatalf("a token signed by the provider's key: %+v %v", p, err)
	}
	if n := op.jwksGets.Load(); n != 1 {
		t.Fatalf("%d reads of the key set for the first token, want 1", n)
	}

	// The attacks, through the API as authentication meets a bearer
	// token: unknown kids, no kid, the known kid with another key's
	// signature.
	srv := &server{opts: Options{SSO: sso, Tokens: Tokens{{Name: "admin", Role: access.Admin, Secret: "admin-secret-0123456789"}}},
		log: slog.New(slog.DiscardHandler)}
	for i := range 60 {
		var tok string
		switch i % 3 {
		case 0:
			tok = idToken(t, op.srv.URL, "evil-"+string(rune('a'+i%26)), evil, sso.now())
		case 1:
			tok = idToken(t, op.srv.URL, "", evil, sso.now())
		case 2:
			tok = idToken(t, op.srv.URL, "k1", evil, sso.now())
		}
		if _, err := srv.principal(ctx, tok); !errors.Is(err, errLoginInvalid) {
			t.Fatalf("forged token %d: %v, want refused", i, err)
		}
	}
	if n := op.jwksGets.Load(); n != 1 {
		t.Fatalf("forged tokens made %d more reads of the key set, want none", n-1)
	}
	if _, err := sso.cliPrincipal(ctx, idToken(t, op.srv.URL, "k1", k1, sso.now())); err != nil {
		t.Fatalf("a good token after the forged ones: %v", err)
	}

	// The provider rotates: a token under the new key verifies once the
	// interval has passed since the last read, with one read.
	k2 := newRSAKey(t)
	op.publish("k2", k2)
	advance(keysFetchInterval + time.Second)
	if _, err := sso.cliPrincipal(ctx, idToken(t, op.srv.URL, "k2", k2, sso.now())); err != nil {
		t.Fatalf("a token under the rotated key: %v", err)
	}
	if _, err := sso.cliPrincipal(ctx, idToken(t, op.srv.URL, "evil-x", evil, sso.now())); err == nil {
		t.Fatal("a token under an unknown key verified")
	}
	if n := op.jwksGets.Load(); n != 2 {
		t.Errorf("%d reads of the key set in all, want 2", n)
	}
	if n := op.discovery.Load(); n != 1 {
		t.Errorf("%d discoveries, want 1", n)
	}
}

// A provider that cannot be discovered is not asked again for every
// request, only once per interval.
func TestSSO_aFailedDiscoveryIsRetriedOncePerInterval(t *testing.T) {
	var hits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	sso, err := NewSSO(SSOConfig{Issuer: down.URL, ClientID: "console", CLIClientID: "cli", RedirectURL: "http://127.0.0.1:1/auth/callback"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sso.now = func() time.Time { return now }
	k := newRSAKey(t)
	for range 20 {
		if _, err := sso.cliPrincipal(t.Context(), idToken(t, down.URL, "k1", k, now)); err == nil {
			t.Fatal("a token verified without a provider")
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d discovery requests, want 1", n)
	}
	now = now.Add(keysFetchInterval + time.Second)
	_, _ = sso.cliPrincipal(t.Context(), idToken(t, down.URL, "k1", k, now))
	if n := hits.Load(); n != 2 {
		t.Fatalf("%d discovery requests after the interval, want 2", n)
	}
}
