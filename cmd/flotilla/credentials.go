package main

// Where `flotilla login` keeps what it got from the provider, and how the
// API commands use it when no token is given in the environment.

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

const envCredentialsFile = "FLOTILLA_CREDENTIALS_FILE"

// credentials is the file's content: one login per controller URL.
type credentials struct {
	Logins map[string]*login `json:"logins"`
}

// login is one controller's credential: the provider's ID token (the
// bearer the API verifies) and the refresh token that renews it. Both are
// secrets, so the file is 0600 in a 0700 directory.
type login struct {
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"clientID"`
	IDToken      string    `json:"idToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry"`
	User         string    `json:"user,omitempty"`
}

// defaultCredentialsFile is $FLOTILLA_CREDENTIALS_FILE, else
// credentials.json in the user's config directory ($XDG_CONFIG_HOME/flotilla
// or ~/.config/flotilla).
func defaultCredentialsFile() string {
	if f := os.Getenv(envCredentialsFile); f != "" {
		return f
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "flotilla", "credentials.json")
}

func readCredentials(path string) (*credentials, error) {
	c := &credentials{Logins: map[string]*login{}}
	if path == "" {
		return c, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the credentials file: %w", err)
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("credentials file %s: %w (remove it and run flotilla login)", path, err)
	}
	if c.Logins == nil {
		c.Logins = map[string]*login{}
	}
	return c, nil
}

// write replaces the file through a rename, so that a reader never sees it
// half written and its mode is 0600 from the start; with no login left the
// file is removed.
func (c *credentials) write(path string) error {
	if path == "" {
		return errors.New("no credentials file: set --credentials-file or " + envCredentialsFile)
	}
	if len(c.Logins) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the credentials file: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("credentials directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".credentials-*")
	if err != nil {
		return fmt.Errorf("write the credentials file: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write the credentials file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write the credentials file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the credentials file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write the credentials file: %w", err)
	}
	return nil
}

// serverKey is how a controller URL is filed: without a trailing slash.
func serverKey(server string) string { return strings.TrimRight(server, "/") }

// refreshMargin renews a login this long before its ID token expires, so
// that a request does not reach the controller with a token about to lapse.
const refreshMargin = 30 * time.Second

// errNoLogin: no login is stored for the server.
var errNoLogin = errors.New("no login")

// loginToken returns the stored ID token for server, renewed with the
// refresh token first when it has expired or is about to.
func loginToken(ctx context.Context, path, server string, now time.Time) (string, error) {
	creds, err := readCredentials(path)
	if err != nil {
		return "", err
	}
	l := creds.Logins[serverKey(server)]
	if l == nil {
		return "", errNoLogin
	}
	if now.Add(refreshMargin).Before(l.Expiry) {
		return l.IDToken, nil
	}
	if l.RefreshToken == "" {
		return "", fmt.Errorf("your login to %s has expired; run flotilla login", server)
	}
	if err := l.refresh(ctx); err != nil {
		return "", fmt.Errorf("your login to %s has expired and could not be renewed (%v); run flotilla login", server, err)
	}
	if err := creds.write(path); err != nil {
		return "", err
	}
	return l.IDToken, nil
}

// refresh trades the refresh token for a new ID token at the provider,
// which also asks the provider whether the user may still log in.
func (l *login) refresh(ctx context.Context) error {
	p, err := oidc.NewProvider(ctx, l.Issuer)
	if err != nil {
		return err
	}
	ep := p.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInParams
	cfg := oauth2.Config{ClientID: l.ClientID, Endpoint: ep}
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: l.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return err
	}
	return l.take(ctx, p, tok, "")
}

// take stores the ID token of tok after checking it is the provider's,
// issued to this client and, when nonce is set, to this login; and keeps a
// new refresh token when one came.
func (l *login) take(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, nonce string) error {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return errors.New("the provider returned no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: l.ClientID}).Verify(ctx, raw)
	if err != nil {
		return fmt.Errorf("the provider's ID token: %w", err)
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return errors.New("the provider's ID token does not carry this login's nonce")
	}
	var claims struct {
		Email string `json:"email"`
	}
	_ = idt.Claims(&claims)
	l.IDToken, l.Expiry, l.User = raw, idt.Expiry, claims.Email
	if l.User == "" {
		l.User = idt.Subject
	}
	if tok.RefreshToken != "" {
		l.RefreshToken = tok.RefreshToken
	}
	return nil
}
