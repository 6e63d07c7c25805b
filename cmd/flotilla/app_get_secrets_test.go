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
	lines := strings.Split(got, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "db_password") && !strings.Contains(l, " 4 ") {
			t.Errorf("the version is not in its row: %q", l)
		}
		if strings.HasPrefix(l, "api_key") && !strings.Contains(l, " - ") {
			t.Errorf("a store without versions should show -: %q", l)
		}
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
