package application

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/fault"
)

// problems unpacks the joined error Parse and Validate return.
func problems(t *testing.T, err error) []*fault.Error {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*fault.Error, 0, len(errs))
	for _, e := range errs {
		fe, ok := e.(*fault.Error)
		if !ok {
			t.Fatalf("problem %T is not a *fault.Error: %v", e, e)
		}
		out = append(out, fe)
	}
	return out
}

// want describes one expected problem; empty parts are not checked.
type want struct {
	line  int
	app   string
	field string
	kind  error
	msg   string // substring of the message
}

func checkProblems(t *testing.T, err error, wants []want) {
	t.Helper()
	got := problems(t, err)
	if len(got) != len(wants) {
		t.Errorf("got %d problems, want %d:", len(got), len(wants))
		for _, p := range got {
			t.Errorf("  %v", p)
		}
		return
	}
	for i, w := range wants {
		p := got[i]
		if w.line != 0 && p.Line != w.line {
			t.Errorf("problem %d: line %d, want %d (%v)", i, p.Line, w.line, p)
		}
		if w.app != "" && p.App != w.app {
			t.Errorf("problem %d: app %q, want %q (%v)", i, p.App, w.app, p)
		}
		if w.field != "" && p.Field != w.field {
			t.Errorf("problem %d: field %q, want %q (%v)", i, p.Field, w.field, p)
		}
		if w.kind != nil && !errors.Is(p, w.kind) {
			t.Errorf("problem %d: not %v (%v)", i, w.kind, p)
		}
		if !strings.Contains(p.Err.Error(), w.msg) {
			t.Errorf("problem %d: message %q lacks %q", i, p.Err, w.msg)
		}
	}
}

func TestParse_validFullExample(t *testing.T) {
	f, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	retain0, retain2 := 0, 2
	wantApps := []Application{
		{
			Name: "shop",
			Source: Source{
				RepoURL:  "https://git.example.com/ops/deploy.git",
				Revision: "v1.4.0",
				Path:     "shop",
				Compose: Compose{
					Files:    []string{"docker-compose.yml", "docker-compose.prod.yml"},
					EnvFiles: []string{".env", "../common/.env"},
				},
				Credentials: &Credentials{UsernameFile: "/run/secrets/git-user", PasswordFile: "/run/secrets/git-token"},
			},
			Stack: "shop-prod",
			SyncPolicy: SyncPolicy{
				Automated:     &Automated{Prune: true, SelfHeal: true, PruneVolumes: true},
				Interval:      Duration{90 * time.Second},
				RetainRotated: &retain0,
				Wait:          &Wait{Timeout: Duration{5 * time.Minute}},
			},
			Allow: Allow{
				Networks: []string{"traefik-public"}, Configs: []string{"shared-ca"},
				Secrets: []string{"shared-tls"}, Volumes: []string{"backups"},
				HostPaths: []string{"/var/run/docker.sock"},
			},
			Adopt:       true,
			History:     3,
			Destination: LocalDestination,
		},
		{
			Name: "blog",
			Source: Source{
				RepoURL: "git@github.com:example/blog.git", Revision: "HEAD", Path: ".",
				Credentials: &Credentials{SSHKeyFile: "/run/secrets/deploy-key", KnownHostsFile: "/etc/ssh/ssh_known_hosts"},
			},
			Stack:       "blog",
			SyncPolicy:  SyncPolicy{Interval: Duration{DefaultInterval}, RetainRotated: &retain2},
			History:     DefaultHistory,
			Destination: LocalDestination,
		},
		{
			Name:        "local",
			Source:      Source{RepoURL: "/srv/git/local.git", Revision: "HEAD", Path: "."},
			Stack:       "local",
			SyncPolicy:  SyncPolicy{Interval: Duration{DefaultInterval}, RetainRotated: &retain2},
			History:     DefaultHistory,
			Destination: LocalDestination,
		},
	}
	if f.APIVersion != APIVersion {
		t.Errorf("apiVersion %q", f.APIVersion)
	}
	if !reflect.DeepEqual(f.Applications, wantApps) {
		t.Errorf("applications:\n got %+v\nwant %+v", f.Applications, wantApps)
	}
}

// base is a valid one-application file that cases below extend.
const base = `apiVersion: flotilla/v1
applications:
  - name: shop
    source:
      repoURL: https://git.example.com/ops/deploy.git
`

