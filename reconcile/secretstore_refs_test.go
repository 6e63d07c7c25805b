package reconcile

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

const composeVaultRefs = `version: "3.8"
services:
  api:
    image: example/api:1
    configs: [app_conf]
  worker:
    image: example/worker:1
    x-flotilla:
      env:
        DB_PASSWORD:
          secretRef: {store: vault, path: kv/data/shop/db, key: password}
  web:
    image: example/web:1
configs:
  app_conf:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/shop/app, key: conf}
`

func TestStoreConfigsAndEnvironmentValuesRollOnlyTheirConsumers(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	srv.Policy("shop", `path "kv/data/shop/*" { capabilities = ["read"] }
path "kv/metadata/shop/*" { capabilities = ["read"] }`)
	_, tokenFile := srv.Token(t.TempDir(), "shop")
	const pw1, pw2 = "refs-pw1-6a0c-plaintext", "refs-pw2-6a0c-plaintext"
	const conf1, conf2 = "refs-conf1-e2b9-plaintext", "refs-conf2-e2b9-plaintext"
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw1})
	srv.Write("kv/data/shop/app", true, map[string]any{"conf": conf1})

	b := chartstest.NewMinimal()
	f := commitFetcher{newFakeFetcher()}
	f.commit(t, map[string]string{"docker-compose.yml": composeVaultRefs})
	c := newTestController(t, b, f, vaultApp(t, srv, tokenFile))
	values := []string{pw1, pw2, conf1, conf2}
	noValue := func(where string, v any) {
		t.Helper()
		var s string
		if str, ok := v.(string); ok {
			s = str
		} else {
			j, _ := json.Marshal(v)
			s = string(j)
		}
		for _, val := range values {
			if strings.Contains(s, val) {
				t.Fatalf("%s holds a value:\n%s", where, s)
			}
		}
	}

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %s %v", res.Action, res.Err)
	}
	refs := res.Status.SecretRefs
	if len(refs) != 2 || refs[0].Kind != "config" || refs[0].Secret != "app_conf" || refs[1].Kind != "env" || refs[1].Service != "worker" || refs[1].Secret != "DB_PASSWORD" || refs[1].Version != 1 {
		t.Fatalf("status refs %+v", refs)
	}
	noValue("status", res.Status)
	apiV, webV := b.ServiceVersion("shop", "shop_api"), b.ServiceVersion("shop", "shop_web")

	// The environment value rotates: worker alone, once; the diff shows a
	// masked change.
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw2})
	d, err := c.Diff(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != charts.Upgrade || !strings.Contains(d.Manifest, "-        DB_PASSWORD: ***") || !strings.Contains(d.Manifest, "+        DB_PASSWORD: ***") {
		t.Fatalf("diff %s:\n%s", d.Action, d.Manifest)
	}
	noValue("diff", d)
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("env rotation: %s %v", res.Action, res.Err)
	}
	if got := res.Deployed.Updated; !slices.Equal(got, []string{"worker"}) || res.Deployed.Writes != 1 {
		t.Fatalf("env rotation updated %v in %d writes, want worker once", got, res.Deployed.Writes)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if want := "secret rotated: vault kv/data/shop/db key password version 1 to 2"; rs[0].Trigger != want {
		t.Fatalf("trigger %q, want %q", rs[0].Trigger, want)
	}

	// The config rotates: a new config, then api alone, once.
	srv.Write("kv/data/shop/app", true, map[string]any{"conf": conf2})
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("config rotation: %s %v", res.Action, res.Err)
	}
	if got := res.Deployed.Updated; !slices.Equal(got, []string{"api"}) || res.Deployed.Writes != 2 {
		t.Fatalf("config rotation updated %v in %d writes, want the config, then api once", got, res.Deployed.Writes)
	}
	if b.ServiceVersion("shop", "shop_api") != apiV+1 || b.ServiceVersion("shop", "shop_web") != webV {
		t.Fatal("api was not written exactly once, or web was written")
	}
	rs, _ = b.Releases(context.Background(), "shop")
	rec := rs[0]
	if want := "secret rotated: vault kv/data/shop/app key conf version 1 to 2"; rec.Trigger != want {
		t.Fatalf("trigger %q, want %q", rec.Trigger, want)
	}
	if len(rec.SecretRefs) != 2 || rec.SecretRefs[0].RotatedRevision != 3 || rec.SecretRefs[1].RotatedRevision != 2 {
		t.Fatalf("record refs %+v", rec.SecretRefs)
	}
	for _, r := range rs {
		noValue("record", r)
	}

	// Steady: nothing more.
	writes := b.Writes()
	if res = mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("steady pass: %s %v, %d writes", res.Action, res.Err, b.Writes()-writes)
	}

	// A rollback to a revision from before the rotations: the store keeps
	// its versions, so the values revision 1 deployed are read again (KV v2
	// ?version=1), its placeholders and config name match, and api and
	// worker go back, once each; web is not touched.
	res, _ = c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1})
	if res.Err != nil {
		t.Fatalf("rollback to 1: %v", res.Err)
	}
	if got := res.Deployed.Updated; !slices.Equal(got, []string{"api", "worker"}) {
		t.Fatalf("rollback updated %v, want api and worker", got)
	}
	if b.ServiceVersion("shop", "shop_web") != webV {
		t.Fatal("the rollback wrote web")
	}
	rs, _ = b.Releases(context.Background(), "shop")
	rec = rs[0]
	if !strings.HasPrefix(rec.Trigger, "rollback to revision 1") || !strings.Contains(rec.Trigger, "version 2 to 1") {
		t.Fatalf("rollback trigger %q", rec.Trigger)
	}
	if len(rec.SecretRefs) != 2 || rec.SecretRefs[0].Version != 1 || rec.SecretRefs[1].Version != 1 {
		t.Fatalf("rollback record refs %+v, want both at version 1", rec.SecretRefs)
	}
	if rec.Manifest != rs[len(rs)-1].Manifest {
		t.Fatalf("the rollback deployed another manifest than revision 1's:\n%s\n---\n%s", rec.Manifest, rs[len(rs)-1].Manifest)
	}
	for _, r := range rs {
		noValue("record", r)
	}
	// Pinned: the next pass stays on revision 1's values.
	writes = b.Writes()
	if res = mustReconcile(t, c, "shop"); res.Err != nil || b.Writes() != writes || res.Status.Pinned == "" {
		t.Fatalf("pinned pass: %s %v, %d writes, pinned %q", res.Action, res.Err, b.Writes()-writes, res.Status.Pinned)
	}

	// A version the store no longer has (destroyed) cannot be read again:
	// the rollback fails naming the version, and nothing is written.
	if _, err := srv.Client.Logical().WriteWithContext(context.Background(), "kv/destroy/shop/db", map[string]any{"versions": []int{2}}); err != nil {
		t.Fatal(err)
	}
	res, _ = c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 2})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "version 2") || !strings.Contains(res.Err.Error(), "kv/data/shop/db") {
		t.Fatalf("rollback to a destroyed version: %v", res.Err)
	}
	noValue("rollback error", res.Err.Error())
	if b.Writes() != writes {
		t.Fatalf("a failed rollback wrote %d times", b.Writes()-writes)
	}
}

