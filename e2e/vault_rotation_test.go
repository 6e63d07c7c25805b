package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// A rotation is an ordinary upgrade of the services that mount the value,
// so it goes through the pass's waves and a service's rollout like a
// commit does; these tests watch it do so on the swarm.

// runningAt is when the newest task of the stack's service that runs
// mounting secret reached running, zero when none does.
func runningAt(t *testing.T, stack, service, secret string) time.Time {
	t.Helper()
	for _, task := range tasksOf(t, stack, service) {
		if task.Status.State != swarm.TaskStateRunning || task.Spec.ContainerSpec == nil {
			continue
		}
		for _, s := range task.Spec.ContainerSpec.Secrets {
			if s.SecretName == secret {
				return task.Status.Timestamp
			}
		}
	}
	return time.Time{}
}

// vaultWavesCompose: db (wave 0) and api (wave 1) mount the same secret
// taken from Vault; web (wave 1) mounts nothing.
const vaultWavesCompose = `version: "3.8"
services:
  db:
    image: flotilla-test/app:1
    secrets: [db_password]
    stop_grace_period: 1s
    x-flotilla: {wave: 0}
  api:
    image: flotilla-test/app:1
    secrets: [db_password]
    stop_grace_period: 1s
    x-flotilla: {wave: 1}
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    x-flotilla: {wave: 1}
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/%s/db, key: password}
`

func TestVaultRotationWritesEachWaveOnceAfterTheWaveBeforeIsHealthy(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "vwave")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	entry := "kv/data/" + stack + "/db"
	pw := func(n int) string { return fmt.Sprintf("vwave-e2e-pw%d-3f0a-plaintext", n) }
	srv, _, tokenFile := vaultTeam(t, dir, stack, entry, "password", pw(1))
	repo := gittest.New(t)
	repo.Commit("two waves mount a store secret", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultWavesCompose, stack)})
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 2), grant: "kv/data/" + stack + "/*",
		syncPolicy: []string{"retainRotated: 1", "wait: {timeout: 2m}"}})

	const admin = "e2e-vwave-admin-0123456789"
	addr := freeAddr(t)
	startController(t, appsFile, "e2evwave", []string{"FLOTILLA_ADMIN_TOKEN=" + admin}, "--listen", addr, "--log-level", "info")
	server := "http://" + addr
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}
	a := apiReader{t, server}
	status := func() application.Status { st, _ := c.tryStatus(stack); return st }
	mounted := func(svc string) string { return mountedSecret(t, swarmtest.Client(t), stack, svc) }

	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		st := status()
		return st.Sync == application.Synced && st.LastAppliedRevision == 1, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	secret1 := mounted("db")
	if secret1 == "" || mounted("api") != secret1 || mounted("web") != "" {
		t.Fatalf("mounts: db %q api %q web %q", secret1, mounted("db"), mounted("web"))
	}
	writes := serviceWriteLog(t, stack)

	// rotate writes version n in Vault, waits for the revision that
	// deploys it and checks the wave order of its writes.
	rotate := func(n int) string {
		t.Helper()
		from := len(writes())
		srv.Write(entry, true, map[string]any{"password": pw(n)})
		want := fmt.Sprintf("secret rotated: vault %s key password version %d to %d", entry, n-1, n)
		var h []charts.Release
		swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
			h = a.history(admin, stack, nil)
			st := status()
			return len(h) > 0 && h[0].Revision == n && st.LastAppliedRevision == n && st.Sync == application.Synced,
				fmt.Sprintf("status %s rev %d %s, history %d", st.Sync, st.LastAppliedRevision, st.LastError, len(h))
		})
		if h[0].Trigger != want {
			t.Fatalf("revision %d's cause is %q, want %q", n, h[0].Trigger, want)
		}
		name := mounted("db")
		if name == "" || name == secret1 || mounted("api") != name || mounted("web") != "" {
			t.Fatalf("after rotation %d: db mounts %q, api %q, web %q", n, name, mounted("api"), mounted("web"))
		}
		var w []serviceWrite
		swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
			w = writes()[from:]
			return len(w) >= 2, fmt.Sprint(w)
		})
		if len(w) != 2 || w[0].service != "db" || w[1].service != "api" {
			t.Fatalf("rotation %d wrote %v: want db (wave 0) once, then api (wave 1) once, web never", n, w)
		}
		// Wave 1 is written only once wave 0 runs the new secret.
		dbRan := runningAt(t, stack, "db", name)
		if dbRan.IsZero() || w[1].at.Before(dbRan) {
			t.Fatalf("rotation %d: api written at %s, db's task with %s running since %s", n, w[1].at.Format(time.StampMilli), name, dbRan.Format(time.StampMilli))
		}
		t.Logf("rotation %d: db written %s, its task running %s, api written %s", n,
			w[0].at.Format(time.StampMilli), dbRan.Format(time.StampMilli), w[1].at.Format(time.StampMilli))
		return name
	}
	secret2 := rotate(2)
	secret3 := rotate(3)
	if secret2 == secret3 {
		t.Fatalf("rotation 3 kept the name %s", secret2)
	}
	// retainRotated: 1 keeps secret2; secret1, mounted by nothing, goes.
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		got := stackSecrets(t, stack+"_db_password-")
		return slices.Equal(got, sortedOf(secret2, secret3)), fmt.Sprint(got)
	})
	if w := writesOf(writes()); w["db"] != 2 || w["api"] != 2 || w["web"] != 0 {
		t.Fatalf("service writes %v: want db and api twice (once per rotation), web never", w)
	}
	st := status()
	if len(st.SecretRefs) != 1 || st.SecretRefs[0].Version != 3 || st.SecretRefs[0].SwarmSecret != secret3 || st.SecretRefs[0].RotatedRevision != 3 {
		t.Fatalf("status secret refs %+v", st.SecretRefs)
	}
}

