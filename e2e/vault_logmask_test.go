package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// vaultLogCompose: the task prints its environment on start, so the
// value the store gives SHOP_LICENSE reaches the service's logs. The name
// does not look secret, so only the value can blank it.
const vaultLogCompose = `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment:
      MARK: vlogmask-e2e
    x-flotilla:
      env:
        SHOP_LICENSE:
          secretRef: {store: vault, path: kv/data/%s/db, key: password}
`

func TestLogsBlankStoreValuesBeforeAndAfterARotationAndNoOutputHoldsThem(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "vlogmask")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	entry := "kv/data/" + stack + "/db"
	pw := func(n int) string { return fmt.Sprintf("vlogmask-e2e-pw%d-d47e-plaintext", n) }
	srv, token, tokenFile := vaultTeam(t, dir, stack, entry, "password", pw(1))
	repo := gittest.New(t)
	repo.Commit("an environment value from the store", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultLogCompose, stack)})

	var out outputs
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 2), grant: "kv/data/" + stack + "/*",
		notify: &out})
	const admin, reader = "e2e-vlogmask-admin-0123456789", "e2e-vlogmask-read-0123456789"
	ctl, server, streams := startWatchedController(t, appsFile, "e2evlogmask", freeAddr(t), admin, reader)
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}
	a := apiReader{t, server}
	tokens := map[string]string{"admin": admin, "read": reader}

	// logs waits until both the CLI and the API show at least n of the
	// service's starts, each with its SHOP_LICENSE line, and keeps both
	// answers for the scan.
	logs := func(n int) (string, string) {
		t.Helper()
		var cliOut string
		swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
			var code int
			cliOut, code = c.run("app", "logs", stack, "--tail", "500")
			return code == 0 && strings.Count(cliOut, "MARK=vlogmask-e2e") >= n && strings.Count(cliOut, "SHOP_LICENSE=") >= n, cliOut
		})
		out.add("flotilla app logs", cliOut)
		req, _ := http.NewRequest(http.MethodGet, server+"/api/v1/applications/"+stack+"/logs?tail=500", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET …/logs: %d %v %s", resp.StatusCode, err, b)
		}
		if h := resp.Header.Get(api.LogMaskingHeader); !strings.Contains(h, fmt.Sprintf("revision %d", n)) || (n > 1) != strings.Contains(h, "before it") {
			t.Errorf("GET …/logs: %s %q", api.LogMaskingHeader, h)
		}
		out.add("GET …/logs", string(b))
		return cliOut, string(b)
	}
	masked := func(n int, cliOut, apiOut string) {
		t.Helper()
		for what, text := range map[string]string{"flotilla app logs": cliOut, "GET …/logs": apiOut} {
			if got := strings.Count(text, "SHOP_LICENSE="+reconcile.LogMaskText); got < n {
				t.Errorf("%s shows SHOP_LICENSE=%s %d times, want %d:\n%s", what, reconcile.LogMaskText, got, n, text)
			}
		}
	}

	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		st, _ := c.tryStatus(stack)
		return st.Sync == application.Synced && st.LastAppliedRevision == 1, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	cliOut, apiOut := logs(1)
	masked(1, cliOut, apiOut)
	a.collect(stack, tokens, &out)

	// A rotation restarts the task with the new value; the old task's
	// lines, which printed the old value, are in the logs beside the new
	// one's, and both values are blanked.
	srv.Write(entry, true, map[string]any{"password": pw(2)})
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		st, _ := c.tryStatus(stack)
		return st.Sync == application.Synced && st.LastAppliedRevision == 2, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	cliOut, apiOut = logs(2)
	masked(2, cliOut, apiOut)
	a.collect(stack, tokens, &out)
	// A refresh leaves an entry in the audit log, scanned below.
	if _, code := c.run("app", "refresh", stack); code != 0 {
		t.Fatal("refresh failed")
	}
	for _, p := range []string{"/metrics", "/api/v1/audit"} {
		out.add("GET "+p, a.get(admin, p))
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(streams["read"].String(), "secret rotated"), "no rotation event yet"
	})
	for role, s := range streams {
		out.add("events as "+role, s.String())
	}
	out.add("controller log", ctl.logs.String())

	secrets := []string{pw(1), pw(2), token}
	scanned := out.scan(t, secrets...)
	for _, kind := range []string{"flotilla app logs", "GET …/logs", "GET /metrics", "GET /api/v1/audit", "notification", "events as read", "controller log"} {
		if len(out.bodies[kind]) == 0 {
			t.Errorf("no %s was scanned", kind)
		}
	}
	t.Logf("scanned %d bytes from %d kinds of output", scanned, len(out.bodies))
}
