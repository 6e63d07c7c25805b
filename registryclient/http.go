package registryclient

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// manifestTypes are the media types a digest is asked for, indexes first,
// so that a multi-architecture image answers with its index's digest.
var manifestTypes = []string{
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}

// maxPages bounds a tags listing; a repository with more than this many
// pages of tags is misusing tags and is refused rather than walked.
const maxPages = 100

// maxBody bounds a tags page, a token answer, or a manifest read.
const maxBody = 8 << 20

func (c *Client) fetchTags(ctx context.Context, r repo, cred Credential, old *entry) (*entry, error) {
	next := fmt.Sprintf("%s://%s/v2/%s/tags/list?n=%d", r.scheme, r.host, r.path, c.opts.PageSize)
	scope := "repository:" + r.path + ":pull"
	out := &entry{}
	for page := 0; next != ""; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("tags list: more than %d pages", maxPages)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		if page == 0 && old != nil && old.etag != "" {
			req.Header.Set("If-None-Match", old.etag)
		}
		resp, err := c.do(ctx, req, r, scope, cred)
		if err != nil {
			return nil, fmt.Errorf("tags list: %w", err)
		}
		if resp.StatusCode == http.StatusNotModified && old != nil {
			resp.Body.Close()
			return &entry{tags: old.tags, etag: old.etag}, nil
		}
		var body struct {
			Tags []string `json:"tags"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("tags list: %w", err)
		}
		if page == 0 {
			out.etag = resp.Header.Get("ETag")
		}
		out.tags = append(out.tags, body.Tags...)
		next, err = nextPage(req.URL, resp.Header.Get("Link"))
		if err != nil {
			return nil, fmt.Errorf("tags list: %w", err)
		}
		if page > 0 {
			// The first page's ETag vouches for that page only: a new tag
			// on a later one would go unseen for as long as the first
			// stayed the same. A list of pages is read again whole.
			out.etag = ""
		}
	}
	return out, nil
}

// nextPage reads an RFC 5988 Link header's rel="next" target, resolved
// against the page asked for; "" when there is none. A next page on
// another host is refused: credentials must not follow it.
func nextPage(base *url.URL, link string) (string, error) {
	if link == "" {
		return "", nil
	}
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		target = strings.Trim(strings.TrimSpace(target), "<>")
		u, err := base.Parse(target)
		if err != nil {
			return "", fmt.Errorf("link header: %w", err)
		}
		if u.Host != base.Host || u.Scheme != base.Scheme {
			return "", fmt.Errorf("link header points to another registry (%s)", u.Host)
		}
		return u.String(), nil
	}
	return "", nil
}

func (c *Client) fetchDigest(ctx context.Context, r repo, tag string, cred Credential, old *entry) (*entry, error) {
	u := fmt.Sprintf("%s://%s/v2/%s/manifests/%s", r.scheme, r.host, r.path, url.PathEscape(tag))
	scope := "repository:" + r.path + ":pull"
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", strings.Join(manifestTypes, ", "))
		if old != nil && old.digest != "" {
			req.Header.Set("If-None-Match", `"`+old.digest+`"`)
		}
		resp, err := c.do(ctx, req, r, scope, cred)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", tag, err)
		}
		if resp.StatusCode == http.StatusNotModified && old != nil {
			resp.Body.Close()
			return &entry{digest: old.digest}, nil
		}
		if d := resp.Header.Get("Docker-Content-Digest"); d != "" {
			resp.Body.Close()
			return &entry{digest: d}, nil
		}
		if method == http.MethodGet {
			// No digest header: the digest is the manifest's own bytes'.
			h := sha256.New()
			_, err := io.Copy(h, io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("manifest %s: %w", tag, err)
			}
			return &entry{digest: fmt.Sprintf("sha256:%x", h.Sum(nil))}, nil
		}
		resp.Body.Close()
	}
	return nil, fmt.Errorf("manifest %s: no digest", tag)
}

// do sends req with the credential the registry asks for (answering a
// Bearer or Basic challenge on a 401 once), records rate-limit headers,
// and turns failures into backoff. It returns a response with status 2xx
// or 304; anything else is an error.
func (c *Client) do(ctx context.Context, req *http.Request, r repo, scope string, cred Credential) (*http.Response, error) {
	tkey := r.host + "\x00" + scope + "\x00" + cred.fingerprint()
	c.mu.Lock()
	t, ok := c.tokens[tkey]
	c.mu.Unlock()
	if ok && c.opts.Now().Before(t.expires) {
		req.Header.Set("Authorization", t.value)
	}
	resp, err := c.send(req, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		challenge := resp.Header.Get("WWW-Authenticate")
		drain(resp)
		authz, expires, err := c.authorize(ctx, r, challenge, scope, cred)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.tokens[tkey] = token{value: authz, expires: expires}
		c.mu.Unlock()
		req = req.Clone(ctx)
		req.Header.Set("Authorization", authz)
		if resp, err = c.send(req, r); err != nil {
			return nil, err
		}
	}
	switch {
	case resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified:
		c.succeeded(r, cred)
		return resp, nil
	case resp.StatusCode == http.StatusNotFound:
		drain(resp)
		c.succeeded(r, cred)
		return nil, ErrNotFound
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// The registry is well and answering; it refuses this credential
		// (or this repository to it). Backing the host off would stop
		// every other application on the registry for one wrong password.
		drain(resp)
		c.refuse(r, cred, resp.Status)
		return nil, fmt.Errorf("%w: %s", ErrUnauthorized, resp.Status)
	case resp.StatusCode == http.StatusTooManyRequests:
		drain(resp)
		c.fail(r.host, resp.Status, retryAfter(resp.Header, c.opts.Now()))
		return nil, fmt.Errorf("%w: %s", ErrBackoff, resp.Status)
	}
	drain(resp)
	c.fail(r.host, resp.Status, retryAfter(resp.Header, c.opts.Now()))
	return nil, fmt.Errorf("unexpected answer %s", resp.Status)
}

// send does one round trip and reads the rate-limit headers, backing the
// host off when they say the budget is spent.
func (c *Client) send(req *http.Request, r repo) (*http.Response, error) {
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL carries no secret, but says nothing new
		}
		c.fail(r.host, err.Error(), 0)
		return nil, err
	}
	limit, lok := rateValue(resp.Header.Get("RateLimit-Limit"))
	remaining, rok := rateValue(resp.Header.Get("RateLimit-Remaining"))
	if lok || rok {
		c.mu.Lock()
		h := c.host(r.host)
		h.limit, h.remaining = limit.n, remaining.n
		if rok && remaining.n == 0 {
			// Spent: wait for the window the registry names (w=seconds),
			// or the Retry-After it sent, before asking again.
			wait := time.Duration(remaining.window) * time.Second
			if ra := retryAfter(resp.Header, c.opts.Now()); ra > 0 {
				wait = ra
			}
			if wait <= 0 {
				wait = c.opts.MaxBackoff
			}
			h.until = c.opts.Now().Add(wait)
			h.cause = "rate limit spent"
			c.opts.Logger.Warn("registry rate limit spent; not asked again until the window passes", "registry", r.host, "until", h.until)
		}
		c.mu.Unlock()
	}
	return resp, nil
}

type rate struct{ n, window int }

// rateValue parses Docker Hub's "100;w=21600".
func rateValue(v string) (rate, bool) {
	if v == "" {
		return rate{-1, 0}, false
	}
	num, params, _ := strings.Cut(v, ";")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return rate{-1, 0}, false
	}
	out := rate{n: n}
	for p := range strings.SplitSeq(params, ";") {
		if k, val, ok := strings.Cut(strings.TrimSpace(p), "="); ok && k == "w" {
			out.window, _ = strconv.Atoi(val)
		}
	}
	return out, true
}

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
