package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/secretstore/onepasswordtest"
)

// onePasswordCompose: api and worker mount the secret taken from the
// 1Password item, web mounts nothing.
const onePasswordCompose = `version: "3.8"
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
      secretRef: {store: onepassword, path: %s/db, key: password}
`

// The Connect server is closed source and cannot run here: the controller
// reads from onepasswordtest, a hand-written stand-in for Connect, through
// the official SDK, and everything after the read (the swarm, the records)
// is real.
func TestOnePasswordRotationRollsOnlyTheConsumersOnce(t *testing.T) {
	t.Parallel()
	flotillaBinary(t)
	stack := swarmtest.Name(t, "onepw")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	const token = "e2e-op-connect-token-5d1e-never-shown"
	srv := onepasswordtest.Start(t, token)
	tokenFile := onepasswordtest.TokenFile(t, dir, token)
	pw := func(n int) string { return fmt.Sprintf("onepw-e2e-pw%d-91af-plaintext", n) }
	vault := srv.AddVault(stack)
	srv.SetItem(vault, "db",
		onepasswordtest.Field{Label: "username", Value: "shop"},
		onepasswordtest.Field{Label: "password", Value: pw(1)})

	repo := gittest.New(t)
	repo.Commit("secret from 1Password", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(onePasswordCompose, stack)})
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, grant: stack + "/*", store: secretStore{"onepassword", "onePassword",
		fmt.Sprintf("{connectHost: %s, tokenFile: %s}", srv.URL, tokenFile)}})

	var out outputs
	addr := freeAddr(t)
	const adminToken, readToken = "e2e-onepw-admin-0123456789", "e2e-onepw-read-0123456789"
	ctl, server, streams := startWatchedController(t, appsFile, "e2eonepw", addr, adminToken, readToken)
	a := apiReader{t, server}
	status := func() application.Status { return a.status(readToken, stack, &out) }
	history := func() []charts.Release { return a.history(readToken, stack, &out) }
	cl := swarmtest.Client(t)
	mounted := func(svc string) string { return mountedSecret(t, cl, stack, svc) }

	// Revision 1: deployed with the value from the item, version 1.
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		st := status()
		return st.Sync == application.Synced && st.LastAppliedRevision == 1, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	secret1 := mounted("api")
	if secret1 == "" || mounted("worker") != secret1 || mounted("web") != "" {
		t.Fatalf("mounts: api %q worker %q web %q", secret1, mounted("worker"), mounted("web"))
	}
	if st := status(); len(st.SecretRefs) != 1 || st.SecretRefs[0].Store != "onepassword" || st.SecretRefs[0].Path != stack+"/db" || st.SecretRefs[0].Version != 1 || st.SecretRefs[0].SwarmSecret != secret1 {
		t.Fatalf("status secret refs %+v", st.SecretRefs)
	}
	writes := serviceWrites(t, stack)

	// Edited in 1Password: the item moves to version 2 and the controller,
	// polling at the store's own rate, records the rotation.
	srv.SetItem(vault, "db",
		onepasswordtest.Field{Label: "username", Value: "shop"},
		onepasswordtest.Field{Label: "password", Value: pw(2)})
	want := fmt.Sprintf("secret rotated: onepassword %s/db key password version 1 to 2", stack)
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		h := history()
		st := status()
		return len(h) > 0 && h[0].Revision == 2 && h[0].Trigger == want && st.LastAppliedRevision == 2 && st.Sync == application.Synced,
			fmt.Sprintf("status %s rev %d %s, history %+v", st.Sync, st.LastAppliedRevision, st.LastError, h)
	})
	secret2 := mounted("api")
	if secret2 == "" || secret2 == secret1 || mounted("worker") != secret2 || mounted("web") != "" {
		t.Fatalf("after the rotation: api %q worker %q web %q (was %q)", secret2, mounted("worker"), mounted("web"), secret1)
	}
	if st := status(); len(st.SecretRefs) != 1 || st.SecretRefs[0].Version != 2 || st.SecretRefs[0].RotatedRevision != 2 {
		t.Fatalf("status after the rotation: %+v", st.SecretRefs)
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		w := writes()
		return w["api"] == 1 && w["worker"] == 1, fmt.Sprint(w)
	})
	// Two more passes with the item unchanged write nothing: exactly one
	// write per consumer, none for web.
	c := cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + adminToken}}
	for range 2 {
		last := status().LastPass
		if _, code := c.run("app", "refresh", stack); code != 0 {
			t.Fatal("refresh failed")
		}
		swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
			st := status()
			return st.LastPass.After(last), fmt.Sprintf("last pass %s", st.LastPass)
		})
	}
	if w := writes(); w["api"] != 1 || w["worker"] != 1 || w["web"] != 0 || len(w) != 2 {
		t.Fatalf("service writes %v: want api and worker once, web never", w)
	}
	if h := history(); h[0].Revision != 2 {
		t.Fatalf("an unchanged item recorded revision %d", h[0].Revision)
	}

	// A revoked token: the pass fails naming the store and the item, and
	// what runs is left as it is, though the item moved on meanwhile.
	srv.SetToken("e2e-op-connect-token-after-revocation")
	srv.SetItem(vault, "db", onepasswordtest.Field{Label: "password", Value: pw(3)})
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		if _, code := c.run("app", "refresh", stack); code != 0 {
			t.Fatal("refresh failed")
		}
		e := status().LastError
		return strings.Contains(e, `"onepassword"`) && strings.Contains(e, stack+"/db") && strings.Contains(e, "HTTP 401"), e
	})
	if mounted("api") != secret2 || mounted("worker") != secret2 {
		t.Fatal("a failed pass changed what the services mount")
	}
	if h := history(); h[0].Revision != 2 {
		t.Fatalf("a failed pass recorded revision %d", h[0].Revision)
	}
	if w := writes(); w["api"] != 1 || w["worker"] != 1 || len(w) != 2 {
		t.Fatalf("service writes %v after the failed pass", w)
	}

	// Nothing the controller showed or logged holds a value or the token.
	for role, s := range streams {
		out.add("events as "+role, s.String())
	}
	out.add("controller log", ctl.logs.String())
	scanned := out.scan(t, pw(1), pw(2), pw(3), token)
	t.Logf("scanned %d bytes from %d kinds of output; the Connect server answered %d requests", scanned, len(out.bodies), len(srv.Requests()))
}
