package application

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	f := &File{APIVersion: APIVersion, Applications: []Application{{
		Name:   "shop",
		Source: Source{RepoURL: "https://h/x.git", Path: "a/./b/"},
	}}}
	Defaults(f)
	a := f.Applications[0]
	if a.Stack != "shop" || a.Source.Revision != "HEAD" || a.Source.Path != "a/b" ||
		a.SyncPolicy.Interval.Duration != 3*time.Minute || a.History != 10 ||
		a.SyncPolicy.RetainRotated == nil || *a.SyncPolicy.RetainRotated != 2 {
		t.Errorf("defaults not applied: %+v", a)
	}
	if a.SyncPolicy.Automated != nil || a.SyncPolicy.Wait != nil || a.Source.Credentials != nil {
		t.Errorf("Defaults made an optional part present: %+v", a.SyncPolicy)
	}
	before := *a.SyncPolicy.RetainRotated
	Defaults(f)
	if f.Applications[0].Source.Path != "a/b" || *f.Applications[0].SyncPolicy.RetainRotated != before {
		t.Error("Defaults is not idempotent")
	}
}

func TestValidate_fileBuiltInCode(t *testing.T) {
	f := &File{APIVersion: APIVersion, Applications: []Application{
		{Name: "a", Source: Source{RepoURL: "https://h/x.git"}},
		{Name: "b", Stack: "a", Source: Source{RepoURL: "git@h:x.git"}},
	}}
	Defaults(f)
	checkProblems(t, Validate(f), []want{{app: "b", field: "applications[1].stack", kind: ErrDuplicate}})
	for _, p := range problems(t, Validate(f)) {
		if p.File != "" || p.Line != 0 {
			t.Errorf("a File built in code got a position: %v", p)
		}
	}
}

func TestValidate_repoURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://git.example.com/ops/deploy.git", true},
		{"http://gitea.local:3000/ops/deploy.git", true},
		{"ssh://git@git.example.com:2222/ops/deploy.git", true},
		{"git@github.com:ops/deploy.git", true},
		{"file:///srv/git/deploy.git", true},
		{"/srv/git/deploy.git", true},
		{"git://172.18.0.1/rollout", true},
		{"git://host", false},
		{"relative/dir", false},
		{"https://", false},
		{"https://host", false},
		{"ftp://host/x.git", false},
		{"file://host/x.git", false},
		{"https://user:pw@host/x.git", false},
		{"https://host/x y.git", false},
		{"github.com:ops/deploy.git", false},
	}
	for _, tt := range tests {
		f := &File{APIVersion: APIVersion, Applications: []Application{{Name: "a", Source: Source{RepoURL: tt.url}}}}
		Defaults(f)
		err := Validate(f)
		if (err == nil) != tt.ok {
			t.Errorf("%q: got %v, want ok=%v", tt.url, err, tt.ok)
		}
	}
}

// git:// is git daemon's anonymous protocol: credentials for it would be
// sent nowhere, so they are refused rather than silently ignored.
func TestValidate_gitURLTakesNoCredentials(t *testing.T) {
	f := &File{APIVersion: APIVersion, Applications: []Application{{Name: "a", Source: Source{
		RepoURL: "git://172.18.0.1/rollout", Credentials: &Credentials{PasswordFile: "/run/secrets/git-token"}}}}}
	Defaults(f)
	err := Validate(f)
	if err == nil || !strings.Contains(err.Error(), "git:// (git daemon) is anonymous") || !strings.Contains(err.Error(), "source.credentials") {
		t.Fatalf("Validate = %v, want the credentials refused for git://, naming the field", err)
	}
}

func TestParse_secretsAreNotEchoed(t *testing.T) {
	for _, input := range []string{
		"apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: 'https://u:s3cret@h/x.git'}\n",
		"apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: 'https://u:s3cret@h/%zz x'}\n",
		"apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: /r, credentials: s3cret}\n",
		"apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: /r, credentials: {password: s3cret}}\n",
	} {
		_, err := Parse("a.yaml", []byte(input))
		if err == nil {
			t.Fatalf("accepted %q", input)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("secret echoed: %v", err)
		}
	}
}

func TestValidate_registryAuth(t *testing.T) {
	tests := []struct {
		name string
		ra   RegistryAuth
		want []want
		path string
	}{
		{"swarm secret", RegistryAuth{Secret: "shop-regcreds"}, nil, "/run/secrets/shop-regcreds"},
		{"file", RegistryAuth{File: "/etc/flotilla/regcreds.json"}, nil, "/etc/flotilla/regcreds.json"},
		{"neither", RegistryAuth{}, []want{{app: "shop", field: "applications[0].registryAuth", kind: ErrRequired}}, ""},
		{"both", RegistryAuth{Secret: "x", File: "/x"}, []want{{app: "shop", field: "applications[0].registryAuth", kind: ErrInvalid}}, ""},
		{"secret with a path", RegistryAuth{Secret: "../etc/passwd"}, []want{{app: "shop", field: "applications[0].registryAuth.secret", kind: ErrInvalid}}, ""},
		{"relative file", RegistryAuth{File: "regcreds.json"}, []want{{app: "shop", field: "applications[0].registryAuth.file", kind: ErrInvalid}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ra := tt.ra
			f := &File{APIVersion: APIVersion, Applications: []Application{{
				Name: "shop", Source: Source{RepoURL: "https://h/x.git"}, RegistryAuth: &ra,
			}}}
			Defaults(f)
			err := Validate(f)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := ra.Path(); got != tt.path {
					t.Fatalf("Path() = %q, want %q", got, tt.path)
				}
				return
			}
			checkProblems(t, err, tt.want)
		})
	}
}
