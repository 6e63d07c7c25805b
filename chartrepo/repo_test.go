package chartrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// packageChart builds name-version.tgz with chartengine's packager from a
// chart written to a temporary directory.
func packageChart(t *testing.T, name, version string) []byte {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, name)
	write(t, filepath.Join(dir, "Chart.yaml"), "apiVersion: v2\nname: "+name+"\nversion: "+version+"\nappVersion: \"a"+version+"\"\ndescription: test chart\n")
	write(t, filepath.Join(dir, "values.yaml"), "image: flotilla-test/app:1\n")
	write(t, filepath.Join(dir, "templates", "web.yaml"), "services:\n  web:\n    image: {{ .Values.image }}\n")
	c, err := chartengine.Load(root, name)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.Package(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func write(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testRepo is a chart repository served on 127.0.0.1: files by name, an
// index built from its archives with BuildIndex, and a count of requests
// per path.
type testRepo struct {
	t   *testing.T
	srv *httptest.Server
	dir string

	mu    sync.Mutex
	hits  map[string]int
	auth  []string
	index []byte // overrides the built index when set
	etag  bool   // serve index.yaml with an ETag of its content
}

func newTestRepo(t *testing.T, tls bool) *testRepo {
	r := &testRepo{t: t, dir: t.TempDir(), hits: map[string]int{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits[req.URL.Path]++
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		override := r.index
		r.mu.Unlock()
		name := strings.TrimPrefix(req.URL.Path, "/charts/")
		r.mu.Lock()
		etag := r.etag
		r.mu.Unlock()
		if name == "index.yaml" && etag {
			data, _ := os.ReadFile(filepath.Join(r.dir, name))
			sum := sha256.Sum256(data)
			w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
		}
		if name == "index.yaml" && override != nil {
			w.Write(override)
			return
		}
		http.ServeFile(w, req, filepath.Join(r.dir, filepath.Base(name)))
	})
	if tls {
		r.srv = httptest.NewTLSServer(h)
	} else {
		r.srv = httptest.NewServer(h)
	}
	t.Cleanup(r.srv.Close)
	return r
}

func (r *testRepo) url() string { return r.srv.URL + "/charts" }

// publish adds an archive and rebuilds index.yaml.
func (r *testRepo) publish(name string, data []byte) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	ix, err := BuildIndex(r.dir, "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "index.yaml"), ix, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	if o.CacheDir == "" {
		o.CacheDir = t.TempDir()
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFetchDeploysTheNewestVersionMatchingTheConstraint(t *testing.T) {
	r := newTestRepo(t, false)
	for _, v := range []string{"1.2.0", "1.2.3", "1.3.0", "2.0.0", "1.2.9-rc.1"} {
		r.publish("web-"+v+".tgz", packageChart(t, "web", v))
	}
	c := newClient(t, Options{})
	for constraint, want := range map[string]string{"~1.2": "1.2.3", "^1": "1.3.0", ">=1.0.0": "2.0.0", "1.2.0": "1.2.0", "~1.2.9-0": "1.2.9-rc.1"} {
		ch, err := c.Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: constraint, Insecure: true})
		if err != nil {
			t.Fatalf("%s: %v", constraint, err)
		}
		if ch.Version != want {
			t.Errorf("constraint %s resolved to %s, want %s", constraint, ch.Version, want)
		}
		loaded, err := chartengine.Load(ch.Root, ch.Name)
		if err != nil {
			t.Fatal(err)
		}
		if loaded.Meta.Version != want || !strings.HasPrefix(ch.Digest, "sha256:") {
			t.Errorf("unpacked chart is %s with digest %s, want %s", loaded.Meta.Version, ch.Digest, want)
		}
	}
	_, err := c.Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "~3", Insecure: true})
	if !errors.Is(err, ErrNoVersion) || !strings.Contains(err.Error(), "1.3.0") || !strings.Contains(err.Error(), r.url()) {
		t.Errorf("no match gave %v, want ErrNoVersion naming the repository and the versions", err)
	}
}

