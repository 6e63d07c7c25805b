package main

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
		o    ssoOptions
		want string
	}{
		{ssoOptions{clientID: "flotilla"}, "need --oidc-issuer"},
		{ssoOptions{cliClientID: "flotilla-cli"}, "need --oidc-issuer"},
		{ssoOptions{issuer: "https://idp.example.com"}, "--oidc-client-id"},
		{ssoOptions{issuer: "https://idp.example.com", clientID: "f", redirectURL: "https://ctl.example.com/callback"}, "/auth/callback"},
		{ssoOptions{issuer: "https://idp.example.com", clientID: "f", redirectURL: "https://ctl.example.com/auth/callback", secretFile: empty}, "empty file"},
	} {
		if _, err := c.o.build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error with %q", c.o, err, c.want)
		}
	}
	if sso, err := (&ssoOptions{}).build(); sso != nil || err != nil {
		t.Errorf("no flags: %v, %v; want single sign-on off", sso, err)
	}
	if sso, err := (&ssoOptions{issuer: "https://idp.example.com", clientID: "f", redirectURL: "https://ctl.example.com/auth/callback"}).build(); sso == nil || err != nil {
		t.Errorf("complete flags: %v, %v", sso, err)
	}
}