func TestParse_problems(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []want
	}{
		{
			name: "unknown key at depth",
			input: base + `      compose:
        files: [a.yml]
        envfile: .env
`,
			want: []want{{line: 8, app: "shop", field: "applications[0].source.compose.envfile", kind: ErrUnknownField, msg: `did you mean "envFiles"`}},
		},
		{
			name:  "host port below zero",
			input: base + "    allow: {hostPorts: [443, -1]}\n",
			want:  []want{{line: 6, app: "shop", field: "applications[0].allow.hostPorts[1]", kind: ErrType, msg: "must be a whole number from 0 to 4294967295"}},
		},
		{
			name:  "host port past its field",
			input: base + "    allow: {hostPorts: [4294967296]}\n",
			want:  []want{{line: 6, app: "shop", field: "applications[0].allow.hostPorts[0]", kind: ErrType, msg: "must be a whole number from 0 to 4294967295"}},
		},
		{
			name:  "unknown top-level key lists known ones",
			input: base + "kind: Applications\n",
			want:  []want{{line: 6, field: "kind", kind: ErrUnknownField, msg: "known: apiVersion, applications"}},
		},
		{
			name:  "inline password",
			input: base + "      credentials: {password: hunter2}\n",
			want:  []want{{line: 6, field: "applications[0].source.credentials.password", kind: ErrUnknownField, msg: "name it with source.credentials.passwordFile"}},
		},
		{
			name:  "inline token",
			input: base + "      token: abc\n",
			want:  []want{{line: 6, kind: ErrUnknownField, msg: "passwordFile"}},
		},
		{
			name:  "inline private key",
			input: base + "      credentials:\n        privateKey: abc\n",
			want:  []want{{line: 7, kind: ErrUnknownField, msg: "sshKeyFile"}},
		},
		{
			name: "duplicate names",
			input: base + `  - name: shop
    source: {repoURL: "https://h/x.git"}
    stack: other
`,
			want: []want{{line: 6, app: "shop", field: "applications[1].name", kind: ErrDuplicate, msg: "already used by applications[0]"}},
		},
		{
			name: "duplicate stacks",
			input: base + `  - name: shop-canary
    source: {repoURL: "https://h/x.git"}
    stack: shop
`,
			want: []want{{line: 8, app: "shop-canary", field: "applications[1].stack", kind: ErrDuplicate, msg: `claimed by application "shop"`}},
		},
		{
			name:  "duplicate key",
			input: base + "    history: 3\n    history: 4\n",
			want:  []want{{line: 7, field: "applications[0].history", kind: ErrDuplicate, msg: "first on line 6"}},
		},
		{
			name:  "interval too short",
			input: base + "    syncPolicy: {interval: 5s}\n",
			want:  []want{{line: 6, field: "applications[0].syncPolicy.interval", kind: ErrInvalid, msg: "minimum 10s"}},
		},
		{
			name:  "interval as a number",
			input: base + "    syncPolicy: {interval: 180}\n",
			want:  []want{{line: 6, field: "applications[0].syncPolicy.interval", kind: ErrType, msg: "bare number"}},
		},
		{
			name:  "interval not a duration",
			input: base + "    syncPolicy: {interval: 3 minutes}\n",
			want:  []want{{line: 6, kind: ErrInvalid, msg: `invalid duration "3 minutes"`}},
		},
		{
			name:  "path escaping",
			input: base + "      path: shop/../../etc\n",
			want:  []want{{line: 6, field: "applications[0].source.path", kind: ErrInvalid, msg: "leaves the repository"}},
		},
		{
			name:  "absolute path",
			input: base + "      path: /etc\n",
			want:  []want{{line: 6, field: "applications[0].source.path", msg: "must be relative"}},
		},
		{
			name:  "compose file escaping",
			input: base + "      path: a\n      compose: {files: [ok.yml, ../b/ok.yml, ../../no.yml], envFiles: [/abs]}\n",
			want: []want{
				{line: 7, field: "applications[0].source.compose.files[2]", msg: "leaves the repository"},
				{line: 7, field: "applications[0].source.compose.envFiles[0]", msg: "must be relative"},
			},
		},
		{
			name: "several problems together",
			input: `apiVersion: flotilla/v0
applications:
  - name: Shop
    source:
      repoURL: ""
      bogus: 1
    syncPolicy:
      interval: 1s
      retainRotated: -1
      wait: {timeout: -1m}
    history: -2
    adopt: maybe
    allow: {hostPaths: [relative/dir]}
`,
			want: []want{
				{line: 1, field: "apiVersion", msg: "unsupported version"},
				{line: 3, app: "Shop", field: "applications[0].name", msg: "lowercase"},
				{line: 5, field: "applications[0].source.repoURL", kind: ErrRequired},
				{line: 6, field: "applications[0].source.bogus", kind: ErrUnknownField},
				{line: 8, field: "applications[0].syncPolicy.interval"},
				{line: 9, field: "applications[0].syncPolicy.retainRotated"},
				{line: 10, field: "applications[0].syncPolicy.wait.timeout", msg: "positive"},
				{line: 11, field: "applications[0].history"},
				{line: 12, field: "applications[0].adopt", kind: ErrType, msg: "true or false"},
				{line: 13, field: "applications[0].allow.hostPaths[0]", msg: "absolute"},
			},
		},
		{
			name:  "wrong shape is reported once, not again as required",
			input: "apiVersion: flotilla/v1\napplications:\n  - name: shop\n    source: [x]\n",
			want:  []want{{line: 4, field: "applications[0].source", kind: ErrType, msg: "must be a mapping, found a list"}},
		},
		{
			name:  "missing source",
			input: "apiVersion: flotilla/v1\napplications:\n  - name: shop\n",
			want:  []want{{line: 3, field: "applications[0].source.repoURL", kind: ErrRequired}},
		},
		{
			name:  "missing apiVersion",
			input: "applications: []\n",
			want:  []want{{line: 1, field: "apiVersion", kind: ErrRequired}},
		},
		{
			name:  "invalid yaml",
			input: "apiVersion: flotilla/v1\napplications:\n  - name: [shop\n",
			want:  []want{{kind: ErrSyntax, msg: "invalid YAML"}},
		},
		{
			name:  "tab indentation",
			input: "apiVersion: flotilla/v1\napplications:\n\t- name: x\n",
			want:  []want{{line: 3, kind: ErrSyntax}},
		},
		{
			name:  "empty file",
			input: "# nothing\n",
			want:  []want{{kind: ErrSyntax, msg: "empty"}},
		},
		{
			name:  "two documents",
			input: base + "---\napiVersion: flotilla/v1\n",
			want:  []want{{line: 6, kind: ErrSyntax, msg: "only one YAML document"}},
		},
		{
			name:  "merge keys",
			input: base + "    <<: {history: 3}\n",
			want:  []want{{line: 6, kind: ErrUnknownField, msg: "merge keys"}},
		},
		{
			name:  "password in URL",
			input: "apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: 'https://u:s3cret@h/x.git'}\n",
			want:  []want{{line: 4, field: "applications[0].source.repoURL", msg: "contains a password"}},
		},
		{
			name: "credential rules",
			input: `apiVersion: flotilla/v1
applications:
  - name: a
    source:
      repoURL: ssh://git@h/x.git
      credentials: {sshKeyFile: /k, usernameFile: /u}
  - name: b
    source:
      repoURL: http://h/x.git
      credentials: {passwordFile: rel/token}
`,
			want: []want{
				{line: 6, app: "a", field: "applications[0].source.credentials.usernameFile", kind: ErrRequired, msg: "needs passwordFile"},
				{line: 6, app: "a", field: "applications[0].source.credentials.knownHostsFile", kind: ErrRequired},
				{line: 10, app: "b", field: "applications[1].source.credentials.passwordFile", msg: "absolute"},
				{line: 10, app: "b", field: "applications[1].source.credentials.passwordFile", msg: "plain http"},
			},
		},
		{
			name:  "name too long",
			input: "apiVersion: flotilla/v1\napplications:\n  - name: " + strings.Repeat("a", 64) + "\n    source: {repoURL: /r}\n",
			want:  []want{{line: 3, field: "applications[0].name", msg: "longer than 63"}},
		},
		{
			name:  "revision that is an option",
			input: base + "      revision: --upload-pack=x\n",
			want:  []want{{line: 6, field: "applications[0].source.revision"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("applications.yaml", []byte(tt.input))
			if f != nil {
				t.Errorf("got a File with errors")
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, p := range problems(t, err) {
				if p.File != "applications.yaml" {
					t.Errorf("problem without file: %v", p)
				}
			}
			checkProblems(t, err, tt.want)
		})
	}
}

// aliasBomb is a document of a few kilobytes whose aliases expand to
// millions of values: every application repeats the first, whose allowlist
// is long.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: flotilla/v1\napplications:\n  - &app\n    name: a\n    source: {repoURL: /r}\n    allow: {networks: [")
	b.WriteString(strings.Repeat("n, ", 2000))
	b.WriteString("n]}\n")
	b.WriteString(strings.Repeat("  - *app\n", 2000))
	return b.String()
}