func TestFetchOfADigestInTheCacheDownloadsNothing(t *testing.T) {
	r := newTestRepo(t, false)
	r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	cache := t.TempDir()
	req := Request{RepoURL: r.url(), Name: "web", Version: "1.x", Insecure: true}
	first, err := newClient(t, Options{CacheDir: cache}).Fetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// A second client on the same cache: a restarted controller.
	second, err := newClient(t, Options{CacheDir: cache}).Fetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Fetched || second.Fetched || first.Root != second.Root {
		t.Errorf("fetched %v then %v, roots %s and %s", first.Fetched, second.Fetched, first.Root, second.Root)
	}
	if n := r.count("/charts/web-1.0.0.tgz"); n != 1 {
		t.Errorf("archive downloaded %d times, want 1", n)
	}
	if n := r.count("/charts/index.yaml"); n != 2 {
		t.Errorf("index read %d times, want 2 (every fetch looks for new versions)", n)
	}
}

func TestFetchRefusesAnArchiveWhoseDigestIsNotTheIndexs(t *testing.T) {
	r := newTestRepo(t, false)
	r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	// Replace the archive after the index was built.
	if err := os.WriteFile(filepath.Join(r.dir, "web-1.0.0.tgz"), packageChart(t, "web", "1.0.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	_, err := newClient(t, Options{CacheDir: cache}).Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "1.0.0", Insecure: true})
	if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), "chart web") {
		t.Fatalf("got %v, want ErrDigest naming the chart", err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("the cache holds %d entries after a refused archive", len(ents))
	}
}

func TestFetchRefusesAnIndexOrArchivePastItsLimit(t *testing.T) {
	r := newTestRepo(t, false)
	r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	ix, _ := os.ReadFile(filepath.Join(r.dir, "index.yaml"))
	req := Request{RepoURL: r.url(), Name: "web", Version: "1.0.0", Insecure: true}
	_, err := newClient(t, Options{MaxIndexBytes: int64(len(ix) - 1)}).Fetch(context.Background(), req)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "index.yaml") {
		t.Errorf("small index limit gave %v, want ErrTooLarge naming index.yaml", err)
	}
	_, err = newClient(t, Options{MaxArchiveBytes: 100}).Fetch(context.Background(), req)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "web-1.0.0.tgz") {
		t.Errorf("small archive limit gave %v, want ErrTooLarge naming the archive", err)
	}
	_, err = newClient(t, Options{Unpack: Limits{Bytes: 10}}).Fetch(context.Background(), req)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("small unpack limit gave %v, want ErrTooLarge", err)
	}
}

// tarball builds a gzipped tar of hdrs, each with its body.
func tarball(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		h.Size = int64(len(e.body))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

type tarEntry struct {
	hdr  tar.Header
	body string
}

func reg(name, body string) tarEntry {
	return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name}, body}
}

func TestUnpackRefusesEntriesThatCouldLeaveTheChart(t *testing.T) {
	chart := reg("web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n")
	cases := map[string]tarEntry{
		"parent":    reg("web/../../etc/x", "x"),
		"absolute":  reg("/etc/x", "x"),
		"symlink":   {tar.Header{Typeflag: tar.TypeSymlink, Name: "web/link", Linkname: "/etc/passwd"}, ""},
		"hardlink":  {tar.Header{Typeflag: tar.TypeLink, Name: "web/link", Linkname: "web/Chart.yaml"}, ""},
		"device":    {tar.Header{Typeflag: tar.TypeChar, Name: "web/dev", Devmajor: 1, Devminor: 3}, ""},
		"fifo":      {tar.Header{Typeflag: tar.TypeFifo, Name: "web/fifo"}, ""},
		"other top": reg("other/x", "x"),
		"duplicate": reg("web/Chart.yaml", "again"),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			dest := t.TempDir()
			_, err := unpack(bytes.NewReader(tarball(t, chart, bad)), dest, Limits{})
			if !errors.Is(err, ErrBadArchive) {
				t.Fatalf("got %v, want ErrBadArchive", err)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(dest), "etc")); err == nil {
				t.Error("an entry was written outside the destination")
			}
		})
	}
	_, err := unpack(bytes.NewReader(tarball(t, chart, reg("web/a", "1"), reg("web/b", "2"))), t.TempDir(), Limits{Files: 2})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("three files with a limit of two gave %v", err)
	}
}

