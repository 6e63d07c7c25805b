// Package registrytest runs a real container registry (CNCF Distribution,
// built by scripts/registry.sh and named by FLOTILLA_REGISTRY) on loopback
// for tests, optionally behind a token service of the test's own, and
// pushes images to it over the HTTP API. Every request that reaches the
// registry passes a counting proxy, so a test can show how many queries a
// feature cost.
package registrytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/internal/testproc"
)

// Options configure Start.
type Options struct {
	// Token puts the registry behind a token service (the Bearer
	// challenge flow Docker Hub and most registries use) that accepts
	// User and Password.
	Token bool
	// Basic puts the registry behind HTTP Basic authentication
	// (Distribution's htpasswd), accepting User and Password: a registry
	// that answers a wrong password itself, with a 401, rather than
	// through a token service.
	Basic          bool
	User, Password string
	// TagETags makes the proxy give every tags-list page the ETag a
	// registry that supports revalidation sends (a hash of the page), and
	// answer 304 Not Modified when If-None-Match names it. Distribution
	// itself sends no ETag on tags lists; its manifests have one.
	TagETags bool
	// DaemonSide serves the counting proxy where the daemon's host
	// network is (swarmtest.ListenTCP): an engine in a network namespace
	// of its own can then push to it, and so can a controller run there
	// (swarmtest.Command). For the main daemon it changes nothing.
	DaemonSide bool
}

// Registry is a running registry.
type Registry struct {
	// Host is host:port of the counting proxy in front of the registry;
	// image references use it (127.0.0.1:PORT/app).
	Host string
	// Direct is host:port of the registry itself (no counting).
	Direct string

	tokens *tokenService
	// basic is the user and password pushes send when Options.Basic.
	basic *url.Userinfo
	mu    sync.Mutex
	hits  []Hit
	// refuse answers this many next requests with refuseStatus (429 for
	// Throttle) without passing them on; rateLimit, when set, is added to
	// every answer as Docker Hub's RateLimit headers.
	refuse       int
	refuseStatus int
	retryAfter   string
	rateLimit    http.Header
}

// Hit is one request the proxy passed on.
type Hit struct {
	Method, Path string
	Status       int
}

// Start runs the registry for the test's lifetime. Without
// FLOTILLA_REGISTRY it skips, or fails when FLOTILLA_REQUIRE_REGISTRY=1
// (CI), so that a missing binary never passes silently.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	bin := os.Getenv("FLOTILLA_REGISTRY")
	if bin == "" {
		if os.Getenv("FLOTILLA_REQUIRE_REGISTRY") == "1" {
			t.Fatal("FLOTILLA_REQUIRE_REGISTRY=1 but FLOTILLA_REGISTRY names no registry binary (scripts/registry.sh builds one)")
		}
		t.Skip("FLOTILLA_REGISTRY names no registry binary (eval \"$(scripts/registry.sh)\")")
	}
	dir := t.TempDir()
	port := freePort(t)
	r := &Registry{Direct: fmt.Sprintf("127.0.0.1:%d", port)}
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: flotilla-test-upload-state
`, filepath.Join(dir, "data"), r.Direct)
	if opts.Token {
		r.tokens = startTokenService(t, dir, opts.User, opts.Password)
		config += fmt.Sprintf(`auth:
  token:
    realm: %s
    service: %s
    issuer: %s
    rootcertbundle: %s
`, r.tokens.realm, tokenServiceName, tokenIssuer, r.tokens.certFile)
	}
	if opts.Basic {
		if opts.Token {
			t.Fatal("registrytest: Token and Basic are exclusive")
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(opts.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r.basic = url.UserPassword(opts.User, opts.Password)
		config += fmt.Sprintf(`auth:
  htpasswd:
    realm: flotilla-test-registry
    path: %s
