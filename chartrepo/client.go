package chartrepo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/source"
)

// Errors a fetch wraps, so a caller can tell bad input (wait for the
// application or the repository to change) from an outage (retry).
var (
	// ErrNoVersion: the index has no version of the chart matching the
	// constraint, or the constraint does not parse.
	ErrNoVersion = errors.New("no matching chart version")
	// ErrBadIndex: index.yaml does not parse or an entry is unusable.
	ErrBadIndex = errors.New("invalid repository index")
	// ErrDigest: the archive is not the one the index names.
	ErrDigest = errors.New("archive digest mismatch")
	// ErrBadArchive: the archive is not a chart archive that unpacks safely.
	ErrBadArchive = errors.New("invalid chart archive")
	// ErrTooLarge: the index or archive is past its size limit.
	ErrTooLarge = errors.New("too large")
	// ErrInsecure: a plain-HTTP URL without insecure: true.
	ErrInsecure = errors.New("plain HTTP needs insecure: true")
	// ErrUnreachable: the repository could not be reached or answered with
	// an error; it is retried after a back-off.
	ErrUnreachable = errors.New("repository unreachable")
)

// Credentials names files holding a repository's credentials: basic auth
// (UsernameFile and PasswordFile) or a bearer token (TokenFile). They are
// read on every request, so a rotated file is picked up.
type Credentials struct {
	UsernameFile string
	PasswordFile string
	TokenFile    string
}

// Request names one chart in one repository.
type Request struct {
	// RepoURL is the repository's base URL; index.yaml is under it.
	RepoURL string
	// Name is the chart's name in the index.
	Name string
	// Version is a SemVer constraint ("~7.2", ">=1.0.0 <2", "1.4.2").
	Version string
	// Insecure allows http:// for the index and the archive.
	Insecure bool
	// Credentials, if not nil, are sent to the repository's host only.
	Credentials *Credentials
	// Archive, if not nil, is asked about the archive URL the index names
	// before the chart is used, from the cache or not; an error refuses
	// the chart. The index is untrusted and may name any host.
	Archive func(*url.URL) error
}

// Chart is a fetched chart, unpacked in the cache.
type Chart struct {
	// Name and Version are the resolved entry's.
	Name, Version string
	// AppVersion and Created are the index entry's.
	AppVersion, Created string
	// Digest is "sha256:<hex>" of the archive.
	Digest string
	// Root is the cache directory the chart was unpacked in; the chart is
	// at Root/Name. Do not write to it.
	Root string
	// Fetched reports whether the archive was downloaded by this call;
	// false means it came from the cache.
	Fetched bool
}

// Options configure a Client. The zero value of every field but CacheDir
// means its default.
type Options struct {
	// CacheDir holds the unpacked charts, one directory per digest. Required.
	CacheDir string
	// HTTP is the client requests go through. Default: one with
	// http.DefaultTransport's settings that refuses redirects from HTTPS
	// to HTTP.
	HTTP *http.Client
	// Timeout bounds each request, headers and body. Default 30s.
	Timeout time.Duration
	// MaxIndexBytes bounds index.yaml. Default 8 MiB.
	MaxIndexBytes int64
	// MaxArchiveBytes bounds a downloaded archive. Default 32 MiB.
	MaxArchiveBytes int64
	// Unpack bounds an archive's content.
	Unpack Limits
	// BackoffMin and BackoffMax bound the wait after a repository failed,
	// doubling per consecutive failure. Default 5s and 5m.
	BackoffMin, BackoffMax time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Observer is told of every index and archive request. Default: none.
	Observer Observer
}

// Observer is told the outcome of each request to a chart repository, for
// metrics. repo is the repository URL without credentials; kind is
// "index" or "archive"; result is one of the Result constants; bytes is
// the body's size (0 for a 304 or a failure).
type Observer interface {
	ObserveChartFetch(repo, kind, result string, bytes int64)
}

// Outcomes of one request, as an Observer is told them.
const (
	ResultFetched     = "fetched"     // a 200 with a body that was used
	ResultNotModified = "notModified" // a 304: the index kept from the last fetch was used
	ResultFailed      = "failed"      // unreachable, an HTTP error, or too large
)

