package source

import "testing"

func TestRepositoryKey(t *testing.T) {
	cases := []struct{ in, key string }{
		{"https://github.com/org/repo", "github.com/org/repo"},
		{"https://GitHub.com/Org/Repo.git", "github.com/org/repo"},
		{"https://user:tok@github.com:443/org/repo/", "github.com/org/repo"},
		{"http://github.com/org/repo", "github.com/org/repo"},
		{"ssh://git@github.com/org/repo.git", "github.com/org/repo"},
		{"ssh://git@github.com:2222/org/repo", "github.com/org/repo"},
		{"git@github.com:org/repo.git", "github.com/org/repo"},
		{"git://github.com/org/repo.git", "github.com/org/repo"},
		{"git@gitlab.example.com:group/sub/project.git", "gitlab.example.com/group/sub/project"},
		{"https://[::1]:8443/org/r.git", "[::1]/org/r"},
		{"file:///srv/git/app.git", "file:///srv/git/app"},
		{"/srv/git/app/", "file:///srv/git/app"},
	}
	for _, tc := range cases {
		got, err := RepositoryKey(tc.in)
		if err != nil || got != tc.key {
			t.Errorf("RepositoryKey(%q) = %q, %v; want %q", tc.in, got, err, tc.key)
		}
	}
	for _, bad := range []string{"", "ftp://host/x", "https://::1/x"} {
		if k, err := RepositoryKey(bad); err == nil {
			t.Errorf("RepositoryKey(%q) = %q, want an error", bad, k)
		}
	}
}

func TestSameRepository(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{"https://github.com/org/repo", "git@github.com:org/repo.git", true},
		{"https://github.com/org/repo.git", "ssh://git@GITHUB.com/org/repo", true},
		{"https://bitbucket.org/ws/repo", "git@bitbucket.org:ws/repo.git", true},
		{"https://github.com/org/repo", "https://github.com/org/repo-two", false},
		{"https://github.com/org/repo", "https://gitlab.com/org/repo", false},
		{"https://github.com/org/repo", "https://github.com/other/repo", false},
		{"https://github.com/org/repo", "https://github.com/org/repo/sub", false},
		{"https://github.com/org/repo", "", false},
		{"", "", false},
		{"ftp://x/y", "ftp://x/y", false},
	}
	for _, tc := range cases {
		if got := SameRepository(tc.a, tc.b); got != tc.same {
			t.Errorf("SameRepository(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
