package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
)

// hostDo sends a request with the Host and Origin given (no Origin when
// empty), as a rebound page's browser would.
func (e *env) hostDo(t *testing.T, method, path, host, origin string) int {
	t.Helper()
	h := http.Header{}
	if method == http.MethodPost {
		h.Set("Content-Type", "application/json")
		h.Set(api.RequestHeader, "1")
	}
	if origin != "" {
		h.Set("Origin", origin)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header, req.Host = h, host
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Without authentication the API answers only for localhost and loopback
// literals, so that a page whose name DNS rebinds to 127.0.0.1 cannot use
// the operator's browser to read or sync anything.
func TestAPI_withoutAuthOnlyALoopbackHostIsServed(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Tokens = nil; o.NoAuth = true })
	addr := e.srv.Listener.Addr().String()
	port := addr[strings.LastIndex(addr, ":"):]
	for _, host := range []string{
		"rebind.evil.example" + port, // the review's example
		"rebind.evil.example",
		"127.0.0.1.nip.io" + port, // a name that resolves to loopback is still a name
		"localhost.evil.example" + port,
		"localhost." + port, // a name with a trailing dot goes to DNS
		"127.1" + port,      // not a literal Go or the browser agree on
		"0.0.0.0" + port,
		"10.0.0.1" + port,
		"[::ffff:7f00:1]x",
		"[fe80::1%25lo]" + port,
	} {
		for _, path := range []string{"/api/v1/applications/shop/sync", "/api/v1/applications", "/healthz"} {
			method := http.MethodGet
			if strings.HasSuffix(path, "/sync") {
				method = http.MethodPost
			}
			if got := e.hostDo(t, method, path, host, ""); got != http.StatusMisdirectedRequest {
				t.Errorf("%s %s with Host %q: status %d, want 421", method, path, host, got)
			}
		}
	}
	if syncs := e.ctl.Syncs(); len(syncs) != 0 {
		t.Fatalf("a request for a foreign Host requested syncs: %+v", syncs)
	}
	for _, host := range []string{"localhost" + port, "LocalHost", "127.0.0.1" + port, "127.9.9.9", "[::1]" + port, "[::1]"} {
		if got := e.hostDo(t, http.MethodGet, "/api/v1/applications", host, ""); got != http.StatusOK {
			t.Errorf("GET with Host %q: status %d, want 200", host, got)
		}
	}
	if !strings.Contains(e.logs.String(), "loopback address") {
		t.Error("the refusal does not say what the API answers to")
	}
}

// A request that carries an Origin must come from the API's own origin:
// another local server's page (another port) or a sandboxed one ("null")
// is refused even when it names a loopback Host.
func TestAPI_withoutAuthARequestFromAnotherOriginIsRefused(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Tokens = nil; o.NoAuth = true })
	host := strings.TrimPrefix(e.srv.URL, "http://")
	for _, origin := range []string{
		"http://rebind.evil.example:8080",
		"http://localhost:3000",
		"null",
		"https://evil.example",
		"http://" + host + ".evil.example",
		"http://" + host + "/path",
		"file://",
		"http://user@" + host,
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			path := "/api/v1/applications/shop/sync"
			if method == http.MethodGet {
				path = "/api/v1/applications"
			}
			if got := e.hostDo(t, method, path, host, origin); got != http.StatusForbidden {
				t.Errorf("%s %s from Origin %q: status %d, want 403", method, path, origin, got)
			}
		}
	}
	if syncs := e.ctl.Syncs(); len(syncs) != 0 {
		t.Fatalf("a request of another origin requested syncs: %+v", syncs)
	}
	// The console's own page sends its own origin.
	if got := e.hostDo(t, http.MethodPost, "/api/v1/applications/shop/sync", host, "http://"+host); got != http.StatusAccepted {
		t.Errorf("a sync from the API's own origin: status %d, want 202", got)
	}
}

// With authentication on, the Host is not checked: the API may sit behind
// a proxy under any name, and the token is what protects it.
func TestAPI_withAuthAnyHostIsServed(t *testing.T) {
	e := newEnv(t, nil)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/api/v1/applications", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "flotilla.example.com"
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
}