// Client fetches charts from repositories. It is safe for concurrent use.
type Client struct {
	o Options

	mu      sync.Mutex
	backoff map[string]*source.FailureWindow // by sanitised repository URL
	indexes map[string]*cachedIndex          // by index URL: the last index served, for a conditional GET
	unpack  sync.Mutex                       // serialises writes into the cache
}

// cachedIndex is the last index a repository served with a validator, so
// that the next read can ask for it only if it changed: an unchanged index
// then costs a 304 and no parse.
type cachedIndex struct {
	etag, lastModified string
	index              *Index
}

// New returns a Client with o's defaults applied; it creates the cache
// directory.
func New(o Options) (*Client, error) {
	if o.CacheDir == "" {
		return nil, errors.New("chartrepo: no cache directory")
	}
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("chartrepo: cache: %w", err)
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), CheckRedirect: noDowngrade}
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxIndexBytes <= 0 {
		o.MaxIndexBytes = 8 << 20
	}
	if o.MaxArchiveBytes <= 0 {
		o.MaxArchiveBytes = 32 << 20
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 5 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{o: o, backoff: map[string]*source.FailureWindow{}, indexes: map[string]*cachedIndex{}}, nil
}

// noDowngrade refuses a redirect from HTTPS to plain HTTP, which would
// send the request (and what it asks for) in the clear.
func noDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect from HTTPS to %s", ErrInsecure, redactURL(req.URL))
	}
	return nil
}

// Fetch resolves req's constraint against the repository's index and
// returns the newest matching chart, unpacked, downloading its archive only
// if the cache does not hold that digest. Every error names the repository
// (without credentials) and the chart.
func (c *Client) Fetch(ctx context.Context, req Request) (*Chart, error) {
	base, err := parseRepoURL(req.RepoURL, req.Insecure)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", req.Name, err)
	}
	repo := redactURL(base)
	ch, err := c.fetch(ctx, base, repo, req)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("chart %s from repository %s: %w", req.Name, repo, err))
	}
	return ch, nil
}

func (c *Client) fetch(ctx context.Context, base *url.URL, repo string, req Request) (*Chart, error) {
	if until, err, blocked := c.blocked(repo); blocked {
		return nil, fmt.Errorf("%w: backing off until %s after: %w", ErrUnreachable, until.UTC().Format(time.RFC3339), err)
	}
	auth, err := readAuth(req.Credentials)
	if err != nil {
		return nil, err
	}
	indexURL := base.JoinPath("index.yaml")
	ix, err := c.index(ctx, indexURL, base, repo, auth)
	if err != nil {
		return nil, err
	}
	e, err := ix.resolve(req.Name, req.Version)
	if err != nil {
		return nil, err
	}
	sum, _ := digestHex(e.Digest)
	ch := &Chart{Name: e.Name, Version: e.Version, AppVersion: e.AppVersion, Created: e.Created,
		Digest: "sha256:" + sum, Root: filepath.Join(c.o.CacheDir, sum)}
	au, err := indexURL.Parse(e.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: url: %w", ErrBadIndex, e.Name, e.Version, err)
	}
	if err := checkScheme(au, req.Insecure); err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.Name, e.Version, err)
	}
	if req.Archive != nil {
		if err := req.Archive(au); err != nil {
			return nil, fmt.Errorf("%s %s: archive %s: %w", e.Name, e.Version, redactURL(au), err)
		}
	}
	if cached(ch.Root, e.Name) {
		c.ok(repo)
		c.served(ch.Root, repo)
		return ch, nil
	}
	archive, _, err := c.get(ctx, au, base, auth, c.o.MaxArchiveBytes, nil)
	if err != nil {
		c.observe(repo, "archive", ResultFailed, 0)
		return nil, c.failed(repo, fmt.Errorf("%s %s: %w", e.Name, e.Version, err))
	}
	c.observe(repo, "archive", ResultFetched, int64(len(archive)))
	c.ok(repo)
	got := sha256.Sum256(archive)
	if hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("%w: %s %s from %s has sha256:%x, the index says sha256:%s", ErrDigest, e.Name, e.Version, redactURL(au), got, sum)
	}
	if err := c.store(archive, ch); err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.Name, e.Version, err)
	}
	ch.Fetched = true
	c.served(ch.Root, repo)
	return ch, nil
}

