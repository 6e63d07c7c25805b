package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/api"
)

// ssoOptions are the controller's single sign-on flags. The client secret
// is read from a file, never taken from argv, where ps shows it.
type ssoOptions struct {
	issuer, clientID, secretFile, redirectURL, groupsClaim string
	cliClientID                                            string
	adminGroups, viewerGroups, scopes                      []string
	sessionTTL                                             time.Duration
}

func (o *ssoOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.issuer, "oidc-issuer", "", "OpenID Connect issuer URL; enables console login through it at /auth/login")
	f.StringVar(&o.clientID, "oidc-client-id", "", "the controller's client id at the OIDC provider")
	f.StringVar(&o.cliClientID, "oidc-cli-client-id", "", "public client id at the OIDC provider that flotilla login uses (device or loopback browser flow); enables CLI login")
	f.StringVar(&o.secretFile, "oidc-client-secret-file", "", "file holding the client secret (none for a public client)")
	f.StringVar(&o.redirectURL, "oidc-redirect-url", "", "this controller's callback as the browser reaches it, registered at the provider: https://HOST/auth/callback")
	f.StringVar(&o.groupsClaim, "oidc-groups-claim", "groups", "ID token claim that lists the user's groups, matched against the projects' role bindings (groups)")
	f.StringSliceVar(&o.adminGroups, "oidc-admin-groups", nil, "groups whose members are global admins, as with the admin token")
	f.StringSliceVar(&o.viewerGroups, "oidc-viewer-groups", nil, "groups whose members are global viewers, as with the read token")
	f.StringSliceVar(&o.scopes, "oidc-scopes", []string{"openid", "profile", "email"}, "scopes requested at login (add groups for Dex)")
	f.DurationVar(&o.sessionTTL, "oidc-session-ttl", api.DefaultSessionTTL, "how long a console session lasts after login")
}

// build returns nil when single sign-on is not configured.
func (o *ssoOptions) build() (*api.SSO, error) {
	if o.issuer == "" {
		if o.clientID != "" || o.redirectURL != "" || o.secretFile != "" || o.cliClientID != "" {
			return nil, errors.New("--oidc-client-id, --oidc-cli-client-id, --oidc-redirect-url and --oidc-client-secret-file need --oidc-issuer")
		}
		return nil, nil
	}
	if o.clientID == "" || o.redirectURL == "" {
		return nil, errors.New("--oidc-issuer needs --oidc-client-id and --oidc-redirect-url")
	}
	var secret string
	if o.secretFile != "" {
		b, err := os.ReadFile(o.secretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, fmt.Errorf("--oidc-client-secret-file names an empty file (%s)", o.secretFile)
		}
	}
	sso, err := api.NewSSO(api.SSOConfig{Issuer: o.issuer, ClientID: o.clientID, ClientSecret: secret,
		RedirectURL: o.redirectURL, GroupsClaim: o.groupsClaim, AdminGroups: o.adminGroups,
		ViewerGroups: o.viewerGroups, Scopes: o.scopes, SessionTTL: o.sessionTTL, CLIClientID: o.cliClientID})
	if err != nil {
		return nil, fmt.Errorf("--oidc-*: %w", err)
	}
	return sso, nil
}