`, htpasswd)
	}
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := testproc.Start(t, "registry", exec.Command(bin, "serve", cfgFile))

	// The counting proxy: what the code under test talks to.
	target := &url.URL{Scheme: "http", Host: r.Direct}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if opts.TagETags && resp.StatusCode == http.StatusOK && strings.Contains(resp.Request.URL.Path, "/tags/list") {
			if err := revalidate(resp); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.hits = append(r.hits, Hit{Method: resp.Request.Method, Path: resp.Request.URL.RequestURI(), Status: resp.StatusCode})
		r.mu.Unlock()
		return nil
	}
	listen := func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	if opts.DaemonSide {
		listen = swarmtest.ListenTCP
	}
	l, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	front := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		for k, v := range r.rateLimit {
			w.Header()[k] = v
		}
		if r.refuse > 0 {
			r.refuse--
			status := r.refuseStatus
			r.hits = append(r.hits, Hit{Method: req.Method, Path: req.URL.RequestURI(), Status: status})
			if r.retryAfter != "" {
				w.Header().Set("Retry-After", r.retryAfter)
			}
			r.mu.Unlock()
			code := "UNAVAILABLE"
			if status == http.StatusTooManyRequests {
				code = "TOOMANYREQUESTS"
			}
			http.Error(w, `{"errors":[{"code":"`+code+`"}]}`, status)
			return
		}
		r.mu.Unlock()
		proxy.ServeHTTP(w, req)
	})
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.Host = l.Addr().String()

	proc.WaitHTTP(t, "http://"+r.Direct+"/v2/", 30*time.Second, func(status int) bool {
		return status == http.StatusOK || status == http.StatusUnauthorized
	})
	r.ResetHits()
	return r
}

// revalidate gives a tags page its ETag, the quoted SHA-256 of its body,
// and turns it into a 304 without a body when the request's If-None-Match
// names that ETag.
func revalidate(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	etag := `"` + digest(body) + `"`
	resp.Header.Set("ETag", etag)
	if resp.Request.Header.Get("If-None-Match") == etag {
		resp.StatusCode, resp.Status = http.StatusNotModified, "304 Not Modified"
		body = nil
		resp.Header.Del("Content-Type")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	if body == nil {
		resp.Header.Del("Content-Length")
	} else {
		resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	}
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Throttle makes the proxy answer the next n requests with 429 Too Many
// Requests and the Retry-After value retryAfter ("" for none), as a
// registry enforcing a rate limit does.
func (r *Registry) Throttle(n int, retryAfter string) {
	r.Fail(n, http.StatusTooManyRequests, retryAfter)
}

// Fail makes the proxy answer the next n requests with status (a 503 of a
// registry in trouble, say) and the Retry-After value retryAfter ("" for
// none), without passing them on.
func (r *Registry) Fail(n, status int, retryAfter string) {
	r.mu.Lock()
	r.refuse, r.refuseStatus, r.retryAfter = n, status, retryAfter
	r.mu.Unlock()
}

// SetRateLimit adds Docker Hub's RateLimit-Limit and RateLimit-Remaining
// headers ("100;w=21600") to every answer; empty values remove them.
func (r *Registry) SetRateLimit(limit, remaining string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit == "" {
		r.rateLimit = nil
		return
	}
	r.rateLimit = http.Header{"Ratelimit-Limit": {limit}, "Ratelimit-Remaining": {remaining}}
}

// Hits returns the requests the proxy passed since the last ResetHits.
func (r *Registry) Hits() []Hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Hit(nil), r.hits...)
}

// ResetHits forgets the requests counted so far.
func (r *Registry) ResetHits() {
	r.mu.Lock()
	r.hits = nil
	r.mu.Unlock()
}

// TokenRequests is how many tokens the token service issued.
func (r *Registry) TokenRequests() int {
	if r.tokens == nil {
		return 0
	}
	return int(r.tokens.issued.Load())
}

// Image is what Push uploads: one layer of content and a config naming
// the platform.
type Image struct {
	Content  string
	OS, Arch string
}

// Push uploads img to repo and tags it; it returns the manifest's digest.
func (r *Registry) Push(t testing.TB, repo, tag string, img Image) string {
	t.Helper()
	body, mediaType := r.manifest(t, repo, img)
	return r.putManifest(t, repo, tag, body, mediaType)
}

// PushIndex uploads one image per platform and an OCI index of them under
// tag, and returns the index's digest: a multi-architecture image.
func (r *Registry) PushIndex(t testing.TB, repo, tag string, imgs ...Image) string {
	t.Helper()
	type desc struct {
		MediaType string            `json:"mediaType"`
		Digest    string            `json:"digest"`
		Size      int               `json:"size"`
		Platform  map[string]string `json:"platform"`
	}
	var manifests []desc
	for _, img := range imgs {
		body, mt := r.manifest(t, repo, img)
		d := r.putManifest(t, repo, "", body, mt)
		manifests = append(manifests, desc{MediaType: mt, Digest: d, Size: len(body), Platform: map[string]string{"os": img.OS, "architecture": img.Arch}})
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": ociIndex, "manifests": manifests})
	if err != nil {
		t.Fatal(err)
	}
	return r.putManifest(t, repo, tag, index, ociIndex)
}

const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
)

func (r *Registry) manifest(t testing.TB, repo string, img Image) ([]byte, string) {
	t.Helper()
	if img.OS == "" {
		img.OS, img.Arch = "linux", "amd64"
	}
	layer := []byte(img.Content)
	cfg, _ := json.Marshal(map[string]any{"architecture": img.Arch, "os": img.OS, "rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}}})
	r.blob(t, repo, cfg)
	r.blob(t, repo, layer)
	m, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     ociManifest,
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(cfg), "size": len(cfg)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer), "size": len(layer)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, ociManifest
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// blob uploads b with a monolithic upload (POST, then PUT with the digest).
func (r *Registry) blob(t testing.TB, repo string, b []byte) {
	t.Helper()
	resp := r.do(t, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", repo, nil, "")
	loc := resp.Header.Get("Location")
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || loc == "" {
		t.Fatalf("start blob upload to %s: %s", repo, resp.Status)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("digest", digest(b))
	u.RawQuery = q.Encode()
	resp = r.do(t, http.MethodPut, u.RequestURI(), repo, b, "application/octet-stream")
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload blob to %s: %s", repo, resp.Status)
	}
}

func (r *Registry) putManifest(t testing.TB, repo, tag string, body []byte, mediaType string) string {
	t.Helper()
	ref := tag
	if ref == "" {
		ref = digest(body)
	}
	resp := r.do(t, http.MethodPut, "/v2/"+repo+"/manifests/"+ref, repo, body, mediaType)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("put manifest %s:%s: %s %s", repo, ref, resp.Status, msg)
	}
	return resp.Header.Get("Docker-Content-Digest")
}

// Delete removes the manifest d from repo, and with it every tag that
// points at it.
func (r *Registry) Delete(t testing.TB, repo, d string) {
	t.Helper()
	resp := r.do(t, http.MethodDelete, "/v2/"+repo+"/manifests/"+d, repo, nil, "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete %s@%s: %s", repo, d, resp.Status)
	}
}

// do sends a request straight to the registry (not counted), with a
// push-and-pull token minted by the test's own token service when there
// is one, or the Basic user and password.
func (r *Registry) do(t testing.TB, method, uri, repo string, body []byte, contentType string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r.Direct+uri, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.tokens != nil {
		tok, err := r.tokens.mint("test", []access{{Type: "repository", Name: repo, Actions: []string{"pull", "push", "delete"}}})
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if r.basic != nil {
		pw, _ := r.basic.Password()
		req.SetBasicAuth(r.basic.Username(), pw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	return resp
}

// Ref is host/repo:tag on the counting proxy.
func (r *Registry) Ref(repo, tag string) string {
	return strings.TrimSuffix(r.Host+"/"+repo+":"+tag, ":")
}
