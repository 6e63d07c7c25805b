package apitest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// OPPassword is the password of every user of StartOP.
const OPPassword = "correct-horse-battery"

// OPClientID and OPClientSecret are the one client StartOP registers.
const (
	OPClientID     = "flotilla"
	OPClientSecret = "client-secret"
)

// StartOP runs a real OpenID Connect provider on loopback for the test: the
// zitadel library's example OP with its in-memory storage, a confidential
// web client whose only redirect URI is redirectURL, and one user per key of
// groups (name = id = username, email NAME@example.com) whose ID tokens
// carry those groups in the "groups" claim. It returns the issuer URL.
func StartOP(t *testing.T, redirectURL string, groups map[string][]string) string {
	t.Helper()
	users := map[string]any{}
	for u := range groups {
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
	clients := map[string]*storage.Client{OPClientID: storage.WebClient(OPClientID, OPClientSecret, redirectURL)}
	st := groupStorage{Storage: storage.NewStorageWithClients(us, clients), groups: groups}
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
	groups map[string][]string // by user id
}

func (g groupStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := g.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	ui.AppendClaims("groups", g.groups[req.GetSubject()])
	return nil
}
