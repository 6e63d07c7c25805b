package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/oauth2"

	"github.com/flotilla-gitops/flotilla/api"
)

// loginOptions are the flags of `flotilla login` and `flotilla logout`.
type loginOptions struct {
	Server          string
	CredentialsFile string
	// Timeout bounds the whole login, the user's time at the provider
	// included.
	Timeout time.Duration
	// Flow is device, browser (a loopback redirect) or auto: the device
	// flow where the provider offers it, else the browser.
	Flow string
	// Open starts the system's browser in the browser flow.
	Open bool
}

func (o *loginOptions) addFlags(f *pflag.FlagSet) {
	server := os.Getenv(envServer)
	if server == "" {
		server = defaultServer
	}
	f.StringVar(&o.Server, "server", server, "controller API URL (env "+envServer+")")
	f.StringVar(&o.CredentialsFile, "credentials-file", defaultCredentialsFile(), "where the logins are kept (env "+envCredentialsFile+")")
}

func newLoginCmd() *cobra.Command {
	o := &loginOptions{}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in to a controller through its single sign-on provider",
		Long: `Login logs you in at the controller's OpenID Connect provider. With the device
flow it prints an address and a code, you open the address in any browser, log in
and confirm the code; with the browser flow (--flow browser, or where the provider
has no device flow) it opens the provider's login page and receives the answer on
127.0.0.1. The login is kept in the credentials file (0600) for the server. Every API command then uses it when FLOTILLA_TOKEN and FLOTILLA_TOKEN_FILE
are unset, renewing it with the provider's refresh token when it expires.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.Timeout)
			defer cancel()
			return runLogin(ctx, *o, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd.Flags())
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up when the login is not confirmed within this time")
	cmd.Flags().StringVar(&o.Flow, "flow", "auto", "device (a code to confirm in any browser), browser (a callback on 127.0.0.1 on this machine), or auto: device where the provider offers it")
	cmd.Flags().BoolVar(&o.Open, "open", true, "in the browser flow, start the system's browser (otherwise only print the address)")
	return cmd
}

func newLogoutCmd() *cobra.Command {
	o := &loginOptions{}
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "End the login of flotilla login and remove it from the credentials file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			return runLogout(ctx, *o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

// cliLogin asks the controller where and as whom the CLI logs in.
func cliLogin(ctx context.Context, server string) (api.CLILogin, error) {
	var out api.CLILogin
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, serverKey(server)+"/auth/cli", nil)
	if err != nil {
		return out, usageError{fmt.Errorf("--server: %w", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("reach the controller: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return out, fmt.Errorf("the controller at %s offers no CLI login (it needs --oidc-issuer and --oidc-cli-client-id); use a token in %s instead", server, envTokenFile)
	case resp.StatusCode != http.StatusOK:
		return out, fmt.Errorf("the controller's login settings: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&out); err != nil || out.Issuer == "" || out.ClientID == "" {
		return out, fmt.Errorf("the controller's login settings are unreadable (%v)", err)
	}
	return out, nil
}

func runLogin(ctx context.Context, o loginOptions, w io.Writer) error {
	switch o.Flow {
	case "auto", "device", "browser":
	default:
		return usageError{fmt.Errorf("--flow %q: use device, browser or auto", o.Flow)}
	}
	info, err := cliLogin(ctx, o.Server)
	if err != nil {
		return err
	}
	p, err := oidc.NewProvider(ctx, info.Issuer)
	if err != nil {
		return fmt.Errorf("reach the identity provider: %w", err)
	}
	ep := p.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInParams // a public client: its id in the form, no secret
	cfg := oauth2.Config{ClientID: info.ClientID, Endpoint: ep, Scopes: info.Scopes}
	var tok *oauth2.Token
	var nonce string
	switch {
	case o.Flow == "device" || (o.Flow == "auto" && ep.DeviceAuthURL != ""):
		if ep.DeviceAuthURL == "" {
			return fmt.Errorf("%w (%s); use --flow browser", errNoDeviceFlow, info.Issuer)
		}
		tok, err = deviceLogin(ctx, cfg, w)
	default:
		tok, nonce, err = browserLogin(ctx, cfg, o.Open, w)
	}
	if err != nil {
		return err
	}
	l := &login{Issuer: info.Issuer, ClientID: info.ClientID}
	if err := l.take(ctx, p, tok, nonce); err != nil {
		return err
	}
	creds, err := readCredentials(o.CredentialsFile)
	if err != nil {
		return err
	}
	creds.Logins[serverKey(o.Server)] = l
	if err := creds.write(o.CredentialsFile); err != nil {
		return err
	}
	renew := "it cannot be renewed: the provider gave no refresh token"
	if l.RefreshToken != "" {
		renew = "it is renewed as needed"
	}
	if _, err = fmt.Fprintf(w, "Logged in to %s as %s (until %s; %s).\n", serverKey(o.Server), l.User, l.Expiry.Local().Format(time.RFC3339), renew); err != nil {
		return err
	}
	if os.Getenv(envToken) != "" || os.Getenv(envTokenFile) != "" {
		_, err = fmt.Fprintf(w, "Note: %s or %s is set, and a token in the environment is used instead of this login.\n", envToken, envTokenFile)
	}
	return err
}

// deviceLogin is the device authorization flow (RFC 8628): the user
// confirms a code at the provider, in any browser, while the CLI polls.
func deviceLogin(ctx context.Context, cfg oauth2.Config, w io.Writer) (*oauth2.Token, error) {
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("start the login at the identity provider: %w", err)
	}
	fmt.Fprintf(w, "To log in, open %s in a browser and enter the code %s\n", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(w, "(or open %s)\n", da.VerificationURIComplete)
	}
	fmt.Fprintln(w, "Waiting for the login to be confirmed...")
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		return nil, fmt.Errorf("the login was not completed: %w", err)
	}
	return tok, nil
}

// runLogout forgets the login for the server, after telling the controller
// to refuse its ID token and the provider to revoke its refresh token.
// Either may fail (the controller may be down); the login is removed
// anyway and the failure reported.
func runLogout(ctx context.Context, o loginOptions, w, stderr io.Writer) error {
	creds, err := readCredentials(o.CredentialsFile)
	if err != nil {
		return err
	}
	key := serverKey(o.Server)
	l := creds.Logins[key]
	if l == nil {
		_, err := fmt.Fprintf(w, "Not logged in to %s.\n", key)
		return err
	}
	if err := endAtController(ctx, key, l.IDToken); err != nil {
		fmt.Fprintf(stderr, "flotilla: the controller was not told (%v); the login stays valid there until %s\n", err, l.Expiry.Local().Format(time.RFC3339))
	}
	if err := l.revokeRefreshToken(ctx); err != nil {
		fmt.Fprintf(stderr, "flotilla: the refresh token was not revoked at the provider: %v\n", err)
	}
	delete(creds.Logins, key)
	if err := creds.write(o.CredentialsFile); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "Logged out of %s.\n", key)
	return err
}

func endAtController(ctx context.Context, server, idToken string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/auth/logout", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+idToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.RequestHeader, "1")
	return doOK(req)
}

// revokeRefreshToken revokes the refresh token (RFC 7009) where the
// provider has a revocation endpoint.
func (l *login) revokeRefreshToken(ctx context.Context) error {
	if l.RefreshToken == "" {
		return nil
	}
	p, err := oidc.NewProvider(ctx, l.Issuer)
	if err != nil {
		return err
	}
	var meta struct {
		Revocation string `json:"revocation_endpoint"`
	}
	if err := p.Claims(&meta); err != nil || meta.Revocation == "" {
		return errors.New("the provider has no revocation endpoint; the refresh token lapses on its own")
	}
	form := url.Values{"token": {l.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {l.ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, meta.Revocation, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return doOK(req)
}

// doOK sends req and wants a 2xx answer, whose body it does not need.
func doOK(req *http.Request) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errors.New(resp.Status)
	}
	return nil
}
