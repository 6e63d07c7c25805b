package daemon

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
)

// SSOOptions are the controller's single sign-on flags. The client secret
// is read from a file, never taken from argv, where ps shows it.
type SSOOptions struct {
	Issuer, ClientID, SecretFile, RedirectURL, GroupsClaim string
	CLIClientID                                            string
	AdminGroups, ViewerGroups, Scopes                      []string
	SessionTTL                                             time.Duration
}

// build returns nil when single sign-on is not configured.
func (o *SSOOptions) build() (*api.SSO, error) {
	if o.Issuer == "" {
		if o.ClientID != "" || o.RedirectURL != "" || o.SecretFile != "" || o.CLIClientID != "" {
			return nil, errors.New("--oidc-client-id, --oidc-cli-client-id, --oidc-redirect-url and --oidc-client-secret-file need --oidc-issuer")
		}
		return nil, nil
	}
	if o.ClientID == "" || o.RedirectURL == "" {
		return nil, errors.New("--oidc-issuer needs --oidc-client-id and --oidc-redirect-url")
	}
	var secret string
	if o.SecretFile != "" {
		b, err := os.ReadFile(o.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, fmt.Errorf("--oidc-client-secret-file names an empty file (%s)", o.SecretFile)
		}
	}
	sso, err := api.NewSSO(api.SSOConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret,
		RedirectURL: o.RedirectURL, GroupsClaim: o.GroupsClaim, AdminGroups: o.AdminGroups,
		ViewerGroups: o.ViewerGroups, Scopes: o.Scopes, SessionTTL: o.SessionTTL, CLIClientID: o.CLIClientID})
	if err != nil {
		return nil, fmt.Errorf("--oidc-*: %w", err)
	}
	return sso, nil
}
