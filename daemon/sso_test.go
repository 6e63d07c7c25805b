package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSSOOptions_incompleteOrMisplacedFlagsAreRefusedWithTheFlagNamed(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    SSOOptions
		want string
	}{
		{SSOOptions{ClientID: "flotilla"}, "need --oidc-issuer"},
		{SSOOptions{CLIClientID: "flotilla-cli"}, "need --oidc-issuer"},
		{SSOOptions{Issuer: "https://idp.example.com"}, "--oidc-client-id"},
		{SSOOptions{Issuer: "https://idp.example.com", ClientID: "f", RedirectURL: "https://ctl.example.com/callback"}, "/auth/callback"},
		{SSOOptions{Issuer: "https://idp.example.com", ClientID: "f", RedirectURL: "https://ctl.example.com/auth/callback", SecretFile: empty}, "empty file"},
	} {
		if _, err := c.o.build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error with %q", c.o, err, c.want)
		}
	}
	if sso, err := (&SSOOptions{}).build(); sso != nil || err != nil {
		t.Errorf("no flags: %v, %v; want single sign-on off", sso, err)
	}
	if sso, err := (&SSOOptions{Issuer: "https://idp.example.com", ClientID: "f", RedirectURL: "https://ctl.example.com/auth/callback"}).build(); sso == nil || err != nil {
		t.Errorf("complete flags: %v, %v", sso, err)
	}
}
