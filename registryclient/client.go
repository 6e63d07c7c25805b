// Package registryclient asks container registries, over the Docker
// Registry HTTP API v2 (the OCI distribution API), which tags an image
// repository has and which digest a tag points at. Image automation calls
// it before imagepolicy decides; it is the only part of Flotilla that talks
// to registries.
//
// It is polite by construction: one answer per image, credential and
// interval is shared by every caller (however many services or
// applications use the image), concurrent askers wait for the one request
// in flight, revalidation sends the last ETag or digest, and a registry
// that answers 429, fails, or reports through Docker Hub's RateLimit
// headers that its budget is spent is left alone until the time it asked
// for (or an exponential backoff) has passed. A credential a registry
// refuses is held back the same way, but only for the repository it was
// refused for: one application's wrong password never stops another's
// questions.
package registryclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"golang.org/x/sync/singleflight"
)

// Sentinels; errors wrap them.
var (
	// ErrNotFound: the repository or tag does not exist (or the
	// credential may not see it).
	ErrNotFound = errors.New("not found in the registry")
	// ErrBackoff: the registry is not asked until the time the error
	// names, after a 429, a failure, or a spent rate limit; or, wrapped
	// with ErrUnauthorized, the refused credential is not sent again for
	// that repository until then.
	ErrBackoff = errors.New("registry backing off")
	// ErrUnauthorized: the registry refused the credential.
	ErrUnauthorized = errors.New("registry refused the credentials")
)

// Credential is what a registry is authenticated with; the zero value is
// anonymous. Its values never appear in errors or logs.
type Credential struct {
	Username, Password string
	// IdentityToken is an OAuth2 refresh token (docker login with a
	// token-based registry); RegistryToken a bearer token used as is.
	IdentityToken, RegistryToken string
}

func (c Credential) fingerprint() string {
	if c == (Credential{}) {
		return "anonymous"
	}
	h := sha256.Sum256([]byte(c.Username + "\x00" + c.Password + "\x00" + c.IdentityToken + "\x00" + c.RegistryToken))
	return hex.EncodeToString(h[:8])
}

// Options configure a Client.
type Options struct {
	// HTTP is the client requests go through. Default: a client with a
	// 30s timeout.
	HTTP *http.Client
	// Interval is how long an answer is reused before the registry is
	// asked again. Default 5m.
	Interval time.Duration
	// PlainHTTP lists registry hosts (host:port) spoken to over plain
	// HTTP. Loopback registries always are, as docker allows them.
	PlainHTTP []string
	// MinBackoff and MaxBackoff bound the wait after a failure. Defaults
	// 10s and 10m.
	MinBackoff, MaxBackoff time.Duration
	// PageSize is the n asked per page of a tags list. Default 1000;
	// registries may answer fewer and link the next page.
	PageSize int
	Logger   *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Client queries registries; safe for concurrent use. One Client should
// serve the whole controller so that its cache and backoff are shared.
type Client struct {
	opts  Options
	group singleflight.Group

	mu     sync.Mutex
	cache  map[string]*entry
	hosts  map[string]*hostState
	tokens map[string]token
	// refusals are the backoffs of refused credentials, by refusalKey. A
	// refusal says nothing about the registry's health or about another
	// credential, so it holds back only the requests that would be refused
	// again; the host's backoff is for 429s, failures and spent budgets.
	refusals map[string]*backoff
	pruned   time.Time // when forget last ran
}

// forgetAfter is how long an answer nobody asks for again is kept (for its
// ETag): a policy removed from the applications file, or an image no longer
// followed, leaves its tags list, token and host state behind for at most
// this long, so the client's memory follows what is followed now.
const forgetAfter = 24 * time.Hour

// entry is one cached answer.
type entry struct {
	tags    []string
	digest  string
	etag    string
	fetched time.Time
}

type token struct {
	value   string
	expires time.Time
}

// backoff is a wait after failures: nothing is sent before until.
type backoff struct {
	until    time.Time
	failures int
	cause    string
}

// hostState is what the client knows of one registry's patience.
type hostState struct {
	backoff
	// limit and remaining are the last RateLimit headers seen; -1 when
	// the registry sends none.
	limit, remaining int
}

// New returns a Client.
func New(opts Options) *Client {
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Minute
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 10 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Minute
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Logger = opts.Logger.With("component", "registryclient")
	return &Client{
		opts:     opts,
		cache:    map[string]*entry{},
		hosts:    map[string]*hostState{},
		tokens:   map[string]token{},
		refusals: map[string]*backoff{},
	}
}

// repo is an image repository resolved to the API host and path.
type repo struct {
	host   string // API host (registry-1.docker.io for Docker Hub)
	path   string // repository path (library/nginx)
	scheme string
	name   string // for messages: the familiar name
}

func (c *Client) parse(image string) (repo, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return repo{}, fmt.Errorf("image %q: %w", image, err)
	}
	host := reference.Domain(named)
	if host == "docker.io" {
		host = "registry-1.docker.io"
	}
	r := repo{host: host, path: reference.Path(named), scheme: "https", name: reference.FamiliarName(named)}
	if c.plain(host) {
		r.scheme = "http"
	}
	return r, nil
}

