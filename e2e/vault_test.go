package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// vaultCompose: api and worker mount the secret taken from Vault, web
// mounts nothing, so a rotation must write api and worker and leave web.
const vaultCompose = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    secrets: [db_password]
    stop_grace_period: 1s
  worker:
    image: flotilla-test/app:1
    secrets: [db_password]
    stop_grace_period: 1s
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/%s/db, key: password}
`

func TestVaultRotationRollsOnlyTheConsumersAndLeaksNoValue(t *testing.T) {
	t.Parallel()
	flotillaBinary(t)
	stack := swarmtest.Name(t, "vault")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	pw := func(n int) string { return fmt.Sprintf("vault-e2e-pw%d-6c2d-plaintext", n) }
	entry := "kv/data/" + stack + "/db"
	srv, token, tokenFile := vaultTeam(t, dir, stack, entry, "password", pw(1))

	repo := gittest.New(t)
	repo.Commit("secret by reference", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultCompose, stack)})

	var out outputs
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 2), grant: "kv/data/" + stack + "/*",
		notify: &out, syncPolicy: []string{"retainRotated: 1"}})

	addr := freeAddr(t)
	const adminToken, readToken = "e2e-vault-admin-0123456789", "e2e-vault-read-0123456789"
	ctl, server, streams := startWatchedController(t, appsFile, "e2evault", addr, adminToken, readToken)
	a := apiReader{t, server}
	getAny, get := a.getAny, a.get
	// storeDown: the diff renders, so with the store refusing it fails,
	// naming the store and the entry; its answer is scanned too.
	collectAPI := func(storeDown bool) {
		for role, tok := range map[string]string{"admin": adminToken, "read": readToken} {
			for _, path := range []string{"/api/v1/applications", "/api/v1/applications/" + stack,
				"/api/v1/applications/" + stack + "/history", "/api/v1/applications/" + stack + "/diff"} {
				if storeDown && strings.HasSuffix(path, "/diff") {
					code, body := getAny(tok, path)
					if code == http.StatusOK || !strings.Contains(body, "kv/data/"+stack+"/db") {
						t.Errorf("diff with the store refusing: %d %s", code, body)
					}
					out.add("GET "+path+" as "+role, body)
					continue
				}
				out.add("GET "+path+" as "+role, get(tok, path))
			}
		}
	}
	status := func() application.Status { return a.status(readToken, stack, nil) }
	history := func() []charts.Release { return a.history(readToken, stack, nil) }
	cl := swarmtest.Client(t)
	mounted := func(svc string) string { return mountedSecret(t, cl, stack, svc) }
	swarmSecrets := func() []string { return stackSecrets(t, stack+"_db_password-") }

	// Revision 1: deployed with the value from Vault.
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		st := status()
		return st.Sync == application.Synced && st.LastAppliedRevision == 1, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	secret1 := mounted("api")
	if secret1 == "" || mounted("worker") != secret1 || mounted("web") != "" {
		t.Fatalf("mounts: api %q worker %q web %q", secret1, mounted("worker"), mounted("web"))
	}
	if st := status(); len(st.SecretRefs) != 1 || st.SecretRefs[0].Version != 1 || st.SecretRefs[0].Path != entry || st.SecretRefs[0].SwarmSecret != secret1 {
		t.Fatalf("status secret refs %+v", st.SecretRefs)
	}
	collectAPI(false)
	writes := serviceWrites(t, stack)

	// rotate writes version n in Vault and waits for the revision that
	// deploys it, whose cause names the entry and versions.
	rotate := func(n int) string {
		t.Helper()
		srv.Write(entry, true, map[string]any{"password": pw(n)})
		want := fmt.Sprintf("secret rotated: vault %s key password version %d to %d", entry, n-1, n)
		swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
			h := history()
			// The record is on the swarm before the pass that wrote it
			// publishes its status.
			st := status()
			return len(h) > 0 && h[0].Revision == n && h[0].Trigger == want && st.LastAppliedRevision == n && st.Sync == application.Synced,
				fmt.Sprintf("status %s rev %d, history %+v", st.Sync, st.LastAppliedRevision, h)
		})
		st := status()
		if len(st.SecretRefs) != 1 || st.SecretRefs[0].Version != n || st.SecretRefs[0].RotatedRevision != n || st.SecretRefs[0].LastRotated.IsZero() {
			t.Fatalf("status after rotation %d: %+v", n, st.SecretRefs)
		}
		name := mounted("api")
		if name == "" || mounted("worker") != name {
			t.Fatalf("after rotation %d: api mounts %q, worker %q", n, name, mounted("worker"))
		}
		collectAPI(false)
		return name
	}
	secret2 := rotate(2)
	secret3 := rotate(3)
	if secret2 == secret1 || secret3 == secret2 {
		t.Fatalf("secrets %s, %s, %s: a rotation kept the name", secret1, secret2, secret3)
	}
	// Each rotation wrote api and worker once, and web never.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		w := writes()
		return w["api"] == 2 && w["worker"] == 2, fmt.Sprint(w)
	})
	// retainRotated: 1 keeps secret2 for a rollback; secret1, mounted by
	// nothing, is swept.
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		got := swarmSecrets()
		return slices.Equal(got, sortedOf(secret2, secret3)), fmt.Sprint(got)
	})
	if w := writes(); w["api"] != 2 || w["worker"] != 2 || w["web"] != 0 {
		t.Fatalf("service writes %v: want api and worker twice (one per rotation), web never", w)
	}

	// A rollback to revision 1, whose secret the sweep removed: the store
	// is read at version 1 again, secret1 is made again under its own name,
	// and api and worker mount it; web is never written.
	c := cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + adminToken}}
	if outText, code := c.run("app", "rollback", stack, "1", "--wait"); code != 0 {
		t.Fatalf("rollback: exit %d: %s", code, outText)
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		h := history()
		return h[0].Revision == 4 && mounted("api") == secret1 && mounted("worker") == secret1 && slices.Contains(swarmSecrets(), secret1),
			fmt.Sprintf("revision %d, api %s, worker %s, secrets %v", h[0].Revision, mounted("api"), mounted("worker"), swarmSecrets())
	})
	if w := writes(); w["api"] != 3 || w["worker"] != 3 || w["web"] != 0 {
		t.Fatalf("service writes %v after the rollback: want api and worker three times, web never", w)
	}
	collectAPI(false)

	// A revoked token: the pass fails naming the store and the entry, and
	// nothing that runs is changed or removed.
	srv.Revoke(token)
	srv.Write(entry, true, map[string]any{"password": pw(4)})
	before := swarmSecrets()
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		if _, code := c.run("app", "refresh", stack); code != 0 {
			t.Fatal("refresh failed")
		}
		e := status().LastError
		return strings.Contains(e, `"vault"`) && strings.Contains(e, entry) && strings.Contains(e, "permission denied"), e
	})
	if got := swarmSecrets(); !slices.Equal(got, before) {
		t.Fatalf("a failed pass changed the secrets: %v → %v", before, got)
	}
	if mounted("api") != secret1 || mounted("worker") != secret1 {
		t.Fatal("a failed pass changed what the services mount")
	}
	if h := history(); h[0].Revision != 4 {
		t.Fatalf("a failed pass recorded revision %d", h[0].Revision)
	}
	if w := writes(); w["api"] != 3 || w["worker"] != 3 || w["web"] != 0 {
		t.Fatalf("service writes %v after the failed pass", w)
	}
	collectAPI(true)

	// Every release record on the swarm, as stored and decompressed.
	recs, err := cl.ConfigList(context.Background(), client.ConfigListOptions{Filters: make(client.Filters).Add("label", backend.LabelRelease+"="+stack)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs.Items {
		if !strings.HasPrefix(r.Spec.Name, "flotilla-release") {
			continue
		}
		full, err := cl.ConfigInspect(context.Background(), r.ID, client.ConfigInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(full.Config.Spec.Data))
		if err != nil {
			t.Fatalf("record %s: %v", r.Spec.Name, err)
		}
		text, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		out.add("record "+r.Spec.Name, string(text))
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(streams["read"].String(), "secret rotated"), "no rotation event yet"
	})
	for role, s := range streams {
		out.add("events as "+role, s.String())
	}
	out.add("controller log", ctl.logs.String())
	secrets := []string{pw(1), pw(2), pw(3), pw(4), token}
	scanned := out.scan(t, secrets...)
	for _, kind := range []string{"record ", "notification", "controller log", "events as read"} {
		found := false
		for what := range out.bodies {
			found = found || strings.HasPrefix(what, kind)
		}
		if !found {
			t.Errorf("no %s was scanned", kind)
		}
	}
	t.Logf("scanned %d bytes from %d kinds of output", scanned, len(out.bodies))
}

func sortedOf(s ...string) []string {
	slices.Sort(s)
	return s
}
