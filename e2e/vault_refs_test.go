package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// vaultRefsCompose: api mounts a config taken from Vault, worker has an
// environment value taken from Vault, web uses neither; each rotation must
// write its one consumer and nothing else.
const vaultRefsCompose = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    configs: [app_conf]
    stop_grace_period: 1s
  worker:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment:
      PLAIN: visible
    x-flotilla:
      env:
        DB_PASSWORD:
          secretRef: {store: vault, path: kv/data/%[1]s/db, key: password}
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
configs:
  app_conf:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/%[1]s/app, key: conf}
`

func TestVaultConfigAndEnvironmentRotationsRollOnlyTheirConsumersAndLeakNoValue(t *testing.T) {
	t.Parallel()
	flotillaBinary(t)
	stack := swarmtest.Name(t, "vrefs")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	pw := func(n int) string { return fmt.Sprintf("vrefs-e2e-pw%d-91ad-plaintext", n) }
	conf := func(n int) string { return fmt.Sprintf("vrefs-e2e-conf%d-4be7-plaintext", n) }
	dbEntry, appEntry := "kv/data/"+stack+"/db", "kv/data/"+stack+"/app"
	srv, token, tokenFile := vaultTeam(t, dir, stack, dbEntry, "password", pw(1))
	srv.Write(appEntry, true, map[string]any{"conf": conf(1)})

	repo := gittest.New(t)
	repo.Commit("config and environment by reference", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultRefsCompose, stack)})

	var out outputs
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 2), grant: "kv/data/" + stack + "/*",
		notify: &out, selfHeal: true, syncPolicy: []string{"retainRotated: 1"}})

	addr := freeAddr(t)
	const adminToken, readToken = "e2e-vrefs-admin-0123456789", "e2e-vrefs-read-0123456789"
	ctl, server, streams := startWatchedController(t, appsFile, "e2evrefs", addr, adminToken, readToken)
	a := apiReader{t, server}
	collectAPI := func() { a.collect(stack, map[string]string{"admin": adminToken, "read": readToken}, &out) }
	status := func() application.Status { return a.status(readToken, stack, nil) }
	history := func() []charts.Release { return a.history(readToken, stack, nil) }
	cl := swarmtest.Client(t)
	spec := func(svc string) (configs []string, env map[string]string) {
		s, err := cl.ServiceInspect(context.Background(), stack+"_"+svc, client.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cs := s.Service.Spec.TaskTemplate.ContainerSpec
		for _, c := range cs.Configs {
			configs = append(configs, c.ConfigName)
		}
		env = map[string]string{}
		for _, e := range cs.Env {
			k, v, _ := strings.Cut(e, "=")
			env[k] = v
		}
		return configs, env
	}
	configData := func(name string) string {
		l, err := cl.ConfigList(context.Background(), client.ConfigListOptions{Filters: make(client.Filters).Add("name", name)})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("config %s: %v %d", name, err, len(l.Items))
		}
		return string(l.Items[0].Spec.Data)
	}
	swarmConfigs := func() []string {
		l, err := cl.ConfigList(context.Background(), client.ConfigListOptions{Filters: make(client.Filters).Add("name", stack+"_app_conf-")})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range l.Items {
			names = append(names, c.Spec.Name)
		}
		slices.Sort(names)
		return names
	}
	// synced waits for revision n to be applied with no drift: the live
	// environment holds the plaintext, the manifest a placeholder, and the
	// comparison must see them as the same.
	synced := func(n int, trigger string) {
		t.Helper()
		swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
			h := history()
			st := status()
			return len(h) > 0 && h[0].Revision == n && (trigger == "" || h[0].Trigger == trigger) &&
					st.LastAppliedRevision == n && st.Sync == application.Synced,
				fmt.Sprintf("status %s rev %d drift %v %s, history %+v", st.Sync, st.LastAppliedRevision, st.Drift, st.LastError, h)
		})
	}

	// Revision 1.
	synced(1, "")
	apiConfigs, _ := spec("api")
	_, workerEnv := spec("worker")
	_, webEnv := spec("web")
	if len(apiConfigs) != 1 || !strings.HasPrefix(apiConfigs[0], stack+"_app_conf-") {
		t.Fatalf("api mounts %v", apiConfigs)
	}
	config1 := apiConfigs[0]
	// Documented: a config's data is readable by whoever may inspect it.
	if got := configData(config1); got != conf(1) {
		t.Fatalf("config %s holds %q", config1, got)
	}
	if workerEnv["DB_PASSWORD"] != pw(1) || workerEnv["PLAIN"] != "visible" || len(webEnv) != 0 {
		t.Fatalf("worker env %v, web env %v", workerEnv, webEnv)
	}
	refs := status().SecretRefs
	if len(refs) != 2 || refs[0].Kind != "config" || refs[0].SwarmSecret != config1 || refs[0].Version != 1 ||
		refs[1].Kind != "env" || refs[1].Service != "worker" || refs[1].Secret != "DB_PASSWORD" || refs[1].Path != dbEntry {
		t.Fatalf("status refs %+v", refs)
	}
	collectAPI()
	writes := serviceWrites(t, stack)

	// The environment value rotates: worker alone.
	srv.Write(dbEntry, true, map[string]any{"password": pw(2)})
	synced(2, fmt.Sprintf("secret rotated: vault %s key password version 1 to 2", dbEntry))
	if _, env := spec("worker"); env["DB_PASSWORD"] != pw(2) {
		t.Fatal("worker does not have the rotated value")
	}
	collectAPI()

	// The config rotates twice: api alone, each time on a new config.
	rotateConfig := func(n, rev int) string {
		t.Helper()
		srv.Write(appEntry, true, map[string]any{"conf": conf(n)})
		synced(rev, fmt.Sprintf("secret rotated: vault %s key conf version %d to %d", appEntry, n-1, n))
		c, _ := spec("api")
		if len(c) != 1 || configData(c[0]) != conf(n) {
			t.Fatalf("api mounts %v after config rotation %d", c, n)
		}
		st := status()
		if st.SecretRefs[0].SwarmSecret != c[0] || st.SecretRefs[0].RotatedRevision != rev || st.SecretRefs[1].RotatedRevision != 2 {
			t.Fatalf("status refs %+v", st.SecretRefs)
		}
		collectAPI()
		return c[0]
	}
	config2 := rotateConfig(2, 3)
	config3 := rotateConfig(3, 4)
	if config2 == config1 || config3 == config2 {
		t.Fatalf("configs %s, %s, %s: a rotation kept the name", config1, config2, config3)
	}
	// retainRotated: 1 keeps config2; config1, mounted by nothing, is swept.
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		got := swarmConfigs()
		return slices.Equal(got, sortedOf(config2, config3)), fmt.Sprint(got)
	})
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		w := writes()
		return w["worker"] == 1 && w["api"] == 2, fmt.Sprint(w)
	})
	// A few more passes (interval 10s, store poll 1s) write nothing: the
	// sealed environment is no drift.
	c := cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + adminToken}}
	for range 3 {
		if _, code := c.run("app", "sync", "--wait", stack); code != 0 {
			t.Fatal("sync failed")
		}
	}
	synced(4, "")
	if w := writes(); w["worker"] != 1 || w["api"] != 2 || w["web"] != 0 {
		t.Fatalf("service writes %v: want worker once (its rotation), api twice (one per config rotation), web never", w)
	}
	if h := history(); h[0].Revision != 4 {
		t.Fatalf("steady passes recorded revision %d", h[0].Revision)
	}
	collectAPI()

	// A rollback to revision 1, past every rotation: the store is read at
	// the versions revision 1 recorded, so config1 (swept) is made again
	// under its own name with its own data, and worker gets its first
	// password back; web is still never written.
	if outText, code := c.run("app", "rollback", stack, "1", "--wait"); code != 0 {
		t.Fatalf("rollback: exit %d: %s", code, outText)
	}
	synced(5, "")
	if h := history(); !strings.HasPrefix(h[0].Trigger, "rollback to revision 1") {
		t.Fatalf("revision 5 trigger %q", h[0].Trigger)
	}
	if cs, _ := spec("api"); len(cs) != 1 || cs[0] != config1 || configData(cs[0]) != conf(1) {
		t.Fatalf("after the rollback api mounts %v, want %s holding revision 1's data", cs, config1)
	}
	if _, env := spec("worker"); env["DB_PASSWORD"] != pw(1) {
		t.Fatal("after the rollback worker does not have revision 1's password")
	}
	if refs := status().SecretRefs; len(refs) != 2 || refs[0].Version != 1 || refs[1].Version != 1 || refs[0].SwarmSecret != config1 {
		t.Fatalf("status refs after the rollback %+v", refs)
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		w := writes()
		return w["worker"] == 2 && w["api"] == 3 && w["web"] == 0, fmt.Sprint(w)
	})
	collectAPI()

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
		return strings.Count(streams["read"].String(), "secret rotated") >= 3, "not every rotation event yet"
	})
	for role, s := range streams {
		out.add("events as "+role, s.String())
	}
	out.add("controller log", ctl.logs.String())
	secrets := []string{pw(1), pw(2), conf(1), conf(2), conf(3), token}
	scanned := out.scan(t, secrets...)
	for _, kind := range []string{"record ", "notification", "controller log", "events as read", "GET /api/v1/applications/" + stack + "/diff"} {
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

// With a pollInterval of an hour, a rotation reaches the services only
// because the store's rotation is reported (`flotilla secretstore rotated`,
// POST /api/v1/secretstores/{name}/rotated).
func TestVaultRotationReportedThroughTheAPIIsDeployedBeforeThePollInterval(t *testing.T) {
	t.Parallel()
	flotillaBinary(t)
	srv := vaulttest.Start(t)
	stack := swarmtest.Name(t, "vhook")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(dir, "root")
	dbEntry := "kv/data/" + stack + "/db"
	srv.Write(dbEntry, true, map[string]any{"password": "vhook-pw1-0e4d-plaintext"})
	srv.Write("kv/data/"+stack+"/app", true, map[string]any{"conf": "vhook-conf1-0e4d-plaintext"})
	repo := gittest.New(t)
	repo.Commit("by reference", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultRefsCompose, stack)})
	// pollInterval 1h: only the reported rotation can reach the services.
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 2), grant: "kv/data/" + stack + "/*",
		pollInterval: "1h"})
	addr := freeAddr(t)
	const adminToken, readToken = "e2e-vhook-admin-0123456789", "e2e-vhook-read-0123456789"
	_, server, _ := startWatchedController(t, appsFile, "e2evhook", addr, adminToken, readToken)
	c := cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + adminToken}}
	revision := func() (int, string) {
		out, code := c.run("app", "get", stack, "-o", "json")
		if code != 0 {
			t.Fatalf("app get: %s", out)
		}
		var st application.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st.LastAppliedRevision, string(st.Sync)
	}
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		n, sync := revision()
		return n == 1 && sync == string(application.Synced), fmt.Sprint(n, sync)
	})

	srv.Write(dbEntry, true, map[string]any{"password": "vhook-pw2-0e4d-plaintext"})
	// Passes run (two explicit syncs, waited for) and serve the cached
	// value: the store is not asked within its pollInterval.
	for range 2 {
		if out, code := c.run("app", "sync", "--wait", stack); code != 0 {
			t.Fatalf("sync: %s", out)
		}
	}
	if n, _ := revision(); n != 1 {
		t.Fatalf("revision %d before the rotation was reported: the pollInterval was not honoured", n)
	}
	out, code := c.run("secretstore", "rotated", "vault", "--path", dbEntry)
	if code != 0 || !strings.Contains(out, "queued "+stack) {
		t.Fatalf("secretstore rotated: %d %s", code, out)
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		n, sync := revision()
		return n == 2 && sync == string(application.Synced), fmt.Sprint(n, sync)
	})
	s, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_worker", client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Service.Spec.TaskTemplate.ContainerSpec.Env, "DB_PASSWORD=vhook-pw2-0e4d-plaintext") {
		t.Fatal("worker does not run with the reported value")
	}
}
