package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The controller binary run with --insecure-no-auth on loopback answers
// only requests for a loopback Host from no other origin: a page whose
// name DNS rebinds to 127.0.0.1 gets 421 and syncs nothing.
func TestANoAuthControllerAnswersOnlyALoopbackHost(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "rebind")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": idleStack})
	addr := freeAddr(t)
	c := startController(t, shutdownApps(t, stack, repo.Dir, ""), stack, nil, "--listen", addr, "--insecure-no-auth")
	port := addr[strings.LastIndex(addr, ":"):]

	send := func(method, path, host, origin string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		code := send("GET", "/api/v1/applications/"+stack, "localhost"+port, "")
		return code == http.StatusOK, "the API answers for localhost"
	})
	for _, host := range []string{"rebind.evil.example" + port, "127.0.0.1.nip.io" + port, "localhost.evil.example"} {
		if code := send("POST", "/api/v1/applications/"+stack+"/sync", host, ""); code != http.StatusMisdirectedRequest {
			t.Errorf("a sync for Host %q: status %d, want 421", host, code)
		}
		if code := send("GET", "/api/v1/applications", host, ""); code != http.StatusMisdirectedRequest {
			t.Errorf("the list for Host %q: status %d, want 421", host, code)
		}
	}
	for _, origin := range []string{"http://rebind.evil.example" + port, "null"} {
		if code := send("POST", "/api/v1/applications/"+stack+"/refresh", "127.0.0.1"+port, origin); code != http.StatusForbidden {
			t.Errorf("a refresh from Origin %q: status %d, want 403", origin, code)
		}
	}
	if strings.Contains(c.logs.String(), "sync requested") || strings.Contains(c.logs.String(), "refresh requested") {
		t.Errorf("a refused request reached a handler:\n%s", c.logs)
	}
}