// index reads a repository's index, conditionally when an earlier read
// left a validator (ETag or Last-Modified): a 304 reuses the parsed index.
// Credentials are part of the key, so one token's index is never served
// for another's.
func (c *Client) index(ctx context.Context, indexURL, base *url.URL, repo, auth string) (*Index, error) {
	sum := sha256.Sum256([]byte(auth))
	key := indexURL.String() + " " + hex.EncodeToString(sum[:8])
	c.mu.Lock()
	prev := c.indexes[key]
	c.mu.Unlock()
	data, resp, err := c.get(ctx, indexURL, base, auth, c.o.MaxIndexBytes, prev)
	if err != nil {
		c.observe(repo, "index", ResultFailed, 0)
		return nil, c.failed(repo, err)
	}
	if resp.StatusCode == http.StatusNotModified {
		c.observe(repo, "index", ResultNotModified, 0)
		return prev.index, nil
	}
	c.observe(repo, "index", ResultFetched, int64(len(data)))
	ix, err := parseIndex(data)
	if err != nil {
		return nil, err
	}
	etag, lm := resp.Header.Get("ETag"), strongLastModified(resp.Header)
	c.mu.Lock()
	if etag != "" || lm != "" {
		c.indexes[key] = &cachedIndex{etag: etag, lastModified: lm, index: ix}
	} else {
		delete(c.indexes, key)
	}
	c.mu.Unlock()
	return ix, nil
}

// strongLastModified is the response's Last-Modified if it can tell two
// versions apart: it has a one-second resolution, so an index changed in
// the same second it was served would later be answered 304 with the old
// one kept. Only a Last-Modified at least two seconds older than the
// response's Date is used.
func strongLastModified(h http.Header) string {
	lm := h.Get("Last-Modified")
	mod, err := http.ParseTime(lm)
	if err != nil {
		return ""
	}
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil || date.Sub(mod) < 2*time.Second {
		return ""
	}
	return lm
}

func (c *Client) observe(repo, kind, result string, n int64) {
	if c.o.Observer != nil {
		c.o.Observer.ObserveChartFetch(repo, kind, result, n)
	}
}

// cached reports whether root holds an unpacked chart. A cache entry is
// renamed into place whole, so one that exists is complete.
func cached(root, name string) bool {
	info, err := os.Stat(filepath.Join(root, name, chartengine.ChartFile))
	return err == nil && info.Mode().IsRegular()
}

