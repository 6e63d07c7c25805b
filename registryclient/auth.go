package registryclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// authorize answers a 401's challenge: Basic sends the credential, Bearer
// asks the realm (the registry's token service) for a token of scope, with
// the credential when there is one and anonymously otherwise. It returns
// the Authorization header value and when to stop reusing it.
func (c *Client) authorize(ctx context.Context, r repo, challenge, scope string, cred Credential) (string, time.Time, error) {
	kind, params := parseChallenge(challenge)
	now := c.opts.Now()
	switch kind {
	case "basic":
		if cred.Username == "" && cred.Password == "" {
			return "", time.Time{}, fmt.Errorf("%w: the registry wants a user name and password and the application has none for %s", ErrUnauthorized, r.host)
		}
		v := base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Password))
		return "Basic " + v, now.Add(24 * time.Hour), nil
	case "bearer":
	default:
		return "", time.Time{}, fmt.Errorf("%w: unsupported challenge %q", ErrUnauthorized, kind)
	}
	if cred.RegistryToken != "" {
		return "Bearer " + cred.RegistryToken, now.Add(time.Minute), nil
	}
	realm, err := url.Parse(params["realm"])
	if err != nil || realm.Host == "" || (realm.Scheme != "https" && !(realm.Scheme == "http" && c.plain(realm.Host))) {
		// A credential goes only to an https realm (or to a loopback one):
		// a registry must not send it over plain HTTP elsewhere.
		return "", time.Time{}, fmt.Errorf("%w: token realm %q is not an https URL", ErrUnauthorized, params["realm"])
	}
	q := realm.Query()
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	q.Set("scope", scope)
	var req *http.Request
	if cred.IdentityToken != "" {
		// OAuth2 refresh token flow.
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {cred.IdentityToken}, "service": {params["service"]}, "scope": {scope}, "client_id": {"flotilla"}}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, realm.String(), strings.NewReader(form.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		realm.RawQuery = q.Encode()
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
		if err == nil && (cred.Username != "" || cred.Password != "") {
			req.SetBasicAuth(cred.Username, cred.Password)
		}
	}
	if err != nil {
		return "", time.Time{}, err
	}
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		c.fail(r.host, "token service unreachable", 0)
		return "", time.Time{}, fmt.Errorf("token service %s: unreachable", realm.Host)
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		switch {
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			c.fail(r.host, "token service "+resp.Status, retryAfter(resp.Header, now))
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			c.refuse(r, cred, "token service "+resp.Status)
		}
		return "", time.Time{}, fmt.Errorf("%w: token service %s answered %s", ErrUnauthorized, realm.Host, resp.Status)
	}
	var body struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&body); err != nil {
		return "", time.Time{}, fmt.Errorf("token service %s: unreadable answer", realm.Host)
	}
	tok := body.Token
	if tok == "" {
		tok = body.AccessToken
	}
	if tok == "" {
		return "", time.Time{}, fmt.Errorf("%w: token service %s sent no token", ErrUnauthorized, realm.Host)
	}
	// The spec's default lifetime is 60s; reuse a little less than given.
	life := time.Duration(max(body.ExpiresIn, 60)) * time.Second
	return "Bearer " + tok, now.Add(life - life/10), nil
}

// parseChallenge splits `Bearer realm="…",service="…",scope="…"`.
func parseChallenge(h string) (string, map[string]string) {
	kind, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string]string{}
	for rest != "" {
		rest = strings.TrimLeft(rest, " ,")
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if strings.HasPrefix(v, `"`) {
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				params[k] = v[1:]
				break
			}
			params[k] = v[1 : end+1]
			rest = v[end+2:]
		} else {
			val, after, _ := strings.Cut(v, ",")
			params[k] = strings.TrimSpace(val)
			rest = after
		}
	}
	return strings.ToLower(kind), params
}
