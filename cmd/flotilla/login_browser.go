package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// browserLogin is the authorization code flow with PKCE and a loopback
// redirect (RFC 8252): a callback server on 127.0.0.1 at a port the system
// picks, which the provider must accept for a native client on any port.
// It returns the provider's tokens and the nonce the ID token must carry.
func browserLogin(ctx context.Context, cfg oauth2.Config, open bool, w io.Writer) (*oauth2.Token, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("listen for the login's callback: %w", err)
	}
	cfg.RedirectURL = fmt.Sprintf("http://%s/callback", ln.Addr())
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))

	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(rw, r)
			return
		}
		q := r.URL.Query()
		// A request without the state this login made is not the
		// provider's answer; it neither ends the login nor is exchanged.
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(rw, "this is not the answer to the login in progress", http.StatusBadRequest)
			return
		}
		var res result
		if e := q.Get("error"); e != "" {
			res.err = fmt.Errorf("the identity provider refused the login: %s %s", e, q.Get("error_description"))
		} else {
			res.tok, res.err = cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		}
		if res.err != nil {
			http.Error(rw, "Login failed: "+res.err.Error(), http.StatusUnauthorized)
		} else {
			fmt.Fprintln(rw, "Logged in to flotilla. You may close this tab.")
		}
		select {
		case done <- res:
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		// Shutdown, not Close: the browser's answer page is still being
		// written when the result arrives.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	fmt.Fprintf(w, "To log in, open this address in a browser on this machine:\n%s\n", authURL)
	if open {
		if err := openBrowser(authURL); err != nil {
			fmt.Fprintf(w, "(could not start a browser: %v)\n", err)
		}
	}
	fmt.Fprintln(w, "Waiting for the login to be confirmed...")
	select {
	case res := <-done:
		return res.tok, nonce, res.err
	case <-ctx.Done():
		return nil, "", fmt.Errorf("the login was not completed: %w", ctx.Err())
	}
}

// openBrowser starts the system's browser on u without waiting for it.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// errNoDeviceFlow: the provider offers no device authorization endpoint.
var errNoDeviceFlow = errors.New("the identity provider offers no device authorization endpoint")
