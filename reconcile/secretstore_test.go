package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// The pass with a real Vault (dev mode, scripts/vault.sh) behind the
// secret references, on the in-memory backend.

const composeVault = `version: "3.8"
services:
  api:
    image: example/api:1
    secrets: [db_password]
  worker:
    image: example/worker:1
    secrets: [db_password]
  web:
    image: example/web:1
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/shop/db, key: password}
`

func vaultApp(t *testing.T, srv *vaulttest.Server, tokenFile string) application.Application {
	t.Helper()
	f := &application.File{
		APIVersion: application.APIVersion,
		SecretStores: []application.SecretStore{{
			Name: "vault",
			Vault: &application.VaultStore{Address: srv.Addr, Mount: "kv",
				Auth: application.VaultAuth{TokenFile: tokenFile}},
			PollInterval: application.Duration{Duration: time.Nanosecond},
			Grants:       []application.SecretGrant{{Applications: []string{"shop"}, Paths: []string{"kv/data/shop/*"}}},
		}},
		Applications: []application.Application{testApp("shop", true)},
	}
	application.Defaults(f)
	if err := application.Validate(f); err != nil {
		t.Fatal(err)
	}
	return f.Applications[0]
}

func TestARotatedStoreValueUpdatesOnlyItsConsumersAndIsRecorded(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	srv.Policy("shop", `path "kv/data/shop/*" { capabilities = ["read"] }
path "kv/metadata/shop/*" { capabilities = ["read"] }`)
	token, tokenFile := srv.Token(t.TempDir(), "shop")
	const pw1, pw2 = "rec-pw1-0d5e-plaintext", "rec-pw2-0d5e-plaintext"
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw1})

	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	commit := f.commit(t, map[string]string{"docker-compose.yml": composeVault})
	c := newTestController(t, b, f, vaultApp(t, srv, tokenFile))

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %s %v", res.Action, res.Err)
	}
	if refs := res.Status.SecretRefs; len(refs) != 1 || refs[0].Version != 1 || refs[0].Path != "kv/data/shop/db" || !refs[0].LastRotated.IsZero() {
		t.Fatalf("status refs %+v", refs)
	}
	writes := b.Writes()
	webV := b.ServiceVersion("shop", "shop_web")

	// Unchanged in Vault: an unchanged pass, no write.
	if res = mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("steady pass: %s %v, %d writes", res.Action, res.Err, b.Writes()-writes)
	}

	// Rotated: the diff shows a changed secret by name and keyed digest.
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw2})
	d, err := c.Diff(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != charts.Upgrade || !strings.Contains(d.Manifest, "-    storeTag:") || !strings.Contains(d.Manifest, "+    storeTag:") {
		t.Fatalf("diff %s:\n%s", d.Action, d.Manifest)
	}
	if strings.Contains(d.Manifest, pw1) || strings.Contains(d.Manifest, pw2) {
		t.Fatalf("the diff holds a value:\n%s", d.Manifest)
	}

	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("rotation: %s %v", res.Action, res.Err)
	}
	// Three writes: the new secret, then api and worker once each.
	if got := res.Deployed.Updated; !slices.Equal(got, []string{"api", "worker"}) || res.Deployed.Writes != 3 {
		t.Fatalf("rotation updated %v in %d writes, want the secret, then api and worker once each", got, res.Deployed.Writes)
	}
	if b.ServiceVersion("shop", "shop_web") != webV {
		t.Fatal("web, which mounts no store secret, was written")
	}
	rs, _ := b.Releases(context.Background(), "shop")
	rec := rs[0]
	if want := "secret rotated: vault kv/data/shop/db key password version 1 to 2"; rec.Trigger != want || rec.Commit != commit {
		t.Fatalf("record %d trigger %q commit %s, want %q at %s", rec.Revision, rec.Trigger, rec.Commit, want, commit)
	}
	if len(rec.SecretRefs) != 1 || rec.SecretRefs[0].Version != 2 || rec.SecretRefs[0].RotatedRevision != 2 {
		t.Fatalf("record refs %+v", rec.SecretRefs)
	}
	for _, r := range rs {
		if strings.Contains(r.Manifest, pw1) || strings.Contains(r.Manifest, pw2) {
			t.Fatalf("record %d holds a value", r.Revision)
		}
	}
	if refs := res.Status.SecretRefs; len(refs) != 1 || refs[0].Version != 2 || refs[0].RotatedRevision != 2 || refs[0].LastRotated.IsZero() {
		t.Fatalf("status refs after rotation %+v", refs)
	}

	// A revoked token: the pass fails, transient, naming store and path;
	// nothing is written.
	srv.Revoke(token)
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "rec-pw3-0d5e-plaintext"})
	writes = b.Writes()
	res = mustReconcile(t, c, "shop")
	if res.Err == nil || KindOf(res.Err) != Transient {
		t.Fatalf("revoked token: %v (%s), want a transient failure", res.Err, KindOf(res.Err))
	}
	for _, want := range []string{`"vault"`, `"kv/data/shop/db"`, "permission denied"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q lacks %s", res.Err, want)
		}
	}
	if b.Writes() != writes {
		t.Fatalf("a failed pass wrote %d times", b.Writes()-writes)
	}
}