func TestFetchRefusesAVerifiedArchiveWithAPathEscapingIt(t *testing.T) {
	r := newTestRepo(t, false)
	evil := tarball(t, reg("web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n"), reg("web/../escaped", "x"))
	if err := os.WriteFile(filepath.Join(r.dir, "web-1.0.0.tgz"), evil, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(evil)
	r.index = []byte("apiVersion: v1\nentries:\n  web:\n  - name: web\n    version: 1.0.0\n    digest: " + hex.EncodeToString(sum[:]) + "\n    urls: [web-1.0.0.tgz]\n")
	cache := t.TempDir()
	_, err := newClient(t, Options{CacheDir: cache}).Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "*", Insecure: true})
	if !errors.Is(err, ErrBadArchive) || !strings.Contains(err.Error(), "..") {
		t.Fatalf("got %v, want ErrBadArchive naming the entry", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "escaped")); err == nil {
		t.Error("the escaping entry was written")
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("the cache holds %d entries after a refused archive", len(ents))
	}
}

func TestFetchSendsCredentialsFromFilesToTheRepositoryOnly(t *testing.T) {
	r := newTestRepo(t, true)
	r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "user"), "alice\n")
	write(t, filepath.Join(dir, "pass"), "s3cret-pass\n")
	write(t, filepath.Join(dir, "token"), "tok-123\n")
	c := newClient(t, Options{HTTP: r.srv.Client()})
	_, err := c.Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "*",
		Credentials: &Credentials{UsernameFile: filepath.Join(dir, "user"), PasswordFile: filepath.Join(dir, "pass")}})
	if err != nil {
		t.Fatal(err)
	}
	basic := (&http.Request{Header: http.Header{}})
	basic.SetBasicAuth("alice", "s3cret-pass")
	_, err = newClient(t, Options{HTTP: r.srv.Client()}).Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "*",
		Credentials: &Credentials{TokenFile: filepath.Join(dir, "token")}})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	got := r.auth
	r.mu.Unlock()
	want := []string{basic.Header.Get("Authorization"), basic.Header.Get("Authorization"), "Bearer tok-123", "Bearer tok-123"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers %q, want %q", got, want)
	}
}

func TestFetchRefusesPlainHTTPWithoutInsecure(t *testing.T) {
	r := newTestRepo(t, false)
	r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	_, err := newClient(t, Options{}).Fetch(context.Background(), Request{RepoURL: r.url(), Name: "web", Version: "*"})
	if !errors.Is(err, ErrInsecure) || r.count("/charts/index.yaml") != 0 {
		t.Errorf("got %v after %d requests, want ErrInsecure and no request", err, r.count("/charts/index.yaml"))
	}
}

func TestAnUnreachableRepositoryBacksOffWithoutHoldingUpAnother(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/charts"
	ln.Close()
	up := newTestRepo(t, false)
	up.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	c := newClient(t, Options{BackoffMin: time.Minute, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	req := Request{RepoURL: "http://user:pw@" + ln.Addr().String() + "/charts", Name: "web", Version: "*", Insecure: true}
	if _, err := c.Fetch(context.Background(), req); err == nil || !strings.Contains(err.Error(), "must not hold credentials") {
		t.Fatalf("URL with credentials gave %v", err)
	}
	req.RepoURL = dead
	_, err = c.Fetch(context.Background(), req)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "chart web") {
		t.Fatalf("got %v, want ErrUnreachable naming %s and the chart", err, dead)
	}
	_, err = c.Fetch(context.Background(), req)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "backing off") {
		t.Errorf("second fetch inside the window gave %v, want a back-off", err)
	}
	if _, err := c.Fetch(context.Background(), Request{RepoURL: up.url(), Name: "web", Version: "*", Insecure: true}); err != nil {
		t.Errorf("another repository was held up: %v", err)
	}
	now.Add(int64(2 * time.Minute))
	_, err = c.Fetch(context.Background(), req)
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "backing off") {
		t.Errorf("fetch after the window gave %v, want a new attempt", err)
	}
}

