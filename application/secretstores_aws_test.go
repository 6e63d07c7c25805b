package application

import (
	"strings"
	"testing"
)

func TestAWSStoreIsParsedAndGrantsNamesAndARNs(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
secretStores:
  - name: aws
    aws:
      region: eu-central-1
      endpoint: https://vpce-0a1b.secretsmanager.eu-central-1.vpce.amazonaws.com
      auth: {defaultChain: true}
    grants:
      - applications: [shop]
        paths: [shop/*, "arn:aws:secretsmanager:eu-central-1:123456789012:secret:shared/db-*"]
applications:
  - name: shop
    source: {repoURL: https://h/shop.git}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := f.SecretStores[0]
	if s.AWS == nil || s.Vault != nil || s.AWS.Region != "eu-central-1" || !s.AWS.Auth.DefaultChain {
		t.Fatalf("store %+v", s)
	}
	g := f.Applications[0].SecretStores
	if len(g) != 1 {
		t.Fatalf("grants %+v", g)
	}
	for p, want := range map[string]bool{
		"shop/db": true, "shop/a/b": false, "other/db": false,
		"arn:aws:secretsmanager:eu-central-1:123456789012:secret:shared/db-AbCdEf": true,
		"arn:aws:secretsmanager:eu-central-1:123456789012:secret:other/db-AbCdEf":  false,
	} {
		if got := g[0].MayRead(p); got != want {
			t.Errorf("may read %q: %v, want %v", p, got, want)
		}
	}
}

func TestAWSStoreIsValidated(t *testing.T) {
	const grants = "\n    grants: [{applications: [a], paths: [shop/*]}]"
	for _, tc := range []struct{ name, store, want string }{
		{"no region", "aws: {auth: {defaultChain: true}}" + grants, "secretStores[0].aws.region: required"},
		{"bad region", "aws: {region: Frankfurt, auth: {defaultChain: true}}" + grants, "secretStores[0].aws.region"},
		{"no auth", "aws: {region: eu-central-1}" + grants, "secretStores[0].aws.auth: required"},
		{"two auths", "aws: {region: eu-central-1, auth: {defaultChain: true, accessKeyIDFile: /k, secretAccessKeyFile: /s}}" + grants, "set exactly one of defaultChain"},
		{"key id without secret", "aws: {region: eu-central-1, auth: {accessKeyIDFile: /k}}" + grants, "secretStores[0].aws.auth.secretAccessKeyFile: required"},
		{"relative key file", "aws: {region: eu-central-1, auth: {accessKeyIDFile: k, secretAccessKeyFile: /s}}" + grants, "secretStores[0].aws.auth.accessKeyIDFile"},
		{"http endpoint off loopback", "aws: {region: eu-central-1, endpoint: 'http://sm.internal', auth: {defaultChain: true}}" + grants, "secretStores[0].aws.endpoint"},
		{"credentials in the endpoint", "aws: {region: eu-central-1, endpoint: 'https://u:s3cret@sm', auth: {defaultChain: true}}" + grants, "must not carry credentials"},
		{"vault and aws", "vault: {address: https://v, mount: kv, auth: {tokenFile: /t}}\n    aws: {region: eu-central-1, auth: {defaultChain: true}}" + grants, "exactly one kind of store"},
		{"no kind", "pollInterval: 1m" + grants, "secretStores[0].vault: required"},
		{"grant without paths", "aws: {region: eu-central-1, auth: {defaultChain: true}}\n    grants: [{applications: [a]}]", "secret names (or ARNs)"},
		{"unknown field", "aws: {region: eu-central-1, profile: prod, auth: {defaultChain: true}}" + grants, "profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "apiVersion: flotilla/v1\nsecretStores:\n  - name: aws\n    " + tc.store + "\n"
			_, err := Parse("apps.yaml", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "apps.yaml") {
				t.Fatalf("err %v, want one naming apps.yaml and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("err quotes the endpoint's password: %v", err)
			}
		})
	}
}
