package reconcile

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// The logs' mask of store values across a rotation, with a real Vault (dev
// mode, scripts/vault.sh) behind the references: KV v1 keeps no versions,
// so the value a replaced task printed is known only to a controller that
// rendered it; KV v2 gives it again at the recorded version.

const composeStoreSecret = `version: "3.8"
services:
  api:
    image: example/api:1
    secrets: [db_password]
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: vault, path: %s, key: password}
`

// storeLogMaskSetup deploys "shop" with its password at pw1 in a KV store
// of version kv, rotates it to pw2 and deploys again (revision 2). It
// returns the first controller and a function that starts another one, as
// a restart would: same swarm, repository and secret store key file.
func storeLogMaskSetup(t *testing.T, kv int, pw1, pw2 string) (*Controller, func() *Controller) {
	t.Helper()
	srv := vaulttest.Start(t)
	srv.Mount("kv", kv)
	entry, grant := "kv/shop/db", "kv/shop/*"
	if kv == 2 {
		entry, grant = "kv/data/shop/db", "kv/data/shop/*"
	}
	srv.Policy("shop", `path "kv/*" { capabilities = ["read"] }`)
	_, tokenFile := srv.Token(t.TempDir(), "shop")
	srv.Write(entry, kv == 2, map[string]any{"password": pw1})

	f := &application.File{
		APIVersion: application.APIVersion,
		SecretStores: []application.SecretStore{{
			Name: "vault",
			Vault: &application.VaultStore{Address: srv.Addr, Mount: "kv", KVVersion: kv,
				Auth: application.VaultAuth{TokenFile: tokenFile}},
			PollInterval: application.Duration{Duration: time.Nanosecond},
			Grants:       []application.SecretGrant{{Applications: []string{"shop"}, Paths: []string{grant}}},
		}},
		Applications: []application.Application{testApp("shop", true)},
	}
	application.Defaults(f)
	if err := application.Validate(f); err != nil {
		t.Fatal(err)
	}
	app := f.Applications[0]

	b := chartstest.NewMinimal()
	fetch := newFakeFetcher()
	commit := fetch.commit(t, map[string]string{"docker-compose.yml": strings.Replace(composeStoreSecret, "%s", entry, 1)})
	fetch.commits[commit] = commit
	keyFile := filepath.Join(t.TempDir(), "secretstore.key")
	start := func() *Controller {
		t.Helper()
		st, err := secretstore.Open(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: fetch, Logger: quiet, SecretStores: st}, []application.Application{app})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: revision %d, %v", res.Revision, res.Err)
	}
	// Before any rotation a restarted controller reproduces the value: the
	// key file keeps KV v1's names.
	if m, err := start().LogMask(context.Background(), "shop"); err != nil || m.Blank("pw "+pw1) != "pw ***" {
		t.Fatalf("a restarted controller before the rotation: %v, %q", err, m.Blank("pw "+pw1))
	}
	srv.Write(entry, kv == 2, map[string]any{"password": pw2})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("rotation: revision %d, %v", res.Revision, res.Err)
	}
	return c, start
}

func TestLogMaskOfAStoreWithoutVersionsBlanksTheOldValueItSawAndWithholdsWhatItDidNot(t *testing.T) {
	const pw1, pw2 = "kv1-old-pw-7f3a-plaintext", "kv1-new-pw-7f3a-plaintext"
	c, restart := storeLogMaskSetup(t, 1, pw1, pw2)
	line := "old " + pw1 + " new " + pw2

	// The controller that deployed both values blanks both, though a
	// render of revision 1's commit now gives the new value.
	m, err := c.LogMask(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Blank(line); got != "old *** new ***" {
		t.Errorf("Blank = %q", got)
	}

	// A restarted controller never saw the old value: it withholds the
	// logs, naming the revision and the store entry, not the value.
	fresh := restart()
	_, err = fresh.LogMask(context.Background(), "shop")
	if err == nil {
		t.Fatal("a restarted controller masked the logs without the value revision 1 deployed")
	}
	for _, want := range []string{"revision 1", "kv/shop/db", "password", "no past versions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), pw1) || strings.Contains(err.Error(), pw2) {
		t.Fatalf("the error holds a value: %v", err)
	}
	// Its own passes render only the current value: still withheld.
	if res := mustReconcile(t, fresh, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, err := fresh.LogMask(context.Background(), "shop"); err == nil || !strings.Contains(err.Error(), "revision 1") {
		t.Fatalf("after the restarted controller's pass: %v", err)
	}

	// The first controller forgets the application once it is removed.
	c.SetApplications(nil)
	if len(c.seen.values("shop")) != 0 {
		t.Error("the values of a removed application are kept")
	}
}

func TestLogMaskOfAVersionedStoreReproducesTheOldValueAfterARestart(t *testing.T) {
	const pw1, pw2 = "kv2-old-pw-7f3a-plaintext", "kv2-new-pw-7f3a-plaintext"
	c, restart := storeLogMaskSetup(t, 2, pw1, pw2)
	for what, ctl := range map[string]*Controller{"running": c, "restarted": restart()} {
		m, err := ctl.LogMask(context.Background(), "shop")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := m.Blank("old " + pw1 + " new " + pw2); got != "old *** new ***" {
			t.Errorf("%s: Blank = %q", what, got)
		}
	}
}
