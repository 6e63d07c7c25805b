package secretstore_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// These tests run the real Vault (scripts/vault.sh) in dev mode.

const shopPolicy = `
path "kv/data/shop/*" { capabilities = ["read"] }
path "kv/metadata/shop/*" { capabilities = ["read"] }
path "kv1/shop/*" { capabilities = ["read"] }
`

func store(srv *vaulttest.Server, mount string, version int, auth application.VaultAuth) application.SecretStore {
	return application.SecretStore{
		Name:         "vault",
		Vault:        &application.VaultStore{Address: srv.Addr, Mount: mount, KVVersion: version, Auth: auth},
		PollInterval: application.Duration{Duration: time.Nanosecond}, // every resolution asks the store
	}
}

func shopApp(s application.SecretStore, paths ...string) application.Application {
	return application.Application{Name: "shop", SecretStores: []application.StoreGrant{{Store: s, Paths: paths}}}
}

func resolve(t *testing.T, stores *secretstore.Stores, app application.Application, ref secretstore.Ref) (string, secretstore.Used, error) {
	t.Helper()
	r := stores.For(context.Background(), app)
	v, _, err := r.Resolve("db_password", ref)
	if err != nil {
		return "", secretstore.Used{}, err
	}
	return string(v), r.Used()[0], nil
}

func TestVaultKVv2ReadsVersionsAndRotations(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	srv.Policy("shop", shopPolicy)
	tok, tokFile := srv.Token(t.TempDir(), "shop")
	if v := srv.Write("kv/data/shop/db", true, map[string]any{"password": "v2-pw-1", "user": "shop"}); v != 1 {
		t.Fatalf("version %d", v)
	}
	srv.Write("kv/data/other/db", true, map[string]any{"password": "other-team-pw"})

	st := store(srv, "kv", 2, application.VaultAuth{TokenFile: tokFile})
	stores := secretstore.New()
	ref := secretstore.Ref{Store: "vault", Path: "kv/data/shop/db", Key: "password"}
	v, u1, err := resolve(t, stores, shopApp(st, "kv/data/shop/*"), ref)
	if err != nil || v != "v2-pw-1" || u1.Version != 1 {
		t.Fatalf("read: %q %+v %v", v, u1, err)
	}
	// Unchanged: same value, same version.
	if v, u, err := resolve(t, stores, shopApp(st, "kv/data/shop/*"), ref); err != nil || v != "v2-pw-1" || !u.Same(u1) {
		t.Fatalf("again: %q %+v %v", v, u, err)
	}
	// Rotated in Vault: the new value and version.
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "v2-pw-2"})
	v, u2, err := resolve(t, stores, shopApp(st, "kv/data/shop/*"), ref)
	if err != nil || v != "v2-pw-2" || u2.Version != 2 || u2.Same(u1) || u2.Rotated.IsZero() {
		t.Fatalf("rotated: %q %+v %v", v, u2, err)
	}
	// An edit of another key moves the entry to version 3; the password's
	// tag and recorded version stay, so its services are not rolled.
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "v2-pw-2", "user": "shop-2"})
	if v, u, err := resolve(t, stores, shopApp(st, "kv/data/shop/*"), ref); err != nil || v != "v2-pw-2" || u.Version != 2 || !u.Same(u2) {
		t.Fatalf("another key edited: %q %+v %v", v, u, err)
	}
	// The entry's metadata deleted and written again up to version 3: the
	// same number as the version cached, written at another time; the new
	// value is read.
	if _, err := srv.Client.Logical().DeleteWithContext(context.Background(), "kv/metadata/shop/db"); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"v2-pw-x", "v2-pw-y", "v2-pw-3"} {
		srv.Write("kv/data/shop/db", true, map[string]any{"password": pw})
	}
	if v, u, err := resolve(t, stores, shopApp(st, "kv/data/shop/*"), ref); err != nil || v != "v2-pw-3" || u.Version != 3 || u.Same(u2) {
		t.Fatalf("recreated at the same version: %q %+v %v", v, u, err)
	}
	// A key the entry lacks is named, with no value.
	_, _, err = resolve(t, stores, shopApp(st, "kv/data/shop/*"), secretstore.Ref{Store: "vault", Path: "kv/data/shop/db", Key: "nope"})
	if !errors.Is(err, secretstore.ErrNoValue) || !strings.Contains(err.Error(), `no key "nope"`) || strings.Contains(err.Error(), "v2-pw") {
		t.Fatalf("missing key: %v", err)
	}
	// A path the grant covers but the token's policy does not: Vault
	// refuses, and the error says so.
	_, _, err = resolve(t, stores, shopApp(st, "kv/data/*/db"), secretstore.Ref{Store: "vault", Path: "kv/data/other/db", Key: "password"})
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "other-team-pw") {
		t.Fatalf("denied: %v", err)
	}
	// A revoked token fails with the store and path named; the process's
	// own VAULT_* settings (a root token here) are never used instead.
	srv.Revoke(tok)
	t.Setenv("VAULT_TOKEN", srv.RootToken)
	t.Setenv("VAULT_ADDR", "http://127.0.0.1:1")
	_, _, err = resolve(t, secretstore.New(), shopApp(st, "kv/data/shop/*"), ref)
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), `"kv/data/shop/db"`) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("revoked: %v", err)
	}
	if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "v2-pw") {
		t.Fatalf("the error quotes the token or a value: %v", err)
	}
}

