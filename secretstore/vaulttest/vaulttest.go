// Package vaulttest runs a real Vault server in dev mode on loopback for
// tests: the binary scripts/vault.sh builds from Vault's Go module, named
// by FLOTILLA_VAULT. With FLOTILLA_REQUIRE_VAULT=1 (as scripts/test.sh sets
// it) a missing binary fails the test instead of skipping it.
package vaulttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/flotilla-gitops/flotilla/internal/testproc"
)

// Server is a running dev-mode Vault.
type Server struct {
	// Addr is its URL, http://127.0.0.1:<port>.
	Addr string
	// RootToken is the dev server's root token.
	RootToken string
	// Client is a client logged in with the root token, for the test's
	// own setup (writes, policies, tokens).
	Client *vault.Client
	t      testing.TB
}

// Start runs $FLOTILLA_VAULT in dev mode on a free loopback port and waits
// until it answers as unsealed and active. It is stopped when the test
// ends; its log is shown if the test failed.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t)
}

// awsPlugin is the name scripts/vault.sh gives Vault's aws auth plugin in
// $FLOTILLA_VAULT_PLUGIN_DIR; the dev server registers it by that name.
const awsPlugin = "vault-plugin-auth-aws"

// StartWithAWSAuth is Start with Vault's aws auth method mounted at mount.
// The minimal server build has no aws method, so it runs as the external
// plugin scripts/vault.sh builds from the same Vault module, registered
// from $FLOTILLA_VAULT_PLUGIN_DIR; without it the test skips, or fails
// under FLOTILLA_REQUIRE_VAULT=1.
func StartWithAWSAuth(t testing.TB, mount string) *Server {
	t.Helper()
	dir := os.Getenv("FLOTILLA_VAULT_PLUGIN_DIR")
	if _, err := os.Stat(filepath.Join(dir, awsPlugin)); dir == "" || err != nil {
		if os.Getenv("FLOTILLA_REQUIRE_VAULT") == "1" {
			t.Fatalf("FLOTILLA_REQUIRE_VAULT=1 but FLOTILLA_VAULT_PLUGIN_DIR %q holds no %s (scripts/vault.sh builds it)", dir, awsPlugin)
		}
		t.Skipf("FLOTILLA_VAULT_PLUGIN_DIR holds no %s (eval \"$(scripts/vault.sh)\")", awsPlugin)
	}
	s := start(t, "-dev-plugin-dir="+dir)
	err := s.Client.Sys().EnableAuthWithOptionsWithContext(context.Background(), mount, &vault.EnableAuthOptions{Type: awsPlugin})
	if err != nil {
		t.Fatalf("enable the aws auth method at %s: %v", mount, err)
	}
	return s
}

func start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := os.Getenv("FLOTILLA_VAULT")
	if bin == "" {
		if os.Getenv("FLOTILLA_REQUIRE_VAULT") == "1" {
			t.Fatal("FLOTILLA_REQUIRE_VAULT=1 but FLOTILLA_VAULT names no vault binary (scripts/vault.sh builds one)")
		}
		t.Skip("FLOTILLA_VAULT names no vault binary (eval \"$(scripts/vault.sh)\")")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	listen := "127.0.0.1:" + strconv.Itoa(port)
	root := fmt.Sprintf("root-%d-%d", time.Now().UnixNano(), port)
	home := t.TempDir()
	cmd := exec.Command(bin, append([]string{"server", "-dev", "-dev-listen-address=" + listen, "-dev-root-token-id=" + root, "-dev-no-store-token"}, args...)...)
	// Dev mode writes the token helper's file under HOME; keep it in the
	// test's directory, and keep the caller's VAULT_* settings out.
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SKIP_SETCAP=1"}
	cmd.Dir = home
	// Vault runs plugins as its children, which outlive it when it is
	// killed: give it a process group and, once testproc's cleanup has
	// killed Vault (cleanups run last first), kill what is left of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	addr := "http://" + listen
	testproc.Start(t, "vault", cmd).WaitHTTP(t, addr+"/v1/sys/health", 90*time.Second, testproc.OK)
	cfg := vault.DefaultConfig()
	cfg.Address = addr
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(root)
	return &Server{Addr: addr, RootToken: root, Client: c, t: t}
}

// Mount enables a KV secrets engine of version (1 or 2) at path.
func (s *Server) Mount(path string, version int) {
	s.t.Helper()
	err := s.Client.Sys().MountWithContext(context.Background(), path, &vault.MountInput{
		Type: "kv", Options: map[string]string{"version": strconv.Itoa(version)},
	})
	if err != nil {
		s.t.Fatalf("mount kv v%d at %s: %v", version, path, err)
	}
}

// Write writes data at the API path p (for KV v2, its data/ path; the
// body is wrapped in "data" then) and returns the new version (0 for v1).
func (s *Server) Write(p string, v2 bool, data map[string]any) int {
	s.t.Helper()
	body := data
	if v2 {
		body = map[string]any{"data": data}
	}
	sec, err := s.Client.Logical().WriteWithContext(context.Background(), p, body)
	if err != nil {
		s.t.Fatalf("write %s: %v", p, err)
	}
	if v2 && sec != nil {
		n, _ := sec.Data["version"].(interface{ Int64() (int64, error) })
		if n != nil {
			v, _ := n.Int64()
			return int(v)
		}
	}
	return 0
}

// Policy writes an ACL policy.
func (s *Server) Policy(name, hcl string) {
	s.t.Helper()
	if err := s.Client.Sys().PutPolicyWithContext(context.Background(), name, hcl); err != nil {
		s.t.Fatalf("policy %s: %v", name, err)
	}
}

// Token creates a token with the policies and writes it to a file in dir,
// returning the token and the file.
func (s *Server) Token(dir string, policies ...string) (string, string) {
	s.t.Helper()
	sec, err := s.Client.Auth().Token().CreateWithContext(context.Background(), &vault.TokenCreateRequest{Policies: policies, TTL: "1h"})
	if err != nil {
		s.t.Fatalf("create token: %v", err)
	}
	f := filepath.Join(dir, "vault-token-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(f, []byte(sec.Auth.ClientToken+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return sec.Auth.ClientToken, f
}

// Revoke revokes a token.
func (s *Server) Revoke(token string) {
	s.t.Helper()
	if err := s.Client.Auth().Token().RevokeTreeWithContext(context.Background(), token); err != nil {
		s.t.Fatalf("revoke token: %v", err)
	}
}
