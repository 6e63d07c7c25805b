package source

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLocation(t *testing.T) {
	abs, _ := filepath.Abs("rel/repo")
	cases := []struct{ in, protocol, key string }{
		{"https://GitHub.com/org/repo.git", "https", "https://github.com/org/repo"},
		{"https://user:tok@github.com:443/org/repo/", "https", "https://github.com/org/repo"},
		{"http://git.local:8080/r", "http", "http://git.local:8080/r"},
		{"ssh://git@github.com/org/repo.git", "ssh", "ssh://github.com/org/repo"},
		{"ssh://git@github.com:2222/org/repo", "ssh", "ssh://github.com:2222/org/repo"},
		{"git@github.com:org/repo.git", "ssh", "ssh://github.com/org/repo"},
		{"file:///srv/git/app.git", "file", "file:///srv/git/app"},
		{"/srv/git/app/", "file", "file:///srv/git/app"},
		{"rel/repo", "file", "file://" + abs},
	}
	for _, tc := range cases {
		loc, err := parseLocation(tc.in)
		if err != nil {
			t.Errorf("parseLocation(%q): %v", tc.in, err)
			continue
		}
		if loc.protocol != tc.protocol || loc.key != tc.key {
			t.Errorf("parseLocation(%q) = %s %s, want %s %s", tc.in, loc.protocol, loc.key, tc.protocol, tc.key)
		}
		if strings.Contains(loc.safe, "tok") || strings.ContainsAny(loc.dir, "/:@") {
			t.Errorf("parseLocation(%q): safe %q dir %q leak or are not one path element", tc.in, loc.safe, loc.dir)
		}
	}
	for _, bad := range []string{"", "  ", "ftp://host/x", "s3://bucket/x"} {
		if _, err := parseLocation(bad); err == nil {
			t.Errorf("parseLocation(%q) accepted", bad)
		}
	}
}

func TestParseLocation_sameRepositorySameCache(t *testing.T) {
	a, _ := parseLocation("https://github.com/org/repo")
	b, _ := parseLocation("https://x:y@GITHUB.com/org/repo.git")
	c, _ := parseLocation("https://github.com/org/other")
	if a.dir != b.dir {
		t.Errorf("same repository, different caches: %s %s", a.dir, b.dir)
	}
	if a.dir == c.dir {
		t.Errorf("different repositories share cache %s", a.dir)
	}
}