func TestBuildIndexGivesTheSameBytesForTheSamePackages(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"0.9.0", "0.10.0"} {
		write(t, filepath.Join(dir, "web-"+v+".tgz"), string(packageChart(t, "web", v)))
	}
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, err := BuildIndex(dir, "https://charts.example.com/stable/", created)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := BuildIndex(dir, "https://charts.example.com/stable/", created)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same packages differ")
	}
	ix, err := parseIndex(a)
	if err != nil {
		t.Fatal(err)
	}
	es := ix.Entries["web"]
	if len(es) != 2 || es[0].Version != "0.10.0" || es[0].URLs[0] != "https://charts.example.com/stable/web-0.10.0.tgz" ||
		es[0].AppVersion != "a0.10.0" || es[0].Description != "test chart" || es[0].Created != "2026-03-01T12:00:00Z" {
		t.Errorf("entries %+v", es)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "web-0.10.0.tgz"))
	sum := sha256.Sum256(data)
	if es[0].Digest != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s, want the file's sha256", es[0].Digest)
	}
}

func TestAnIndexWithNoLengthIsCutAtItsLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Flushing first makes the body chunked, with no Content-Length
		// to refuse it by: the limit must hold while reading.
		w.Write([]byte("apiVersion: v1\n"))
		http.NewResponseController(w).Flush()
		for range 64 {
			w.Write(bytes.Repeat([]byte("#"), 1024))
		}
	}))
	t.Cleanup(srv.Close)
	_, err := newClient(t, Options{MaxIndexBytes: 16 << 10}).Fetch(context.Background(), Request{RepoURL: srv.URL, Name: "web", Version: "*", Insecure: true})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 16384 bytes") {
		t.Fatalf("got %v, want ErrTooLarge while reading", err)
	}
}

// observed records what a Client reports to its Observer.
type observed struct {
	mu   sync.Mutex
	seen []string
}

func (o *observed) ObserveChartFetch(repo, kind, result string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, kind+" "+result+" "+strconv.FormatInt(n, 10))
}

func (o *observed) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen
	o.seen = nil
	return s
}

func TestAnUnchangedIndexCostsA304AndAChangedOneIsRead(t *testing.T) {
	for _, validator := range []string{"etag", "last-modified"} {
		t.Run(validator, func(t *testing.T) {
			r := newTestRepo(t, false)
			r.etag = validator == "etag"
			r.publish("web-1.0.0.tgz", packageChart(t, "web", "1.0.0"))
			index := filepath.Join(r.dir, "index.yaml")
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(index, old, old); err != nil {
				t.Fatal(err)
			}
			size := func() string {
				st, err := os.Stat(index)
				if err != nil {
					t.Fatal(err)
				}
				return strconv.FormatInt(st.Size(), 10)
			}
			obs := &observed{}
			c := newClient(t, Options{Observer: obs})
			req := Request{RepoURL: r.url(), Name: "web", Version: "1.x", Insecure: true}
			fetch := func(want string) {
				t.Helper()
				ch, err := c.Fetch(context.Background(), req)
				if err != nil || ch.Version != want {
					t.Fatalf("fetch: %v %v, want %s", ch, err, want)
				}
			}
			fetch("1.0.0")
			if got := obs.take(); !slices.Equal(got, []string{"index fetched " + size(), "archive fetched " + strconv.Itoa(len(packageChart(t, "web", "1.0.0")))}) {
				t.Fatalf("first fetch reported %q", got)
			}
			fetch("1.0.0")
			if got := obs.take(); !slices.Equal(got, []string{"index notModified 0"}) {
				t.Fatalf("unchanged index reported %q", got)
			}
			// A new version is seen at once, though published within the
			// second the index was last read.
			r.publish("web-1.1.0.tgz", packageChart(t, "web", "1.1.0"))
			fetch("1.1.0")
			if got := obs.take(); len(got) != 2 || got[0] != "index fetched "+size() {
				t.Fatalf("changed index reported %q", got)
			}
			r.publish("web-1.2.0.tgz", packageChart(t, "web", "1.2.0"))
			fetch("1.2.0")
		})
	}
}

func TestAnUnreachableRepositoryIsReportedAsAFailedFetch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	obs := &observed{}
	_, err = newClient(t, Options{Observer: obs}).Fetch(context.Background(), Request{RepoURL: "http://" + addr + "/charts", Name: "web", Version: "1.x", Insecure: true})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "http://"+addr+"/charts") {
		t.Fatal(err)
	}
	if got := obs.take(); !slices.Equal(got, []string{"index failed 0"}) {
		t.Fatalf("reported %q", got)
	}
}
