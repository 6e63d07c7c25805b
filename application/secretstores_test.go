package application

import (
	"strings"
	"testing"
	"time"
)

const storesFile = `apiVersion: flotilla/v1
projects:
  - name: shop
    applications: [shop-*]
secretStores:
  - name: vault
    vault:
      address: https://vault.internal:8200
      mount: kv
      auth:
        appRole: {roleIDFile: /run/secrets/role-id, secretIDFile: /run/secrets/secret-id}
    grants:
      - projects: [shop]
        paths: [kv/data/shop/*]
      - applications: [billing]
        paths: [kv/data/billing/*]
applications:
  - name: shop-api
    source: {repoURL: https://h/shop.git}
  - name: billing
    source: {repoURL: https://h/billing.git}
  - name: blog
    source: {repoURL: https://h/blog.git}
`

func TestSecretStoresGrantOnlyWhatTheFileSays(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(storesFile))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Application{}
	for _, a := range f.Applications {
		byName[a.Name] = a
	}
	s := f.SecretStores[0]
	if s.Vault.KVVersion != 2 || s.PollInterval.Duration != time.Minute || s.Vault.Auth.AppRole.Mount != "approle" {
		t.Fatalf("defaults: %+v %+v", s, s.Vault)
	}
	shop := byName["shop-api"].SecretStores
	if len(shop) != 1 || shop[0].Store.Name != "vault" {
		t.Fatalf("shop-api grants %+v", shop)
	}
	for p, want := range map[string]bool{
		"kv/data/shop/db": true, "kv/data/billing/db": false, "kv/data/shop/a/b": false,
		"kv/data/shop/../billing/db": false, "/kv/data/shop/db": false,
	} {
		if got := shop[0].MayRead(p); got != want {
			t.Errorf("shop-api may read %q: %v, want %v", p, got, want)
		}
	}
	if b := byName["billing"].SecretStores; len(b) != 1 || b[0].MayRead("kv/data/shop/db") || !b[0].MayRead("kv/data/billing/db") {
		t.Fatalf("billing grants %+v", b)
	}
	if g := byName["blog"].SecretStores; len(g) != 0 {
		t.Fatalf("blog, granted nothing, has %+v", g)
	}
}

