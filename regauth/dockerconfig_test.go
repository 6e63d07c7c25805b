package regauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
)

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

func decode(t *testing.T, enc string) registry.AuthConfig {
	t.Helper()
	if strings.ContainsAny(enc, "+/") {
		t.Errorf("%q is not base64url", enc)
	}
	ac, err := authconfig.Decode(enc)
	if err != nil {
		t.Fatalf("decode %q: %v", enc, err)
	}
	return *ac
}

func TestFromDockerConfig_resolvesByRegistry(t *testing.T) {
	cfg := `{
	  "auths": {
	    "https://index.docker.io/v1/": {"auth": "` + basic("hubuser", "hub:pass") + `"},
	    "ghcr.io": {"username": "gh", "password": "ghtoken"},
	    "https://Registry.Example.com:5000/v2/": {"identitytoken": "idtok"},
	    "helper.example.com": {}
	  },
	  "credsStore": "desktop"
	}`
	c, err := FromDockerConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		image      string
		user, pass string
		token      string
		server     string
	}{
		{image: "nginx", user: "hubuser", pass: "hub:pass", server: hubServerAddress},
		{image: "library/nginx:1.27", user: "hubuser", pass: "hub:pass", server: hubServerAddress},
		{image: "docker.io/acme/app@sha256:" + strings.Repeat("a", 64), user: "hubuser", pass: "hub:pass", server: hubServerAddress},
		{image: "index.docker.io/acme/app", user: "hubuser", pass: "hub:pass", server: hubServerAddress},
		{image: "ghcr.io/acme/app:2", user: "gh", pass: "ghtoken", server: "ghcr.io"},
		{image: "registry.example.com:5000/team/app", token: "idtok", server: "registry.example.com:5000"},
		{image: "registry.example.com/team/app"}, // another port is another registry
		{image: "helper.example.com/team/app"},   // empty entry: helper-held, skipped
		{image: "quay.io/acme/app"},
	} {
		t.Run(tt.image, func(t *testing.T) {
			enc, err := c.RegistryAuth(ctx, tt.image)
			if err != nil {
				t.Fatal(err)
			}
			if tt.server == "" {
				if enc != "" {
					t.Fatalf("got a credential for %s, want none", tt.image)
				}
				return
			}
			ac := decode(t, enc)
			want := registry.AuthConfig{Username: tt.user, Password: tt.pass, IdentityToken: tt.token, ServerAddress: tt.server}
			if ac != want {
				t.Errorf("decoded %+v, want %+v", ac, want)
			}
		})
	}
	if _, err := c.RegistryAuth(ctx, "not an image!"); err == nil {
		t.Error("an invalid reference resolved without error")
	}
}

func TestFromDockerConfig_refusesBadInputWithoutQuotingIt(t *testing.T) {
	const secret = "hunter2-Zq"
	for name, cfg := range map[string]string{
		"not json":             `{"auths": {"r.example.com": {"password": "` + secret + `"` + secret,
		"wrong type":           `{"auths": {"r.example.com": {"password": ["` + secret + `"]}}}`,
		"bad base64":           `{"auths": {"r.example.com": {"auth": "` + secret + `!!"}}}`,
		"no colon":             `{"auths": {"r.example.com": {"auth": "` + base64.StdEncoding.EncodeToString([]byte(secret)) + `"}}}`,
		"password, no user":    `{"auths": {"r.example.com": {"password": "` + secret + `"}}}`,
		"duplicate hub":        `{"auths": {"docker.io": {"auth": "` + basic("a", secret) + `"}, "https://index.docker.io/v1/": {"auth": "` + basic("b", secret) + `"}}}`,
		"nothing usable":       `{"auths": {"r.example.com": {}}}`,
		"helpers only":         `{"auths": {}, "credHelpers": {"r.example.com": "ecr-login"}}`,
		"bad key":              `{"auths": {"https://": {"auth": "` + basic("a", secret) + `"}}}`,
		"empty":                ``,
		"not an object at all": `"` + secret + `"`,
	} {
		t.Run(name, func(t *testing.T) {
			c, err := FromDockerConfig([]byte(cfg))
			if err == nil {
				t.Fatalf("accepted: %v", c)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:1]+"'") {
				t.Errorf("error quotes the input: %v", err)
			}
		})
	}
	_, err := FromDockerConfig([]byte(`{"auths": {}, "credsStore": "pass"}`))
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "credential helpers") {
		t.Errorf("helper-only config: %v", err)
	}
}

func TestCredentials_neverPrintsTheCredential(t *testing.T) {
	const pass = "s3cr3t-pass"
	c, err := FromDockerConfig([]byte(`{"auths": {"ghcr.io": {"username": "gh", "password": "` + pass + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := c.RegistryAuth(context.Background(), "ghcr.io/a/b")
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("resolver", "auth", c)
	js, err := json.Marshal(map[string]any{"auth": c})
	if err != nil {
		t.Fatal(err)
	}
	var r Resolver = c
	for _, out := range []string{
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%v %+v", r, r),
		logs.String(), string(js),
	} {
		if strings.Contains(out, pass) || strings.Contains(out, enc) {
			t.Errorf("credential printed: %s", out)
		}
		if !strings.Contains(out, "ghcr.io") {
			t.Errorf("registry not named: %s", out)
		}
	}
}

func TestFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"auths": {"ghcr.io": {"auth": "`+basic("u", "p")+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Registries(); len(got) != 1 || got[0] != "ghcr.io" {
		t.Errorf("registries %v", got)
	}
	if _, err := FromFile(path + ".missing"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestCredentials_zeroAndNilResolveNothing(t *testing.T) {
	var nilC *Credentials
	for _, c := range []*Credentials{nilC, {}} {
		enc, err := c.RegistryAuth(context.Background(), "nginx")
		if err != nil || enc != "" {
			t.Errorf("%v: got %q, %v", c, enc, err)
		}
	}
}

func FuzzFromDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths": {"https://index.docker.io/v1/": {"auth": "` + basic("u", "p") + `"}}}`))
	f.Add([]byte(`{"auths": {"ghcr.io": {"username": "u", "password": "p"}, "x:1": {"identitytoken": "t"}}}`))
	f.Add([]byte(`{"auths": {"": {}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := FromDockerConfig(data)
		if err != nil {
			return
		}
		for _, r := range c.Registries() {
			enc, err := c.RegistryAuth(context.Background(), r+"/x/y")
			if err == nil && enc != "" {
				if _, err := authconfig.Decode(enc); err != nil {
					t.Fatalf("undecodable credential for %s: %v", r, err)
				}
			}
		}
	})
}

func TestFromFileRefusesANamedPipeInsteadOfBlockingOnIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := FromFile(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("FromFile(fifo) = %v, want a not-a-regular-file error", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the open so the goroutine ends with the test.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("FromFile blocked on a named pipe")
	}
}

func TestFromFileRefusesAnOversizedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, bytes.Repeat([]byte(" "), maxConfigFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FromFile(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("FromFile(oversized) = %v, want a size error", err)
	}
}