func TestVaultKVv1Reads(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv1", 1)
	srv.Policy("shop", shopPolicy)
	_, tokFile := srv.Token(t.TempDir(), "shop")
	srv.Write("kv1/shop/db", false, map[string]any{"password": "v1-pw-1"})
	st := store(srv, "kv1", 1, application.VaultAuth{TokenFile: tokFile})
	stores := secretstore.New()
	ref := secretstore.Ref{Store: "vault", Path: "kv1/shop/db", Key: "password"}
	v, u1, err := resolve(t, stores, shopApp(st, "kv1/shop/*"), ref)
	if err != nil || v != "v1-pw-1" || u1.Version != 0 {
		t.Fatalf("read: %q %+v %v", v, u1, err)
	}
	srv.Write("kv1/shop/db", false, map[string]any{"password": "v1-pw-2"})
	v, u2, err := resolve(t, stores, shopApp(st, "kv1/shop/*"), ref)
	if err != nil || v != "v1-pw-2" || u2.Same(u1) || u2.Rotated.IsZero() {
		t.Fatalf("rotated: %q %+v %v", v, u2, err)
	}
	// No entry at the path.
	_, _, err = resolve(t, stores, shopApp(st, "kv1/shop/*"), secretstore.Ref{Store: "vault", Path: "kv1/shop/gone", Key: "password"})
	if !errors.Is(err, secretstore.ErrNoValue) {
		t.Fatalf("missing entry: %v", err)
	}
}

func TestVaultAppRoleAndJWTLogins(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	srv.Policy("shop", shopPolicy)
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "login-pw"})
	ctx := context.Background()
	root := srv.Client
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// AppRole.
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, "approle", &vault.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	must(root.Logical().WriteWithContext(ctx, "auth/approle/role/flotilla", map[string]any{"token_policies": "shop", "token_ttl": "1h"}))
	rid, err := root.Logical().ReadWithContext(ctx, "auth/approle/role/flotilla/role-id")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := root.Logical().WriteWithContext(ctx, "auth/approle/role/flotilla/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	appRole := application.VaultAuth{AppRole: &application.VaultAppRole{
		Mount:        "approle",
		RoleIDFile:   write("role-id", rid.Data["role_id"].(string)),
		SecretIDFile: write("secret-id", sid.Data["secret_id"].(string)),
	}}
	ref := secretstore.Ref{Store: "vault", Path: "kv/data/shop/db", Key: "password"}
	if v, _, err := resolve(t, secretstore.New(), shopApp(store(srv, "kv", 2, appRole), "kv/data/shop/*"), ref); err != nil || v != "login-pw" {
		t.Fatalf("approle: %q %v", v, err)
	}
	// A wrong secret id fails the login, quoting neither id.
	bad := *appRole.AppRole
	bad.SecretIDFile = write("bad-secret-id", "00000000-0000-0000-0000-000000000000")
	_, _, err = resolve(t, secretstore.New(), shopApp(store(srv, "kv", 2, application.VaultAuth{AppRole: &bad}), "kv/data/shop/*"), ref)
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), "login at auth/approle") || strings.Contains(err.Error(), "00000000-0000") {
		t.Fatalf("bad approle: %v", err)
	}

	// JWT, validated against a public key Vault is given.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, "jwt", &vault.EnableAuthOptions{Type: "jwt"}); err != nil {
		t.Fatal(err)
	}
	must(root.Logical().WriteWithContext(ctx, "auth/jwt/config", map[string]any{"jwt_validation_pubkeys": []string{pub}}))
	must(root.Logical().WriteWithContext(ctx, "auth/jwt/role/flotilla", map[string]any{
		"role_type": "jwt", "bound_audiences": []string{"flotilla"}, "user_claim": "sub", "token_policies": []string{"shop"}, "token_ttl": "1h",
	}))
	jwt := signJWT(t, key, map[string]any{"sub": "controller", "aud": "flotilla", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	jwtAuth := application.VaultAuth{JWT: &application.VaultJWT{Mount: "jwt", Role: "flotilla", JWTFile: write("jwt", jwt)}}
	if v, _, err := resolve(t, secretstore.New(), shopApp(store(srv, "kv", 2, jwtAuth), "kv/data/shop/*"), ref); err != nil || v != "login-pw" {
		t.Fatalf("jwt: %q %v", v, err)
	}
}

// signJWT makes an RS256 token.
func signJWT(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}
