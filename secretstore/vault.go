package secretstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	vault "github.com/hashicorp/vault/api"

	"github.com/flotilla-gitops/flotilla/application"
)

// vaultReader reads a Vault (or OpenBao) KV mount with the official client.
type vaultReader struct {
	store  application.SecretStore
	client *vault.Client
	// awsCreds are the host's AWS credentials, for auth.aws only.
	awsCreds aws.CredentialsProvider

	mu      sync.Mutex
	token   string    // from a login (AppRole, JWT, AWS); "" with a token file
	renewAt time.Time // when a login token is taken again; zero: never
}

// requestTimeout bounds one request to the store, so a store that hangs
// fails the pass instead of holding it.
const requestTimeout = 15 * time.Second

func newVaultReader(s application.SecretStore) (reader, error) {
	v := s.Vault
	if v == nil {
		return nil, fmt.Errorf("store %q has no vault settings", s.Name)
	}
	cfg := vault.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("store %q: %w", s.Name, cfg.Error)
	}
	// The controller's own VAULT_* environment must not steer a store the
	// applications file defines: every setting DefaultConfig read from it
	// is set again here (TLS, retries, rate limit, SRV lookup), and the
	// token, namespace and headers NewClient read are cleared below.
	cfg.Address = v.Address
	cfg.Timeout = requestTimeout
	cfg.MaxRetries = 1
	cfg.Limiter = nil
	cfg.SRVLookup = false
	if tr, ok := cfg.HttpClient.Transport.(*http.Transport); ok {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if err := cfg.ConfigureTLS(&vault.TLSConfig{CACert: v.CACertFile}); err != nil {
		return nil, fmt.Errorf("store %q: caCertFile: %w", s.Name, err)
	}
	c, err := vault.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w", s.Name, err)
	}
	c.ClearToken()
	c.SetHeaders(http.Header{})
	if v.Namespace != "" {
		c.SetNamespace(v.Namespace)
	} else {
		c.ClearNamespace()
	}
	r := &vaultReader{store: s, client: c}
	if v.Auth.AWS != nil {
		if r.awsCreds, err = awsChain(v.Auth.AWS); err != nil {
			return nil, fmt.Errorf("store %q: %w", s.Name, err)
		}
	}
	return r, nil
}

func (r *vaultReader) read(ctx context.Context, path, key string) (Value, error) {
	return r.readVersion(ctx, path, key, 0)
}

// readAt reads a past KV v2 version for a rollback (see Pinned).
func (r *vaultReader) readAt(ctx context.Context, path, key string, at Pin) (Value, error) {
	if r.store.Vault.KVVersion != 2 || at.Version <= 0 {
		return Value{}, errNoPastVersions
	}
	v, err := r.readVersion(ctx, path, key, at.Version)
	if err == nil && v.Version != at.Version {
		return Value{}, fmt.Errorf("%w: asked for version %d, the store answered version %d", ErrNoValue, at.Version, v.Version)
	}
	return v, err
}

// readVersion reads version n of the entry, the current one when n is 0.
func (r *vaultReader) readVersion(ctx context.Context, path, key string, n int) (Value, error) {
	if key == "" {
		return Value{}, fmt.Errorf("%w: a Vault entry is a map; name one of its keys", ErrNoValue)
	}
	sec, err := r.do(ctx, func(c *vault.Client) (*vault.Secret, error) {
		if n > 0 {
			return c.Logical().ReadWithDataWithContext(ctx, path, map[string][]string{"version": {strconv.Itoa(n)}})
		}
		return c.Logical().ReadWithContext(ctx, path)
	})
	if err != nil {
		return Value{}, err
	}
	if sec == nil || sec.Data == nil {
		return Value{}, fmt.Errorf("%w: the store has no entry at this path", ErrNoValue)
	}
	data, version, created := sec.Data, 0, ""
	if r.store.Vault.KVVersion == 2 {
		d, _ := sec.Data["data"].(map[string]any)
		if d == nil {
			if n > 0 {
				return Value{}, fmt.Errorf("%w: version %d of the entry is deleted or destroyed", ErrNoValue, n)
			}
			return Value{}, fmt.Errorf("%w: the entry's current version is deleted or destroyed", ErrNoValue)
		}
		data = d
		if md, ok := sec.Data["metadata"].(map[string]any); ok {
			version = number(md["version"])
			created, _ = md["created_time"].(string)
		}
	}
	raw, ok := data[key]
	if !ok {
		return Value{}, fmt.Errorf("%w: the entry has no key %q", ErrNoValue, key)
	}
	s, ok := raw.(string)
	if !ok {
		// The type only: the value may be secret whatever its type.
		return Value{}, fmt.Errorf("%w: key %q holds a %T, not a string", ErrNoValue, key, raw)
	}
	return Value{Data: []byte(s), Version: version, Entry: created}, nil
}