// A store's rotation webhook (ExpireStore) makes the next pass read the
// value again although the store's pollInterval has not passed.
func TestARotationReportedByTheStoreIsReadBeforeThePollInterval(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(t.TempDir(), "root")
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "hook-pw1-33f0-plaintext"})
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": composeVault})
	app := vaultApp(t, srv, tokenFile)
	app.SecretStores[0].Store.PollInterval.Duration = time.Hour
	c := newTestController(t, b, f, app)
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %s %v", res.Action, res.Err)
	}
	if users, granted := c.StoreUsers("vault", ""); !slices.Equal(users, []string{"shop"}) || !slices.Equal(granted, []string{"shop"}) {
		t.Fatalf("users %v granted %v", users, granted)
	}
	if users, granted := c.StoreUsers("nope", ""); users != nil || granted != nil {
		t.Fatalf("an undeclared store has users %v granted %v", users, granted)
	}
	if users, _ := c.StoreUsers("vault", "kv/data/shop/other"); len(users) != 0 {
		t.Fatalf("users of an entry nobody names: %v", users)
	}

	srv.Write("kv/data/shop/db", true, map[string]any{"password": "hook-pw2-33f0-plaintext"})
	// Within the hour, the pass serves the cached value.
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("pass within the poll interval: %s %v", res.Action, res.Err)
	}
	c.ExpireStore("vault", "kv/data/shop/db")
	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade || !slices.Equal(res.Deployed.Updated, []string{"api", "worker"}) {
		t.Fatalf("pass after the store's report: %s %v %v", res.Action, res.Err, res.Deployed.Updated)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if want := "secret rotated: vault kv/data/shop/db key password version 1 to 2"; rs[0].Trigger != want {
		t.Fatalf("trigger %q", rs[0].Trigger)
	}
}

