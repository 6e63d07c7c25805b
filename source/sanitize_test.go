package source

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSanitizeString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://user:tok@host/x?token=abc", "https://host/x"},
		{`fetch "https://oauth2:glpat-abcdefghijklmnopqrst@gitlab.com/a/b.git": 401`, `fetch "https://gitlab.com/a/b.git": 401`},
		{"ssh://deploy@host:2222/r.git#frag", "ssh://host:2222/r.git"},
		{"git@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"password=hunter2 and token: s3cr3t", "password=*** and token: ***"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "Authorization: Bearer ***"},
		{"used ghp_0123456789abcdefghijABCDEFGHIJ here", "used *** here"},
		{"basic authentication required", "basic authentication required"},
		{`"../../etc/passwd": path leaves the repository checkout`, `"../../etc/passwd": path leaves the repository checkout`},
		{`{"password": "x1"}`, `{"password": ***"}`},
		{"commit 0e4a817ae8e7706113721233b0f0db8577cdc391 in /srv/git/app", "commit 0e4a817ae8e7706113721233b0f0db8577cdc391 in /srv/git/app"},
	}
	for _, tc := range cases {
		if got := SanitizeString(tc.in); got != tc.want {
			t.Errorf("SanitizeString(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSanitize_keepsTheChain(t *testing.T) {
	err := fmt.Errorf("list https://u:tok@h/x?token=abc: %w", ErrUnreachable)
	got := Sanitize(err)
	if strings.Contains(got.Error(), "tok") || strings.Contains(got.Error(), "abc") {
		t.Errorf("Sanitize left a secret: %q", got)
	}
	if !errors.Is(got, ErrUnreachable) {
		t.Error("Sanitize lost the wrapped sentinel")
	}
	if Sanitize(nil) != nil {
		t.Error("Sanitize(nil) != nil")
	}
	if got := sanitize(errors.New("server said: bad credential plainvalue"), []string{"plainvalue"}); strings.Contains(got.Error(), "plainvalue") {
		t.Errorf("sanitize kept a known secret: %q", got)
	}
}
