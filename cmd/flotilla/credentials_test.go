package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCredentials_writtenOwnerOnlyOnePerServerAndRemovedWithTheLastLogin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", "flotilla", "credentials.json")
	c := &credentials{Logins: map[string]*login{
		"https://a.example.com": {IDToken: "id-a", Expiry: time.Now().Add(time.Hour)},
		"https://b.example.com": {IDToken: "id-b", Expiry: time.Now().Add(time.Hour)},
	}}
	if err := c.write(path); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	// A trailing slash on --server names the same login.
	tok, err := loginToken(t.Context(), path, "https://b.example.com/", time.Now())
	if err != nil || tok != "id-b" {
		t.Errorf("login for b: %q, %v", tok, err)
	}
	if _, err := loginToken(t.Context(), path, "https://c.example.com", time.Now()); !errors.Is(err, errNoLogin) {
		t.Errorf("a server without a login: %v, want errNoLogin", err)
	}
	delete(c.Logins, "https://a.example.com")
	delete(c.Logins, "https://b.example.com")
	if err := c.write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file outlived its last login: %v", err)
	}
}

func TestCredentials_anExpiredLoginWithoutARefreshTokenSaysToLogInAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.json")
	c := &credentials{Logins: map[string]*login{"https://a.example.com": {IDToken: "id-a", Expiry: time.Now().Add(10 * time.Second)}}}
	if err := c.write(path); err != nil {
		t.Fatal(err)
	}
	// Within the renewal margin counts as expired.
	if _, err := loginToken(t.Context(), path, "https://a.example.com", time.Now()); err == nil || !strings.Contains(err.Error(), "run flotilla login") {
		t.Errorf("err = %v", err)
	}
}

func TestCredentials_aDamagedFileIsAnErrorNamingItAndTheWayOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loginToken(t.Context(), path, "https://a.example.com", time.Now()); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "flotilla login") {
		t.Errorf("err = %v", err)
	}
}
