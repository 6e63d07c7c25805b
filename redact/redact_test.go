package redact

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
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
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestValuesBlanksTheLongestFirstAndLeavesShortWords(t *testing.T) {
	got := Values("db pass s3cret-long, prefix s3cret, flag true", []string{"s3cret", "s3cret-long", "true"}, 6)
	if want := "db pass ***, prefix ***, flag true"; got != want {
		t.Errorf("Values = %q, want %q", got, want)
	}
	if got := Values("x", nil, 1); got != "x" {
		t.Errorf("no values changed the text: %q", got)
	}
}

var errSentinel = errors.New("unreachable")

func TestErrorKeepsTheChainAndBlanksBoth(t *testing.T) {
	err := fmt.Errorf("list https://u:tok@h/x?token=abc with plainvalue: %w", errSentinel)
	got := Error(err, "plainvalue")
	for _, leak := range []string{"tok", "abc", "plainvalue"} {
		if strings.Contains(got.Error(), leak) {
			t.Errorf("Error left %q: %q", leak, got)
		}
	}
	if !errors.Is(got, errSentinel) {
		t.Error("Error lost the wrapped sentinel")
	}
	if Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
	if again := Error(got); again != got {
		t.Error("redacting a redacted error wrapped it again")
	}
}