func TestAReferenceOutsideTheGrantFailsBeforeAnyRead(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(t.TempDir(), "root")
	srv.Write("kv/data/other/db", true, map[string]any{"password": "other-team-9f1a-plaintext"})
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": strings.Replace(composeVault, "kv/data/shop/db", "kv/data/other/db", 1)})
	// The token file is removed: had the store been asked, the error would
	// be about the file, not the grant.
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	c := newTestController(t, b, f, vaultApp(t, srv, filepath.Clean(tokenFile)))
	res := mustReconcile(t, c, "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "not granted by the applications file") || KindOf(res.Err) != Stalled {
		t.Fatalf("err %v (%s), want a stalled refusal naming the grant", res.Err, KindOf(res.Err))
	}
	if strings.Contains(res.Err.Error(), "other-team") || b.Writes() != 0 {
		t.Fatalf("err %v, %d writes", res.Err, b.Writes())
	}
}

// The value cache is shared by every application; the grant is not. An
// application of another project that names an entry a granted
// application has just read is refused by the grant, before the cache or
// the store is asked.
func TestAnotherProjectIsRefusedAValueAGrantedApplicationHasCached(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(t.TempDir(), "root")
	const pw = "cached-shop-pw-5a9e-plaintext"
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw})
	store := vaultStoreFor("vault", srv.Addr, tokenFile, "")
	store.PollInterval.Duration = time.Hour
	store.Grants = []application.SecretGrant{
		{Projects: []string{"shop-team"}, Paths: []string{"kv/data/shop/*"}},
		{Projects: []string{"blog-team"}, Paths: []string{"kv/data/blog/*"}},
	}
	shop, blog := testApp("shop", true), testApp("blog", true)
	shop.Source.Path, blog.Source.Path = "shop", "blog"
	f := &application.File{
		APIVersion: application.APIVersion,
		Projects: []application.Project{
			{Name: "shop-team", Applications: []string{"shop"}},
			{Name: "blog-team", Applications: []string{"blog"}},
		},
		SecretStores: []application.SecretStore{store},
		Applications: []application.Application{shop, blog},
	}
	application.Defaults(f)
	if err := application.Validate(f); err != nil {
		t.Fatal(err)
	}
	b := chartstest.NewMinimal()
	fetch := newFakeFetcher()
	// blog's repository names shop's entry.
	fetch.commit(t, map[string]string{
		"shop/docker-compose.yml": composeVault,
		"blog/docker-compose.yml": composeVault,
	})
	c := newTestController(t, b, fetch, f.Applications...)
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Install {
		t.Fatalf("shop install: %s %v", res.Action, res.Err)
	}
	// Had blog's pass reached the store rather than the cache, the error
	// would be about this file.
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	writes := b.Writes()
	res := mustReconcile(t, c, "blog")
	if res.Err == nil || KindOf(res.Err) != Stalled {
		t.Fatalf("blog naming shop's entry: %v (%s), want a stalled refusal", res.Err, KindOf(res.Err))
	}
	for _, want := range []string{`path not granted by the applications file to application "blog"`, `"vault"`, `"kv/data/shop/db"`} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q lacks %s", res.Err, want)
		}
	}
	if strings.Contains(res.Err.Error(), pw) || strings.Contains(res.Err.Error(), tokenFile) {
		t.Fatalf("error %q holds the value or went to the store", res.Err)
	}
	if b.Writes() != writes || len(res.Status.SecretRefs) != 0 {
		t.Fatalf("blog's refused pass wrote %d times, status refs %+v", b.Writes()-writes, res.Status.SecretRefs)
	}
	// shop is still served from the cache.
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("shop after blog's refusal: %s %v", res.Action, res.Err)
	}
}
