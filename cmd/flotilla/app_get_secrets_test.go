package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// `flotilla app get` lists where each store secret comes from, its version
// and last rotation; a path from the repository cannot drive the terminal.
func TestAppGetListsTheSecretStoreReferences(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	st := application.Status{Name: "shop", Stack: "shop", SecretRefs: []application.SecretRefStatus{
		{Secret: "db_password", Store: "vault", Path: "kv/data/shop/db", Key: "password", Version: 4,
			SwarmSecret: "shop_db_password-1a2b3c", LastRotated: now.Add(-3 * time.Hour), RotatedRevision: 7},
		{Secret: "api_key", Store: "legacy", Path: "kv1/shop/\x1b]0;pwned\x07api", Key: "key", SwarmSecret: "shop_api_key-9f8e7d"},
		{Secret: "aws_key", Store: "aws", Path: "shop/aws", Key: "key", VersionID: "a1b2c3d4-5e6f-7a8b-9c0d-e1f2a3b4c5d6",
			SwarmSecret: "shop_aws_key-77aa88"},
		{Kind: "config", Secret: "app_conf", Store: "vault", Path: "kv/data/shop/app", Key: "conf", Version: 2, SwarmSecret: "shop_app_conf-4d5e6f"},
		{Kind: "env", Service: "worker", Secret: "DB_PASSWORD", Store: "vault", Path: "kv/data/shop/db", Key: "password", Version: 4,
			SwarmSecret: "flotilla-sealed:0f1e2d"},
	}}
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"SECRET", "LAST ROTATED", "db_password", "kv/data/shop/db", "shop_db_password-1a2b3c", "(revision 7)", "never"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// Each row, by its columns: what uses the value, where it lives and
	// its version; an AWS version id is shortened like a commit.
	rows := map[string][]string{}
	for _, l := range strings.Split(got, "\n") {
		if f := strings.Fields(l); len(f) >= 7 {
			rows[f[0]] = f[:7]
		}
	}
	for name, want := range map[string]string{
		"SECRET":      "SECRET KIND SERVICE STORE PATH KEY VERSION",
		"db_password": "db_password secret - vault kv/data/shop/db password 4",
		"aws_key":     "aws_key secret - aws shop/aws key a1b2c3d4",
		"app_conf":    "app_conf config - vault kv/data/shop/app conf 2",
		"DB_PASSWORD": "DB_PASSWORD env worker vault kv/data/shop/db password 4",
	} {
		if g := strings.Join(rows[name], " "); g != want {
			t.Errorf("row %s: %q, want %q\n%s", name, g, want, got)
		}
	}
	if r := rows["api_key"]; len(r) < 7 || r[6] != "-" {
		t.Errorf("a store without versions should show -: %q", r)
	}
	if strings.Contains(got, "a1b2c3d4-5e6f") {
		t.Errorf("the AWS version id is not shortened:\n%s", got)
	}
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("a control character reached the terminal: %q", got)
	}
	out.Reset()
	if err := printStatus(&out, application.Status{Name: "plain"}, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "SECRET") {
		t.Errorf("an application without store secrets shows the table:\n%s", out.String())
	}
}
