package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// vaultKV1LogCompose is vaultLogCompose with its value from a KV v1 mount,
// which keeps no versions.
const vaultKV1LogCompose = `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment:
      MARK: vkv1logs-e2e
    x-flotilla:
      env:
        SHOP_LICENSE:
          secretRef: {store: vault, path: kv/%s/db, key: password}
`

// A KV v1 value rotated: Vault no longer has the old value the replaced
// task printed. The controller that deployed it blanks it; a restarted one
// (same data directory, so the same names for unchanged values) withholds
// the logs rather than show it.
func TestLogsOfAKV1RotationBlankTheOldValueAndAreWithheldAfterARestart(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "vkv1logs")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	entry := "kv/" + stack + "/db"
	pw := func(n int) string { return fmt.Sprintf("vkv1logs-e2e-pw%d-5c1b-plaintext", n) }
	srv := vaulttest.Start(t)
	srv.Mount("kv", 1)
	srv.Policy("team", fmt.Sprintf("path \"kv/%s/*\" { capabilities = [\"read\"] }\n", stack))
	_, tokenFile := srv.Token(dir, "team")
	srv.Write(entry, false, map[string]any{"password": pw(1)})
	repo := gittest.New(t)
	repo.Commit("an environment value from a KV v1 store", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultKV1LogCompose, stack)})

	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 1), grant: "kv/" + stack + "/*"})
	const admin = "e2e-vkv1logs-admin-0123456789"
	data := filepath.Join(dir, "data")
	start := func() (*stoppable, string) {
		t.Helper()
		addr := freeAddr(t)
		ctl := startController(t, appsFile, "e2evkv1logs", []string{"FLOTILLA_ADMIN_TOKEN=" + admin}, "--data", data, "--listen", addr)
		server := "http://" + addr
		waitReady(t, server, 60*time.Second)
		return ctl, server
	}
	ctl, server := start()
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}
	synced := func(c cli, rev int) {
		t.Helper()
		swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
			st, _ := c.tryStatus(stack)
			return st.Sync == application.Synced && st.LastAppliedRevision == rev, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
		})
	}
	synced(c, 1)
	srv.Write(entry, false, map[string]any{"password": pw(2)})
	synced(c, 2)

	// Both tasks' lines, the replaced one's with the old value, are
	// blanked by the controller that deployed both values.
	var out string
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		var code int
		out, code = c.run("app", "logs", stack, "--tail", "500")
		return code == 0 && strings.Count(out, "MARK=vkv1logs-e2e") >= 2 && strings.Count(out, "SHOP_LICENSE=") >= 2, out
	})
	if got := strings.Count(out, "SHOP_LICENSE="+reconcile.LogMaskText); got < 2 {
		t.Errorf("flotilla app logs shows SHOP_LICENSE=%s %d times, want 2:\n%s", reconcile.LogMaskText, got, out)
	}

	// Restarted, the controller never saw the old value: 503, naming the
	// revision and the entry, and no line.
	if code, took := ctl.stop(syscall.SIGTERM, stopDeadline); code != 0 {
		t.Fatalf("controller exited %d after %s", code, took)
	}
	_, server = start()
	a := apiReader{t, server}
	var code int
	var body string
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		code, body = a.getAny(admin, "/api/v1/applications/"+stack+"/logs?tail=500")
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
	})
	for _, want := range []string{"revision 1", entry, "withheld"} {
		if !strings.Contains(body, want) {
			t.Errorf("the 503 does not name %q: %s", want, body)
		}
	}
	c2 := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}
	cliOut, cliCode := c2.run("app", "logs", stack, "--tail", "500")
	if cliCode == 0 {
		t.Errorf("flotilla app logs after the restart exited 0:\n%s", cliOut)
	}
	for what, text := range map[string]string{"the 503": body, "flotilla app logs": cliOut, "first log read": out} {
		for _, s := range []string{pw(1), pw(2)} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the plaintext %q", what, s)
			}
		}
	}
	// The restart rolled nothing: the value's name survived in the data
	// directory's key.
	synced(c2, 2)
}