// version reads the entry's metadata: the current version and when it was
// written, which tells a version rewritten after a metadata delete (the
// numbers start again at 1) from the one read before.
func (r *vaultReader) version(ctx context.Context, path string) (Value, bool, error) {
	if r.store.Vault.KVVersion != 2 {
		return Value{}, false, nil
	}
	mount := r.store.Vault.Mount
	meta := mount + "/metadata/" + strings.TrimPrefix(path, mount+"/data/")
	sec, err := r.do(ctx, func(c *vault.Client) (*vault.Secret, error) { return c.Logical().ReadWithContext(ctx, meta) })
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusForbidden {
		// A policy that grants data/ but not metadata/: read the value.
		return Value{}, false, nil
	}
	if err != nil {
		return Value{}, false, err
	}
	if sec == nil || sec.Data == nil {
		return Value{}, false, nil
	}
	v := number(sec.Data["current_version"])
	var created string
	if vs, ok := sec.Data["versions"].(map[string]any); ok {
		if cur, ok := vs[strconv.Itoa(v)].(map[string]any); ok {
			created, _ = cur["created_time"].(string)
		}
	}
	return Value{Version: v, Entry: created}, v > 0, nil
}

// do runs one request with the store's credentials, logging in again once
// when a login token was refused (it may have expired or been revoked).
func (r *vaultReader) do(ctx context.Context, req func(*vault.Client) (*vault.Secret, error)) (*vault.Secret, error) {
	for attempt := 0; ; attempt++ {
		tok, login, err := r.credential(ctx)
		if err != nil {
			return nil, err
		}
		c, err := r.client.Clone()
		if err != nil {
			return nil, err
		}
		if ns := r.client.Namespace(); ns != "" {
			c.SetNamespace(ns)
		}
		c.SetToken(tok)
		sec, err := req(c)
		if err == nil {
			return sec, nil
		}
		var re *vault.ResponseError
		if login && attempt == 0 && errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
			r.mu.Lock()
			r.token = ""
			r.mu.Unlock()
			continue
		}
		return nil, storeError(err)
	}
}

// credential returns the token to send: the token file's content, read
// every time so a rotated token is picked up, or a login token, logging in
// when there is none or it is due for renewal. login reports the latter.
// Every login reads its credentials anew (files, or for auth.aws the AWS
// chain's current keys, signed afresh), so rotated ones are used.
func (r *vaultReader) credential(ctx context.Context) (tok string, login bool, err error) {
	a := r.store.Vault.Auth
	if a.TokenFile != "" {
		t, err := readCredential(a.TokenFile, "auth.tokenFile")
		return t, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token != "" && (r.renewAt.IsZero() || time.Now().Before(r.renewAt)) {
		return r.token, true, nil
	}
	var mount string
	body := map[string]any{}
	switch {
	case a.AppRole != nil:
		mount = a.AppRole.Mount
		if body["role_id"], err = readCredential(a.AppRole.RoleIDFile, "auth.appRole.roleIDFile"); err != nil {
			return "", true, err
		}
		if body["secret_id"], err = readCredential(a.AppRole.SecretIDFile, "auth.appRole.secretIDFile"); err != nil {
			return "", true, err
		}
	case a.JWT != nil:
		mount = a.JWT.Mount
		body["role"] = a.JWT.Role
		if body["jwt"], err = readCredential(a.JWT.JWTFile, "auth.jwt.jwtFile"); err != nil {
			return "", true, err
		}
	case a.AWS != nil:
		mount = a.AWS.Mount
		if body, err = awsLoginBody(ctx, a.AWS, r.awsCreds); err != nil {
			return "", true, err
		}
	default:
		return "", true, fmt.Errorf("%w: no auth configured", ErrUnavailable)
	}
	c, err := r.client.Clone()
	if err != nil {
		return "", true, err
	}
	if ns := r.client.Namespace(); ns != "" {
		c.SetNamespace(ns)
	}
	c.ClearToken()
	sec, err := c.Logical().WriteWithContext(ctx, "auth/"+mount+"/login", body)
	if err != nil {
		return "", true, fmt.Errorf("login at auth/%s: %w", mount, storeError(err))
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return "", true, fmt.Errorf("%w: login at auth/%s gave no token", ErrUnavailable, mount)
	}
	r.token = sec.Auth.ClientToken
	r.renewAt = time.Time{}
	if ttl := time.Duration(sec.Auth.LeaseDuration) * time.Second; ttl > 0 {
		r.renewAt = time.Now().Add(ttl * 4 / 5)
	}
	return r.token, true, nil
}

// readCredential reads a credential file; its content never appears in an
// error.
func readCredential(file, field string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%w: %s %s: %v", ErrUnavailable, field, file, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%w: %s %s is empty", ErrUnavailable, field, file)
	}
	return t, nil
}

// storeError rewrites a client error into one that names the status and
// Vault's own messages, never a response body it could not parse.
func storeError(err error) error {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		msg := "no message"
		if !re.RawError && len(re.Errors) > 0 {
			msg = strings.Join(re.Errors, "; ")
		}
		return &statusError{code: re.StatusCode, method: re.HTTPMethod, msg: msg}
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoValue) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// number reads a JSON number the client decoded (json.Number or float64).
func number(v any) int {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case float64:
		return int(n)
	case int:
		return n
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

// statusError is a store's refusal: its HTTP status and its messages.
type statusError struct {
	code        int
	method, msg string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.method, e.code, e.msg)
}

// Unwrap classifies the refusal: a 404 is a missing value, anything else
// a store the controller cannot use right now.
func (e *statusError) Unwrap() error {
	if e.code == http.StatusNotFound {
		return ErrNoValue
	}
	return ErrUnavailable
}