func TestVaultAWSLoginIsParsedWithItsDefaults(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
secretStores:
  - name: vault
    vault:
      address: https://vault.internal:8200
      mount: kv
      auth:
        aws: {role: flotilla, region: eu-central-1, headerValue: vault.internal}
    grants:
      - applications: [shop]
        paths: [kv/data/shop/*]
  - name: vault-global
    vault:
      address: https://vault.internal:8200
      mount: kv
      auth:
        aws: {role: flotilla, mount: aws-prod}
    grants:
      - applications: [shop]
        paths: [kv/data/shop/*]
applications:
  - name: shop
    source: {repoURL: https://h/shop.git}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := VaultAWS{Mount: "aws", Role: "flotilla", Region: "eu-central-1", HeaderValue: "vault.internal"}
	if a := f.SecretStores[0].Vault.Auth.AWS; a == nil || *a != want {
		t.Fatalf("aws login %+v, want %+v", a, want)
	}
	want = VaultAWS{Mount: "aws-prod", Role: "flotilla"}
	if a := f.SecretStores[1].Vault.Auth.AWS; a == nil || *a != want {
		t.Fatalf("aws login %+v, want %+v", a, want)
	}
}

func TestOnePasswordStoreIsParsedAndGranted(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
secretStores:
  - name: onepassword
    onePassword: {connectHost: "http://127.0.0.1:8080", tokenFile: /run/secrets/op-token}
    grants:
      - applications: [shop]
        paths: [shop/*]
applications:
  - name: shop
    source: {repoURL: https://h/shop.git}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := f.SecretStores[0]
	if s.OnePassword == nil || s.OnePassword.ConnectHost != "http://127.0.0.1:8080" || s.OnePassword.TokenFile != "/run/secrets/op-token" || s.PollInterval.Duration != time.Minute {
		t.Fatalf("store %+v", s)
	}
	g := f.Applications[0].SecretStores
	if len(g) != 1 || !g[0].MayRead("shop/db") || g[0].MayRead("other/db") || g[0].MayRead("shop/../other/db") {
		t.Fatalf("grants %+v", g)
	}
}

func TestSecretStoresAreValidated(t *testing.T) {
	for _, tc := range []struct{ name, store, want string }{
		{"plain http off loopback", "vault: {address: http://vault.internal:8200, mount: kv, auth: {tokenFile: /t}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "secretStores[0].vault.address"},
		{"two logins", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t, jwt: {role: r, jwtFile: /j}}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "set exactly one of tokenFile, appRole, jwt and aws"},
		{"aws login and a token file", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t, aws: {role: r}}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "field secretStores[0].vault.auth: set exactly one of tokenFile, appRole, jwt and aws"},
		{"aws login without a role", "vault: {address: https://v, mount: kv, auth: {aws: {region: eu-central-1}}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "secretStores[0].vault.auth.aws.role"},
		{"aws login in no region", "vault: {address: https://v, mount: kv, auth: {aws: {role: r, region: Frankfurt}}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "secretStores[0].vault.auth.aws.region"},
		{"aws login: unknown field", "vault: {address: https://v, mount: kv, auth: {aws: {role: r, accessKey: AKID}}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "accessKey"},
		{"no grants", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t}}", "secretStores[0].grants"},
		{"grant without paths", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t}}\n    grants: [{applications: [a]}]", "grants[0].paths"},
		{"path outside the mount", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t}}\n    grants: [{applications: [a], paths: [secret/data/*]}]", "not under the store's mount"},
		{"unknown project", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t}}\n    grants: [{projects: [nope], paths: [kv/data/*]}]", `no project "nope"`},
		{"relative token file", "vault: {address: https://v, mount: kv, auth: {tokenFile: t}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "auth.tokenFile"},
		{"kv version 3", "vault: {address: https://v, mount: kv, kvVersion: 3, auth: {tokenFile: /t}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "kvVersion"},
		{"1password: plain http off loopback", "onePassword: {connectHost: http://connect.internal:8080, tokenFile: /t}\n    grants: [{applications: [a], paths: [shop/*]}]", "secretStores[0].onePassword.connectHost"},
		{"1password: no token file", "onePassword: {connectHost: https://connect.internal}\n    grants: [{applications: [a], paths: [shop/*]}]", "secretStores[0].onePassword.tokenFile"},
		{"1password: relative token file", "onePassword: {connectHost: https://c, tokenFile: t}\n    grants: [{applications: [a], paths: [shop/*]}]", "secretStores[0].onePassword.tokenFile"},
		{"1password: a glob without an item", "onePassword: {connectHost: https://c, tokenFile: /t}\n    grants: [{applications: [a], paths: [shop]}]", "secretStores[0].grants[0].paths[0]"},
		{"1password: unknown field", "onePassword: {connectHost: https://c, tokenFile: /t, token: abc}\n    grants: [{applications: [a], paths: [shop/*]}]", "token"},
		{"vault and 1password", "onePassword: {connectHost: https://c, tokenFile: /t}\n    vault: {address: https://v, mount: kv, auth: {tokenFile: /t}}\n    grants: [{applications: [a], paths: [shop/*]}]", "set exactly one kind of store"},
		{"1password: credentials in the host", "onePassword: {connectHost: 'https://u:s3cret@c', tokenFile: /t}\n    grants: [{applications: [a], paths: [shop/*]}]", "must not carry credentials"},
		{"credentials in the address", "vault: {address: 'https://u:s3cret@v', mount: kv, auth: {tokenFile: /t}}\n    grants: [{applications: [a], paths: [kv/data/*]}]", "must not carry credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "apiVersion: flotilla/v1\nsecretStores:\n  - name: vault\n    " + tc.store + "\n"
			_, err := Parse("apps.yaml", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("err quotes the address's password: %v", err)
			}
		})
	}
}