// The controller's own watch of the stores, not the application's
// interval, starts the pass that deploys a rotation: with an interval of
// an hour, a value rotated in Vault is deployed within seconds, and an
// application that does not use the value is not run.
func TestAStoreRotationStartsAPassLongBeforeTheApplicationsInterval(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(t.TempDir(), "root")
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "watch-pw1-8c41-plaintext"})
	srv.Write("kv/data/blog/db", true, map[string]any{"password": "watch-blog-8c41-plaintext"})
	store := vaultStoreFor("vault", srv.Addr, tokenFile, "shop")
	store.PollInterval.Duration = time.Second
	store.Grants = append(store.Grants, application.SecretGrant{Applications: []string{"blog"}, Paths: []string{"kv/data/blog/*"}})
	shop, blog := fastApp("shop", time.Hour), fastApp("blog", time.Hour)
	shop.Source.Path, blog.Source.Path = "shop", "blog"
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, map[string]string{
		"shop/docker-compose.yml": composeRef("vault", "kv/data/shop/db"),
		"blog/docker-compose.yml": composeRef("vault", "kv/data/blog/db"),
	})
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Tick: 10 * time.Millisecond},
		storeApps(t, []application.SecretStore{store}, shop, blog))
	if err != nil {
		t.Fatal(err)
	}
	runLoop(t, c)

	// waitFor polls cond until it holds, failing after within.
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		give := time.Now().Add(within)
		for !cond() {
			if time.Now().After(give) {
				t.Fatalf("%s: not within %s", what, within)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	latest := func(app string) charts.Release {
		rs, _ := b.Releases(context.Background(), app)
		if len(rs) == 0 {
			return charts.Release{}
		}
		return rs[0]
	}
	waitFor("first passes", 30*time.Second, func() bool {
		sts := statusesPromptly(t, c)
		return statusOf(sts, "shop").LastAppliedRevision == 1 && statusOf(sts, "blog").LastAppliedRevision == 1
	})
	blogPass := statusOf(statusesPromptly(t, c), "blog").LastPass

	srv.Write("kv/data/shop/db", true, map[string]any{"password": "watch-pw2-8c41-plaintext"})
	rotated := time.Now()
	// The watch looks every second and the store's pollInterval is 1s: a
	// few seconds, not the hour of the application's interval.
	waitFor("the rotation deployed", 15*time.Second, func() bool {
		return statusOf(statusesPromptly(t, c), "shop").LastAppliedRevision == 2
	})
	rec := latest("shop")
	if want := "secret rotated: vault kv/data/shop/db key password version 1 to 2"; rec.Trigger != want {
		t.Fatalf("trigger %q, want %q", rec.Trigger, want)
	}
	t.Logf("rotation deployed %s after the write", time.Since(rotated).Round(time.Millisecond))
	if st := statusOf(statusesPromptly(t, c), "shop"); len(st.SecretRefs) != 1 || st.SecretRefs[0].Version != 2 {
		t.Fatalf("shop's status refs %+v", st.SecretRefs)
	}
	if got := statusOf(statusesPromptly(t, c), "blog").LastPass; !got.Equal(blogPass) || latest("blog").Revision != 1 {
		t.Fatalf("blog, whose value did not move, ran again (last pass %s, was %s)", got, blogPass)
	}
}
