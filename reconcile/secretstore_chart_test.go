package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// vaultChart writes store references from its values: the values hold
// where the password is, never the password; the compose render of the
// templates' output reads it, after every template ran.
var vaultChart = map[string]string{
	"chart/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
	"chart/values.yaml": "db: {store: vault, path: kv/data/shop/db, key: password}\n",
	"chart/templates/compose.yaml": `version: "3.8"
services:
  api:
    image: example/api:1
    secrets: [db_password]
  worker:
    image: example/worker:1
    x-flotilla:
      env:
        DB_PASSWORD:
          secretRef: {store: {{ .Values.db.store }}, path: {{ .Values.db.path }}, key: {{ .Values.db.key }}}
  web:
    image: example/web:1
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: {{ .Values.db.store }}, path: {{ .Values.db.path }}, key: {{ .Values.db.key }}}
`,
}

func TestAChartsStoreReferencesAreResolvedInProcessAndInTheRenderBox(t *testing.T) {
	for _, boxed := range []bool{false, true} {
		name := "in process"
		if boxed {
			name = "render box"
		}
		t.Run(name, func(t *testing.T) {
			srv := vaulttest.Start(t)
			srv.Mount("kv", 2)
			token, tokenFile := srv.Token(t.TempDir(), "root")
			const pw1, pw2 = "chart-pw1-5d1e-plaintext", "chart-pw2-5d1e-plaintext"
			srv.Write("kv/data/shop/db", true, map[string]any{"password": pw1})
			b := chartstest.NewMinimal()
			f := newFakeFetcher()
			f.commit(t, vaultChart)
			app := vaultApp(t, srv, tokenFile)
			app.Source.Path = "chart"
			app.Source.Chart = &application.Chart{}
			opts := Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet}
			if boxed {
				box, err := renderbox.New(renderbox.Limits{Deadline: 20 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				opts.RenderBox = box
			}
			c, err := New(opts, []application.Application{app})
			if err != nil {
				t.Fatal(err)
			}
			res := mustReconcile(t, c, "shop")
			if res.Err != nil || res.Action != charts.Install {
				t.Fatalf("install: %s %v", res.Action, res.Err)
			}
			if refs := res.Status.SecretRefs; len(refs) != 2 || refs[0].Kind != "" || refs[1].Kind != "env" || refs[1].Version != 1 {
				t.Fatalf("status refs %+v", refs)
			}
			srv.Write("kv/data/shop/db", true, map[string]any{"password": pw2})
			res = mustReconcile(t, c, "shop")
			if res.Err != nil || res.Action != charts.Upgrade || !slices.Equal(res.Deployed.Updated, []string{"api", "worker"}) || res.Deployed.Writes != 3 {
				t.Fatalf("rotation: %s %v, updated %v in %d writes", res.Action, res.Err, res.Deployed.Updated, res.Deployed.Writes)
			}
			rs, _ := b.Releases(context.Background(), "shop")
			if want := "secret rotated: vault kv/data/shop/db key password version 1 to 2"; rs[0].Trigger != want {
				t.Fatalf("trigger %q", rs[0].Trigger)
			}
			for _, r := range rs {
				if strings.Contains(r.Manifest, pw1) || strings.Contains(r.Manifest, pw2) {
					t.Fatalf("record %d holds a value", r.Revision)
				}
			}
			writes := b.Writes()
			if res = mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
				t.Fatalf("steady pass: %s %v", res.Action, res.Err)
			}
			// A store that refuses fails the pass as a store failure (retried
			// with backoff), across the render box too, and writes nothing.
			srv.Revoke(token)
			res = mustReconcile(t, c, "shop")
			if res.Err == nil || KindOf(res.Err) != Transient || !strings.Contains(res.Err.Error(), "kv/data/shop/db") || b.Writes() != writes {
				t.Fatalf("revoked token: %v (%s), %d writes", res.Err, KindOf(res.Err), b.Writes()-writes)
			}
		})
	}
}

// A chart's record is not rendered again as a compose project for its
// store values (its commit holds a chart): a rollback past a rotation of a
// secret redeploys the recorded manifest, whose secret retention keeps.
func TestAChartsRollbackPastARotatedSecretUsesTheRetainedSecret(t *testing.T) {
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(t.TempDir(), "root")
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "chart-rb-pw1-plaintext"})
	chart := map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
		"chart/values.yaml": "db: {store: vault, path: kv/data/shop/db, key: password}\n",
		"chart/templates/compose.yaml": `version: "3.8"
services:
  api:
    image: example/api:1
    secrets: [db_password]
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: {{ .Values.db.store }}, path: {{ .Values.db.path }}, key: {{ .Values.db.key }}}
`,
	}
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, chart)
	app := vaultApp(t, srv, tokenFile)
	app.Source.Path = "chart"
	app.Source.Chart = &application.Chart{}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %s %v", res.Action, res.Err)
	}
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "chart-rb-pw2-plaintext"})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("rotation: %s %v", res.Action, res.Err)
	}
	res, _ := c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1})
	if res.Err != nil {
		t.Fatalf("rollback to 1: %v", res.Err)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if rs[0].Revision != 3 || rs[0].Manifest != rs[len(rs)-1].Manifest {
		t.Fatalf("the rollback is revision %d, deploying another manifest than revision 1's", rs[0].Revision)
	}
	// Pinned: the next pass stays, and fails nothing.
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Status.Pinned == "" {
		t.Fatalf("pinned pass: %v, pinned %q", res.Err, res.Status.Pinned)
	}
}