// vaultCanaryCompose: web mounts a secret taken from Vault and is released
// by a canary without a router (the replica ratio is the split): step 0
// holds 2s, step 1 waits for an operator's promote.
const vaultCanaryCompose = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    secrets: [db_password]
    stop_grace_period: 1s
    deploy:
      replicas: 2
    x-flotilla:
      rollout:
        strategy: canary
        steps:
          - {weight: 50, pause: 2s}
          - {weight: 100}
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/%s/db, key: password}
`

// canaryMount is what the swarm shows of web and web-canary: the secrets
// they mount, the canary's scale and its recorded rollout state.
type canaryMount struct {
	web, canary string
	scale       uint64
	state       rollout.State
	exists      bool
}

func (v canaryMount) String() string {
	return fmt.Sprintf("web mounts %s, canary x%d mounts %s, %s step %d weight %d paused %v",
		v.web, v.scale, v.canary, v.state.Phase, v.state.Step, v.state.Weight, v.state.Paused)
}

func canaryMounts(t *testing.T, stack string) canaryMount {
	t.Helper()
	var v canaryMount
	for _, s := range stackServices(t, stack) {
		var mount string
		if sec := s.Spec.TaskTemplate.ContainerSpec.Secrets; len(sec) == 1 {
			mount = sec[0].SecretName
		}
		switch s.Spec.Name {
		case stack + "_web":
			v.web = mount
		case stack + "_web-canary":
			st, err := rollout.StateFromLabels(s.Spec.Labels)
			if err != nil {
				t.Fatal(err)
			}
			v.canary, v.state, v.exists = mount, st, true
			if r := s.Spec.Mode.Replicated; r != nil && r.Replicas != nil {
				v.scale = *r.Replicas
			}
		}
	}
	return v
}

func TestVaultRotationOfACanaryServiceGoesThroughItsStepsAndStableKeepsTheOldSecretUntilThePromote(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "vcanary")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	entry := "kv/data/" + stack + "/db"
	pw := func(n int) string { return fmt.Sprintf("vcanary-e2e-pw%d-58c1-plaintext", n) }
	srv, _, tokenFile := vaultTeam(t, dir, stack, entry, "password", pw(1))
	repo := gittest.New(t)
	repo.Commit("a canary service mounts a store secret", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(vaultCanaryCompose, stack)})
	// retainRotated 0: an old secret goes as soon as nothing mounts it.
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, store: vaultStore(srv.Addr, tokenFile, 2), grant: "kv/data/" + stack + "/*",
		syncPolicy: []string{"retainRotated: 0"}})

	const admin = "e2e-vcanary-admin-0123456789"
	addr := freeAddr(t)
	startController(t, appsFile, "e2evcanary", []string{"FLOTILLA_ADMIN_TOKEN=" + admin}, "--listen", addr, "--log-level", "info")
	server := "http://" + addr
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}
	a := apiReader{t, server}
	status := func() application.Status { st, _ := c.tryStatus(stack); return st }

	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		st := status()
		return st.Sync == application.Synced && st.LastAppliedRevision == 1, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	v := canaryMounts(t, stack)
	secret1 := v.web
	if secret1 == "" || v.exists {
		t.Fatalf("first deploy: %s", v)
	}
	writes := serviceWriteLog(t, stack)

	// rotate writes version n in Vault: the rotation starts the canary on
	// the new secret and its steps run to step 1, which waits for the
	// promote, while stable keeps the old secret unwritten; the promote
	// writes the new one to stable, once, and the canary goes to zero.
	rotate := func(n int, old string) string {
		t.Helper()
		from := len(writes())
		before := a.history(admin, stack, nil)[0].Revision
		srv.Write(entry, true, map[string]any{"password": pw(n)})
		var secret string
		var seen []string
		swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
			v := canaryMounts(t, stack)
			if !v.exists || v.state.Phase == rollout.Completed {
				return false, v.String()
			}
			if v.web != old {
				t.Fatalf("rotation %d: stable left the old secret before the promote: %s (steps seen %v)", n, v, seen)
			}
			if v.canary == "" || v.canary == old || (secret != "" && v.canary != secret) {
				t.Fatalf("rotation %d: the canary does not mount the rotated secret: %s", n, v)
			}
			secret = v.canary
			s := fmt.Sprintf("%s/%d/%d", v.state.Phase, v.state.Step, v.state.Weight)
			if len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			return v.state.Phase == rollout.Progressing && v.state.Step == 1 && v.state.Weight == 100 && v.scale == 2, v.String()
		})
		if !slices.Contains(seen, "Progressing/0/50") {
			t.Errorf("rotation %d: steps seen %v lack step 0 at 50%%", n, seen)
		}
		t.Logf("rotation %d: steps seen before the promote: %v", n, seen)
		if got := stackSecrets(t, stack+"_db_password-"); !slices.Contains(got, old) || !slices.Contains(got, secret) {
			t.Fatalf("rotation %d: secrets %v while stable mounts %s and the canary %s", n, got, old, secret)
		}
		if w := writesOf(writes()[from:]); w["web"] != 0 {
			t.Fatalf("rotation %d: stable written %d times before the promote: it keeps its old definition, secret and mount path alike", n, w["web"])
		}
		// The rotation's revision, the first after it, names the entry
		// and its versions; the steps after it are the rollout's.
		want := fmt.Sprintf("secret rotated: vault %s key password version %d to %d", entry, n-1, n)
		h := a.history(admin, stack, nil)
		for _, r := range h {
			if r.Revision == before+1 && r.Trigger != want {
				t.Fatalf("revision %d's cause is %q, want %q", r.Revision, r.Trigger, want)
			}
			if r.Revision > before {
				t.Logf("revision %d: %s", r.Revision, r.Trigger)
			}
		}
		if out, code := c.run("app", "rollout", "promote", stack, "--wait", "3m"); code != 0 {
			t.Fatalf("rotation %d: promote: exit %d: %s", n, code, out)
		}
		swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
			v := canaryMounts(t, stack)
			return v.state.Phase == rollout.Completed && v.web == secret && v.scale == 0, v.String()
		})
		if w := writesOf(writes()[from:]); w["web"] != 1 {
			t.Fatalf("rotation %d: stable written %d times, want once (the promote): %v", n, w["web"], writes()[from:])
		}
		return secret
	}
	secret2 := rotate(2, secret1)
	secret3 := rotate(3, secret2)
	// retainRotated 0 keeps no superseded version for its own sake:
	// secret2 stays only as stable's previous spec (what `docker service
	// rollback` returns to) mounts it, and secret1, which nothing mounts
	// any more, is swept.
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		got := stackSecrets(t, stack+"_db_password-")
		return slices.Equal(got, sortedOf(secret2, secret3)), fmt.Sprint(got)
	})
	st := status()
	if len(st.SecretRefs) != 1 || st.SecretRefs[0].Version != 3 || st.SecretRefs[0].SwarmSecret != secret3 {
		t.Fatalf("status secret refs %+v", st.SecretRefs)
	}
}
