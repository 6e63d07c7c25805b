package source

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/application"
)

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLocation(t *testing.T, raw string) location {
	t.Helper()
	loc, err := parseLocation(raw)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestLoadAuth_httpsReadsFilesEachTime(t *testing.T) {
	pw := writeTemp(t, "pw", "first-token\n")
	creds := &application.Credentials{PasswordFile: pw}
	loc := mustLocation(t, "https://example.com/r.git")

	a, err := loadAuth(loc, creds)
	if err != nil {
		t.Fatal(err)
	}
	basic, ok := a.method.(*githttp.BasicAuth)
	if !ok || basic.Username != "git" || basic.Password != "first-token" {
		t.Fatalf("auth = %#v, want basic git/first-token", a.method)
	}
	if err := os.WriteFile(pw, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds.UsernameFile = writeTemp(t, "user", "deploy\n")
	a, err = loadAuth(loc, creds)
	if err != nil {
		t.Fatal(err)
	}
	if b := a.method.(*githttp.BasicAuth); b.Username != "deploy" || b.Password != "rotated" {
		t.Errorf("after rotation auth = %s/%s", b.Username, b.Password)
	}
	if len(a.secrets) != 1 || a.secrets[0] != "rotated" {
		t.Errorf("secrets to scrub = %q", a.secrets)
	}
}

func TestLoadAuth_environmentDefaults(t *testing.T) {
	t.Setenv(EnvPasswordFile, writeTemp(t, "pw", "env-token"))
	t.Setenv(EnvCredentialHosts, "example.com")
	loc := mustLocation(t, "https://example.com/r.git")
	a, err := loadAuth(loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := a.method.(*githttp.BasicAuth); !ok || b.Password != "env-token" {
		t.Errorf("nil credentials: auth = %#v, want the environment's", a.method)
	}
	// An application that names its own files does not get the
	// environment's.
	own := &application.Credentials{PasswordFile: writeTemp(t, "pw2", "own-token")}
	a, err = loadAuth(loc, own)
	if err != nil {
		t.Fatal(err)
	}
	if b := a.method.(*githttp.BasicAuth); b.Password != "own-token" {
		t.Errorf("own credentials: password %q", b.Password)
	}
	// Local repositories take no credentials.
	if a, err := loadAuth(mustLocation(t, "/srv/git/x"), nil); err != nil || a.method != nil {
		t.Errorf("local repository: %v, %v", a.method, err)
	}
}

func TestLoadAuth_sshNeedsKnownHosts(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := writeTemp(t, "id", string(pem.EncodeToMemory(block)))
	loc := mustLocation(t, "git@github.com:org/repo.git")

	_, err = loadAuth(loc, &application.Credentials{SSHKeyFile: key})
	if err == nil || !strings.Contains(err.Error(), "known hosts") {
		t.Fatalf("ssh key without known hosts = %v, want a refusal", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	known := writeTemp(t, "known_hosts", "github.com "+string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	a, err := loadAuth(loc, &application.Credentials{SSHKeyFile: key, KnownHostsFile: known})
	if err != nil {
		t.Fatal(err)
	}
	keys, ok := a.method.(*gitssh.PublicKeys)
	if !ok || keys.User != "git" || keys.HostKeyCallback == nil {
		t.Fatalf("auth = %#v, want public keys for git with a host key check", a.method)
	}

	bad := writeTemp(t, "bad", "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END OPENSSH PRIVATE KEY-----\n")
	_, err = loadAuth(loc, &application.Credentials{SSHKeyFile: bad, KnownHostsFile: known})
	if err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Errorf("unusable key = %v, want an error without key material", err)
	}
}

func TestFetchErrorsCarryNoCredentials(t *testing.T) {
	f := newTestFetcher(t, nil)
	pw := writeTemp(t, "pw", "s3cr3t-value")
	_, err := f.Fetch(context.Background(), Request{
		// Port 1 on loopback refuses at once: no network leaves the host.
		RepoURL:     "https://user:tok3n@127.0.0.1:1/org/repo.git?token=abc",
		Credentials: &application.Credentials{PasswordFile: pw},
	})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	for _, secret := range []string{"tok3n", "token=abc", "s3cr3t-value"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1/org/repo.git") {
		t.Errorf("error %q does not name the repository", err)
	}
}

func TestLoadAuth_refusesANamedPipeInsteadOfBlockingOnIt(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "password")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	loc := mustLocation(t, "https://git.example.com/r.git")
	done := make(chan error, 1)
	go func() {
		_, err := loadAuth(loc, &application.Credentials{PasswordFile: fifo})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("loadAuth(fifo) = %v, want a not-a-regular-file error", err)
		}
	case <-time.After(5 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("loadAuth blocked on a named pipe")
	}
}

// The default credentials are a token for the operator's own forge: they
// reach only the hosts listed for them, and never over plain http.
func TestLoadAuth_defaultsGoOnlyToListedHostsOverHTTPS(t *testing.T) {
	t.Setenv(EnvPasswordFile, writeTemp(t, "pw", "env-token"))
	for _, tc := range []struct {
		hosts, url string
		want       bool
	}{
		{"git.example.com", "https://git.example.com/team/r.git", true},
		{" GIT.example.com , other.example", "https://git.example.com/r", true},
		{"git.example.com:443", "https://git.example.com/r", true},
		{"git.example.com:8443", "https://git.example.com:8443/r", true},
		{"git.example.com", "https://git.example.com:8443/r", false},
		{"git.example.com:8443", "https://git.example.com/r", false},
		{"git.example.com", "http://git.example.com/r", false},
		{"git.example.com:80", "http://git.example.com/r", false},
		{"git.example.com", "https://github.com/someone-else/r", false},
		{"git.example.com", "https://git.example.com.evil.example/r", false},
		{"git.example.com", "https://evil.example/git.example.com/r", false},
		{"git.example.com", "https://git.example.com@evil.example/r", false},
		{"git.example.com", "git://git.example.com/r", false},
		{"", "https://git.example.com/r", false},
		{",", "https://git.example.com/r", false},
		{"[::1]:8443", "https://[::1]:8443/r", true},
		// A URL without a host must not match an entry that trims to nothing
		// (found by FuzzDefaultCredentialsFor).
		{"[", "https://# \"", false},
		{"[]", "https://#/r", false},
	} {
		t.Setenv(EnvCredentialHosts, tc.hosts)
		a, err := loadAuth(mustLocation(t, tc.url), nil)
		if err != nil {
			t.Fatalf("hosts %q, %s: %v", tc.hosts, tc.url, err)
		}
		if got := a.method != nil; got != tc.want {
			t.Errorf("hosts %q, %s: default credentials sent = %v, want %v", tc.hosts, tc.url, got, tc.want)
		}
	}
	// An application's own credentials are its choice, host list or not.
	t.Setenv(EnvCredentialHosts, "")
	own := &application.Credentials{PasswordFile: writeTemp(t, "pw2", "own-token")}
	if a, err := loadAuth(mustLocation(t, "https://github.com/r"), own); err != nil || a.method == nil {
		t.Errorf("own credentials on an unlisted host: %v, %v", a.method, err)
	}
}

func TestDefaultCredentialsUnscoped(t *testing.T) {
	t.Setenv(EnvPasswordFile, "")
	t.Setenv(EnvCredentialHosts, "")
	if DefaultCredentialsUnscoped() {
		t.Error("no defaults set: reported unscoped")
	}
	t.Setenv(EnvSSHKeyFile, "/run/secrets/key")
	if !DefaultCredentialsUnscoped() {
		t.Error("a default without hosts: not reported")
	}
	t.Setenv(EnvCredentialHosts, "git.example.com")
	if DefaultCredentialsUnscoped() {
		t.Error("a default with hosts: reported unscoped")
	}
}

// FuzzDefaultCredentialsFor: whatever the URL and the host list, defaults
// go only over https or ssh, to a host the list names.
func FuzzDefaultCredentialsFor(f *testing.F) {
	for _, seed := range [][2]string{
		{"https://git.example.com/r", "git.example.com"},
		{"http://git.example.com/r", "git.example.com"},
		{"git@git.example.com:team/r.git", "git.example.com:22"},
		{"ssh://git@git.example.com:2222/r", "git.example.com:2222"},
		{"https://[::1]:8443/r", "[::1]:8443"},
		{"https://git.example.com%2eevil/r", "git.example.com"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, raw, hosts string) {
		loc, err := parseLocation(raw)
		if err != nil || !defaultCredentialsFor(loc, hosts) {
			return
		}
		if loc.protocol != "https" && loc.protocol != "ssh" {
			t.Fatalf("%q with %q: defaults over %s", raw, hosts, loc.protocol)
		}
		if loc.hostname == "" || !strings.Contains(strings.ToLower(hosts), strings.Trim(loc.hostname, "[]")) {
			t.Fatalf("%q with %q: defaults to unlisted host %q", raw, hosts, loc.hostname)
		}
	})
}