func (c *Client) plain(host string) bool {
	for _, h := range c.opts.PlainHTTP {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	hostname := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		hostname = h
	}
	if hostname == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(hostname, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Tags lists the tags of image's repository, every page of them.
func (c *Client) Tags(ctx context.Context, image string, cred Credential) ([]string, error) {
	r, err := c.parse(image)
	if err != nil {
		return nil, err
	}
	e, err := c.cached(ctx, "tags\x00"+r.host+"/"+r.path+"\x00"+cred.fingerprint(), r, cred, func(ctx context.Context, old *entry) (*entry, error) {
		return c.fetchTags(ctx, r, cred, old)
	})
	if err != nil {
		return nil, err
	}
	return append([]string(nil), e.tags...), nil
}

// Digest returns the digest tag points at in image's repository: the
// manifest's, or for a multi-architecture image the index's, which is the
// digest docker pins a service to.
func (c *Client) Digest(ctx context.Context, image, tag string, cred Credential) (string, error) {
	r, err := c.parse(image)
	if err != nil {
		return "", err
	}
	e, err := c.cached(ctx, "digest\x00"+r.host+"/"+r.path+":"+tag+"\x00"+cred.fingerprint(), r, cred, func(ctx context.Context, old *entry) (*entry, error) {
		e, err := c.fetchDigest(ctx, r, tag, cred, old)
		if errors.Is(err, ErrNotFound) {
			// An absent tag is an answer too, shared for the interval.
			return &entry{}, nil
		}
		return e, err
	})
	if err != nil {
		return "", err
	}
	if e.digest == "" {
		return "", fmt.Errorf("%s:%s: %w", r.name, tag, ErrNotFound)
	}
	return e.digest, nil
}

// cached returns the entry under key while it is younger than the
// interval; otherwise one caller fetches (the others wait for it) and the
// result is stored. A failed fetch stores nothing but backs the host off,
// or, when the registry refused cred, that credential for that repository.
func (c *Client) cached(ctx context.Context, key string, r repo, cred Credential, fetch func(context.Context, *entry) (*entry, error)) (*entry, error) {
	c.mu.Lock()
	e := c.cache[key]
	now := c.opts.Now()
	if e != nil && now.Sub(e.fetched) < c.opts.Interval {
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	ch := c.group.DoChan(key, func() (any, error) {
		// A caller that waited on the lock above may find the answer
		// another just stored.
		c.mu.Lock()
		e := c.cache[key]
		if e != nil && c.opts.Now().Sub(e.fetched) < c.opts.Interval {
			c.mu.Unlock()
			return e, nil
		}
		if err := c.blocked(r, cred); err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		c.mu.Unlock()
		// The fetch is not tied to one caller's context: others wait on it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		ne, err := fetch(fctx, e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		ne.fetched = c.opts.Now()
		c.mu.Lock()
		c.cache[key] = ne
		c.forget(ne.fetched)
		c.mu.Unlock()
		return ne, nil
	})
	// A caller whose context ends stops waiting; the fetch goes on for the
	// others and for the cache.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*entry), nil
	}
}

// forget drops, at most once an hour, the answers fetched more than
// forgetAfter ago, the expired tokens and the state of hosts that are
// neither backed off nor rate-limited. c.mu is held.
func (c *Client) forget(now time.Time) {
	if now.Sub(c.pruned) < time.Hour {
		return
	}
	c.pruned = now
	for k, e := range c.cache {
		if now.Sub(e.fetched) > forgetAfter {
			delete(c.cache, k)
		}
	}
	for k, t := range c.tokens {
		if !now.Before(t.expires) {
			delete(c.tokens, k)
		}
	}
	for k, h := range c.hosts {
		if h.failures == 0 && !now.Before(h.until) && h.remaining != 0 {
			delete(c.hosts, k)
		}
	}
	// A credential refused again keeps moving its wait; one that stopped
	// being used (the application's file was fixed) is dropped.
	for k, b := range c.refusals {
		if now.Sub(b.until) > forgetAfter {
			delete(c.refusals, k)
		}
	}
}

// refusalKey names what a refusal holds back: one credential's requests
// for one repository of one registry. The repository is part of it because
// a registry may refuse a credential one repository and grant it another.
func refusalKey(r repo, cred Credential) string {
	return r.host + "/" + r.path + "\x00" + cred.fingerprint()
}

// blocked returns ErrBackoff while r's host is backed off, and
// ErrUnauthorized with ErrBackoff while cred is held back for r after a
// refusal. c.mu is held.
func (c *Client) blocked(r repo, cred Credential) error {
	now := c.opts.Now()
	if h := c.hosts[r.host]; h != nil && now.Before(h.until) {
		return fmt.Errorf("%w until %s (%s)", ErrBackoff, h.until.UTC().Format(time.RFC3339), h.cause)
	}
	if b := c.refusals[refusalKey(r, cred)]; b != nil && now.Before(b.until) {
		return fmt.Errorf("%w (%s); not sent again until %s: %w", ErrUnauthorized, b.cause, b.until.UTC().Format(time.RFC3339), ErrBackoff)
	}
	return nil
}

func (c *Client) host(host string) *hostState {
	h := c.hosts[host]
	if h == nil {
		h = &hostState{limit: -1, remaining: -1}
		c.hosts[host] = h
	}
	return h
}

// extend records one more failure in b: it waits until retryAfter when
// the registry named a time, else exponentially from MinBackoff to
// MaxBackoff. c.mu is held.
func (c *Client) extend(b *backoff, cause string, retryAfter time.Duration) {
	b.failures++
	wait := retryAfter
	if wait <= 0 {
		wait = c.opts.MinBackoff << min(b.failures-1, 16)
		wait = min(wait, c.opts.MaxBackoff)
	}
	b.until = c.opts.Now().Add(wait)
	b.cause = cause
}

// fail backs host off for every credential and repository: it failed,
// throttled us, or could not be reached.
func (c *Client) fail(host, cause string, retryAfter time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.host(host)
	c.extend(&h.backoff, cause, retryAfter)
	c.opts.Logger.Warn("registry backing off; its images are not checked until then", "registry", host, "until", h.until, "error", cause)
}

// refuse holds cred back for r after the registry (or its token service)
// refused it; the host, and every other credential, are still asked.
func (c *Client) refuse(r repo, cred Credential, cause string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := refusalKey(r, cred)
	b := c.refusals[k]
	if b == nil {
		b = &backoff{}
		c.refusals[k] = b
	}
	c.extend(b, cause, 0)
	c.opts.Logger.Warn("registry refused the credential; not sent for this repository until then", "registry", r.host, "repository", r.path, "until", b.until, "error", cause)
}

// succeeded ends the host's backoff (unless its rate-limit budget is
// spent) and cred's refusal for r: the registry answered.
func (c *Client) succeeded(r repo, cred Credential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.host(r.host)
	h.failures = 0
	if h.remaining != 0 {
		h.until = time.Time{}
	}
	delete(c.refusals, refusalKey(r, cred))
}

// RateLimit reports the last Docker Hub style rate limit host announced;
// ok is false when it sent none.
func (c *Client) RateLimit(host string) (limit, remaining int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hosts[host]
	if h == nil || h.limit < 0 {
		return 0, 0, false
	}
	return h.limit, h.remaining, true
}
