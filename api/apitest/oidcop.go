package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// OPPassword is the password of every user of StartOP.
const OPPassword = "correct-horse-battery"

// OPClientID and OPClientSecret are the web client StartOP registers;
// OPCLIClientID is the public client of `flotilla login`.
const (
	OPClientID     = "flotilla"
	OPClientSecret = "client-secret"
	OPCLIClientID  = "flotilla-cli"
	// OPCLIRedirectURL is the CLI client's loopback redirect; the
	// provider accepts it on any port (RFC 8252).
	OPCLIRedirectURL = "http://127.0.0.1/callback"
)

// OPOptions configure StartOPWith.
type OPOptions struct {
	// RedirectURL is the web client's only redirect URI.
	RedirectURL string
	// Groups has one user per key (name = id = username, email
	// NAME@example.com) whose ID tokens carry its groups.
	Groups map[string][]string
	// CLIIDTokenLifetime is how long the CLI client's ID tokens last.
	// Default one hour.
	CLIIDTokenLifetime time.Duration
}

// StartOP runs a real OpenID Connect provider on loopback for the test: the
// zitadel library's example OP with its in-memory storage, a confidential
// web client whose only redirect URI is redirectURL, and one user per key of
// groups (name = id = username, email NAME@example.com) whose ID tokens
// carry those groups in the "groups" claim. It returns the issuer URL.
func StartOP(t *testing.T, redirectURL string, groups map[string][]string) string {
	return StartOPWith(t, OPOptions{RedirectURL: redirectURL, Groups: groups})
}

// StartOPWith is StartOP with a public client OPCLIClientID as well, made
// for `flotilla login`: the device flow with refresh tokens, and the email
// in its ID tokens as most providers put it there.
func StartOPWith(t *testing.T, o OPOptions) string {
	t.Helper()
	users := map[string]any{}
	for u := range o.Groups {
		users[u] = map[string]any{"ID": u, "Username": u, "Password": OPPassword, "Email": u + "@example.com",
			"EmailVerified": true, "PreferredLanguage": "en"}
	}
	b, err := json.Marshal(users)
	if err != nil {
		t.Fatal(err)
	}
	usersFile := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(usersFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	us, err := storage.StoreFromFile(usersFile)
	if err != nil {
		t.Fatal(err)
	}
	if o.CLIIDTokenLifetime <= 0 {
		o.CLIIDTokenLifetime = time.Hour
	}
	clients := map[string]*storage.Client{
		OPClientID:    storage.WebClient(OPClientID, OPClientSecret, o.RedirectURL),
		OPCLIClientID: storage.NativeClient(OPCLIClientID, OPCLIRedirectURL),
	}
	st := groupStorage{Storage: storage.NewStorageWithClients(us, clients), groups: o.Groups, cliLifetime: o.CLIIDTokenLifetime}
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	srv.Config.Handler = exampleop.SetupServer(issuer, st, nil, false)
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}

// groupStorage is the example storage with a groups claim in every ID
// token, since the example has no groups of its own.
type groupStorage struct {
	*storage.Storage
	groups      map[string][]string // by user id
	cliLifetime time.Duration
}

func (g groupStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := g.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	ui.AppendClaims("groups", g.groups[req.GetSubject()])
	return nil
}

func (g groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := g.Storage.GetClientByClientID(ctx, id)
	if err != nil || id != OPCLIClientID {
		return c, err
	}
	return cliClient{Client: c, lifetime: g.cliLifetime}, nil
}

// CreateAccessAndRefreshTokens files the tokens of a device flow under
// the client that asked, which the example storage leaves empty (and then
// refuses to refresh them for that client).
func (g groupStorage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	if d, ok := req.(*op.DeviceAuthorizationState); ok {
		req = &storage.AuthRequest{ApplicationID: d.ClientID, UserID: d.Subject, Scopes: d.Scopes}
	}
	return g.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
}

// cliClient is the example's native client with the device grant, the
// userinfo claims (email) in its ID tokens, and their lifetime set.
type cliClient struct {
	op.Client
	lifetime time.Duration
}

func (c cliClient) GrantTypes() []zoidc.GrantType {
	return []zoidc.GrantType{zoidc.GrantTypeCode, zoidc.GrantTypeRefreshToken, zoidc.GrantTypeDeviceCode}
}
func (c cliClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c cliClient) IDTokenLifetime() time.Duration       { return c.lifetime }

// ApproveDevice plays the user at the provider's device page: it logs in
// as user with OPPassword and confirms userCode.
func ApproveDevice(ctx context.Context, issuer, userCode, user string) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	post := func(path string, form url.Values) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, issuer+path, strings.NewReader(form.Encode()))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != path {
			return "", fmt.Errorf("POST %s: %d at %s: %s", path, resp.StatusCode, resp.Request.URL, b)
		}
		return string(b), nil
	}
	if _, err := post("/device/login", url.Values{"user_code": {userCode}, "username": {user}, "password": {OPPassword}}); err != nil {
		return err
	}
	b, err := post("/device/confirm", url.Values{"action": {"allowed"}})
	if err != nil {
		return err
	}
	if !strings.Contains(b, "allowed") {
		return fmt.Errorf("the device was not allowed: %s", b)
	}
	return nil
}