func TestParse_aliasExpansionIsBounded(t *testing.T) {
	_, err := Parse("a.yaml", []byte(aliasBomb()))
	checkProblems(t, err, []want{{kind: ErrInvalid, msg: "expands to more than"}})
}

func TestParse_accepts(t *testing.T) {
	tests := []struct{ name, input string }{
		{"no applications", "apiVersion: flotilla/v1\n"},
		{"empty list", "apiVersion: flotilla/v1\napplications: []\n"},
		{"automated without options", base + "    syncPolicy:\n      automated:\n"},
		{"null scalars fall back to defaults", base + "    history:\n    stack:\n"},
		{"numeric-looking revision", base + "      revision: 1.10\n"},
		{"anchors and aliases", base + "    allow: {networks: &n [a, b], configs: *n}\n"},
		{"file URL", "apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: 'file:///srv/r.git'}\n"},
		{"ssh user without password", "apiVersion: flotilla/v1\napplications:\n  - name: a\n    source: {repoURL: 'ssh://git@h:2222/x.git'}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse("a.yaml", []byte(tt.input)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParse_automatedNullIsPresent(t *testing.T) {
	f, err := Parse("a.yaml", []byte(base+"    syncPolicy:\n      automated:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Applications[0].SyncPolicy.Automated == nil {
		t.Error("automated: with no value left the application manual")
	}
}

func TestLoad_missingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want a not-exist error", err)
	}
}

func TestDuration_yaml(t *testing.T) {
	var w Wait
	if err := yaml.Unmarshal([]byte("timeout: 90s\n"), &w); err != nil || w.Timeout.Duration != 90*time.Second {
		t.Fatalf("got %v, %v", w.Timeout, err)
	}
	if err := yaml.Unmarshal([]byte("timeout: 90\n"), &w); !errors.Is(err, ErrType) {
		t.Fatalf("bare number: got %v", err)
	}
	out, err := yaml.Marshal(Wait{Timeout: Duration{3 * time.Minute}})
	if err != nil || string(out) != "timeout: 3m0s\n" {
		t.Fatalf("marshal: %q, %v", out, err)
	}
}

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, and any
// File it accepts must survive a marshal and parse round trip unchanged and
// pass Validate on its own.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/full.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base))
	f.Add([]byte(base + "    syncPolicy: {interval: 30}\n"))
	f.Add([]byte(base + "    <<: {history: 3}\n"))
	f.Add([]byte("apiVersion: flotilla/v1\napplications: &a [*a]\n"))
	// The alias bomb is not a seed: each run takes 0.4 s and the engine
	// stalls minimising its mutants. Its own test above keeps it covered.
	f.Add([]byte("{"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if err != nil {
			if file != nil {
				t.Fatal("File returned with an error")
			}
			for _, p := range problems(t, err) {
				if p.Err == nil {
					t.Fatalf("problem without a cause: %#v", p)
				}
			}
			return
		}
		if err := Validate(file); err != nil {
			t.Fatalf("parsed file fails Validate: %v", err)
		}
		out, err := yaml.Marshal(file)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Parse("f.yaml", out)
		if err != nil {
			t.Fatalf("round trip of %q: %v", out, err)
		}
		if !reflect.DeepEqual(file.Applications, again.Applications) {
			t.Fatalf("round trip changed applications:\n%+v\n%+v", file.Applications, again.Applications)
		}
	})
}

// allow.hostPorts, the one unsigned field of the file, is read from the
// file: the decoder knew only int, so the README's `hostPorts: [443]` was
// refused with "cannot decode into uint32" (found running the quickstart).
func TestParse_hostPortsAreRead(t *testing.T) {
	f, err := Parse("f.yaml", []byte(base+"    stack: shop\n    allow: {hostPorts: [443, 18080]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Applications[0].Allow.HostPorts; len(got) != 2 || got[0] != 443 || got[1] != 18080 {
		t.Fatalf("hostPorts %v, want [443 18080]", got)
	}
}