// store unpacks a verified archive into a temporary directory, checks that
// it is the chart the index said, and renames it to ch.Root.
func (c *Client) store(archive []byte, ch *Chart) error {
	c.unpack.Lock()
	defer c.unpack.Unlock()
	if cached(ch.Root, ch.Name) {
		return nil
	}
	tmp, err := os.MkdirTemp(c.o.CacheDir, ".unpack-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	top, err := unpack(bytes.NewReader(archive), tmp, c.o.Unpack)
	if err != nil {
		return err
	}
	if top != ch.Name {
		return fmt.Errorf("%w: the archive holds %q, not %q", ErrBadArchive, top, ch.Name)
	}
	loaded, err := chartengine.Load(tmp, top)
	if err != nil {
		return err
	}
	if loaded.Meta.Name != ch.Name || loaded.Meta.Version != ch.Version {
		return fmt.Errorf("%w: the archive's Chart.yaml is %s %s, the index says %s %s", ErrBadArchive, loaded.Meta.Name, loaded.Meta.Version, ch.Name, ch.Version)
	}
	if err := os.RemoveAll(ch.Root); err != nil {
		return err
	}
	return os.Rename(tmp, ch.Root)
}

// get reads u with a deadline, sending auth only to base's host, and
// refuses a body longer than limit. With prev it asks for the body only if
// it changed since; a 304 then returns no data and the response.
func (c *Client) get(ctx context.Context, u, base *url.URL, auth string, limit int64, prev *cachedIndex) ([]byte, *http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	if auth != "" && strings.EqualFold(u.Host, base.Host) {
		req.Header.Set("Authorization", auth)
	}
	if prev != nil {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastModified != "" {
			req.Header.Set("If-Modified-Since", prev.lastModified)
		}
	}
	resp, err := c.o.HTTP.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrUnreachable, redactURL(u), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && prev != nil {
		return nil, resp, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%w: GET %s: %s", ErrUnreachable, redactURL(u), resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, nil, fmt.Errorf("%w: GET %s: %d bytes, the limit is %d", ErrTooLarge, redactURL(u), resp.ContentLength, limit)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrUnreachable, redactURL(u), err)
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("%w: GET %s: more than %d bytes", ErrTooLarge, redactURL(u), limit)
	}
	return data, resp, nil
}

// unwrapURLError drops *url.Error's own copy of the URL, which would carry
// a query string; the caller names the URL itself.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readAuth builds the Authorization header from credential files.
func readAuth(cr *Credentials) (string, error) {
	if cr == nil {
		return "", nil
	}
	if cr.TokenFile != "" {
		tok, err := readSecret("token", cr.TokenFile)
		if err != nil {
			return "", err
		}
		return "Bearer " + tok, nil
	}
	if cr.UsernameFile == "" && cr.PasswordFile == "" {
		return "", nil
	}
	user, err := readSecret("username", cr.UsernameFile)
	if err != nil {
		return "", err
	}
	pass, err := readSecret("password", cr.PasswordFile)
	if err != nil {
		return "", err
	}
	r := http.Request{Header: http.Header{}}
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization"), nil
}

// readSecret reads a one-value regular file of at most 64 KiB, dropping a
// trailing newline. The value never appears in an error.
func readSecret(what, name string) (string, error) {
	info, err := os.Stat(name)
	if err != nil {
		return "", fmt.Errorf("credentials: %s file: %w", what, err)
	}
	if !info.Mode().IsRegular() || info.Size() > 64<<10 {
		return "", fmt.Errorf("credentials: %s file %s is not a regular file of at most 64 KiB", what, name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("credentials: %s file: %w", what, err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("credentials: %s file %s is empty", what, name)
	}
	return string(b), nil
}

// parseRepoURL checks a repository URL: http(s), no credentials, no query.
func parseRepoURL(raw string, insecure bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("repository URL: %w", redact.Error(err))
	}
	if u.User != nil {
		return nil, errors.New("repository URL must not hold credentials; use credentials files")
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("repository URL %s must be http(s)://host/path without a query", redactURL(u))
	}
	if err := checkScheme(u, insecure); err != nil {
		return nil, err
	}
	return u, nil
}

func checkScheme(u *url.URL, insecure bool) error {
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && insecure:
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%w: %s", ErrInsecure, redactURL(u))
	}
	return fmt.Errorf("%s: only https (or http with insecure: true) is supported", redactURL(u))
}

// redactURL is u without user info, query or fragment.
func redactURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment, v.ForceQuery = nil, "", "", false
	return v.String()
}

// blocked reports whether repo is inside a back-off window.
func (c *Client) blocked(repo string) (time.Time, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.backoff[repo]
	if b == nil {
		return time.Time{}, nil, false
	}
	return b.Blocked(c.o.Now())
}

// failed opens or widens repo's back-off window when err is an outage,
// and returns err.
func (c *Client) failed(repo string, err error) error {
	if !errors.Is(err, ErrUnreachable) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.backoff[repo]
	if b == nil {
		b = source.NewFailureWindow(c.o.BackoffMin, c.o.BackoffMax)
		c.backoff[repo] = b
	}
	b.Fail(c.o.Now(), err)
	return err
}

// ok forgets repo's failures after it answered.
func (c *Client) ok(repo string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.backoff, repo)
}
