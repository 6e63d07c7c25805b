package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/access"
)

func TestTokensFrom(t *testing.T) {
	files := map[string]string{"/run/secrets/admin": "  file-admin-token\n", "/empty": "\n"}
	readFile := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("no such file")
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string // "name:role=secret,..." or an error substring
		wantErr bool
	}{
		{"none", nil, "", false},
		{"admin value", map[string]string{EnvAdminToken: "a-token"}, "admin:admin=a-token", false},
		{"admin file, read value", map[string]string{EnvAdminTokenFile: "/run/secrets/admin", EnvReadToken: "r-token"}, "admin:admin=file-admin-token,read:viewer=r-token", false},
		{"both admin forms", map[string]string{EnvAdminTokenFile: "/run/secrets/admin", EnvAdminToken: "x"}, "both", true},
		{"missing file", map[string]string{EnvReadTokenFile: "/nope"}, EnvReadTokenFile, true},
		{"empty file", map[string]string{EnvAdminTokenFile: "/empty"}, "empty file", true},
		{"same token twice", map[string]string{EnvAdminToken: "same", EnvReadToken: "same"}, "same", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := tokensFrom(func(k string) string { return tc.env[k] }, readFile)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, tok := range ts {
				parts = append(parts, fmt.Sprintf("%s:%s=%s", tok.Name, tok.Role, tok.Secret))
			}
			if got := strings.Join(parts, ","); got != tc.want {
				t.Fatalf("tokens = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestToken_StringHidesSecret(t *testing.T) {
	tok := Token{Name: "admin", Role: access.Admin, Secret: "s3cret"}
	if s := fmt.Sprint(tok); strings.Contains(s, "s3cret") {
		t.Fatalf("String() = %q shows the secret", s)
	}
	if s := fmt.Sprintf("%v", Tokens{tok}); strings.Contains(s, "s3cret") {
		t.Fatalf("Tokens print as %q", s)
	}
}

func TestCheckListen(t *testing.T) {
	admin := Tokens{{Name: "admin", Role: access.Admin, Secret: "x"}}
	readOnly := Tokens{{Name: "read", Role: access.Viewer, Secret: "y"}}
	for _, tc := range []struct {
		addr   string
		tokens Tokens
		noAuth bool
		ok     bool
	}{
		{":8080", admin, false, true},
		{"0.0.0.0:8080", admin, true, true},
		{":8080", nil, false, false},
		{":8080", nil, true, false},
		{"0.0.0.0:8080", nil, true, false},
		{"[::]:8080", nil, true, false},
		{"10.1.2.3:8080", nil, true, false},
		{"127.0.0.1:8080", nil, true, true},
		{"127.0.0.2:8080", nil, true, true},
		{"[::1]:8080", nil, true, true},
		{"localhost:8080", nil, true, true},
		{"127.0.0.1:8080", nil, false, false},
		{"127.0.0.1:8080", readOnly, false, false},
		{"not-an-address", nil, true, false},
	} {
		err := CheckListen(tc.addr, tc.tokens, tc.noAuth)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, %d tokens, noAuth=%v) = %v, want ok=%v", tc.addr, len(tc.tokens), tc.noAuth, err, tc.ok)
		}
	}
}

func TestTokens_match(t *testing.T) {
	ts := Tokens{{Name: "admin", Role: access.Admin, Secret: "aaaa"}, {Name: "read", Role: access.Viewer, Secret: "bbbb"}, {Name: "blank", Role: access.Admin}}
	if tok, ok := ts.match("bbbb"); !ok || tok.Name != "read" {
		t.Fatalf("match(bbbb) = %v %v", tok, ok)
	}
	for _, bad := range []string{"", "aaa", "aaaaa", "AAAA"} {
		if _, ok := ts.match(bad); ok {
			t.Errorf("match(%q) succeeded", bad)
		}
	}
}
