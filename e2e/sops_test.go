package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
	"github.com/flotilla-gitops/flotilla/source"
)

const sopsStackFile = `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    env_file: ./app.env
    environment:
      DB_USER: ${DB_USER}
    secrets: [db_password]
    stop_grace_period: 1s
secrets:
  db_password:
    file: ./db_password.txt
`

// Plaintexts that must reach the swarm secret or the service env, and no
// release record.
const (
	e2ePassword = "e2e-pw-5d1c-plaintext"
	e2eToken    = "e2e-tok-8a2f-plaintext"
	e2eDBUser   = "e2e-user-31b7"
)

// sopsFiles is the repository: the secret, the service's env file and the
// interpolation env file encrypted for recipient, the compose file plain.
func sopsFiles(t *testing.T, recipient, password string) map[string]string {
	enc := func(name, plain string) string {
		return string(sopsagetest.Encrypt(t, name, []byte(plain), recipient))
	}
	return map[string]string{
		"deploy/docker-compose.yml": sopsStackFile,
		"deploy/.env":               enc(".env", "DB_USER="+e2eDBUser+"\n"),
		"deploy/app.env":            enc("app.env", "API_TOKEN="+e2eToken+"\n"),
		"deploy/db_password.txt":    enc("db_password.txt", password),
	}
}

// sopsController is h.controller decrypting with ids, as the controller
// command does with --sops-age-key-file.
func (h *harness) sopsController(ids *sopsage.Identities) *reconcile.Controller {
	h.t.Helper()
	c, err := reconcile.New(reconcile.Options{
		ControllerID: h.id,
		Backend:      h.backend,
		Fetcher:      source.New(source.Options{CacheDir: filepath.Join(h.cache, "git"), Logger: quiet}),
		Logger:       quiet,
		SOPS:         ids,
	}, []application.Application{h.app})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func TestSopsEncryptedFilesDeployTheirPlaintextAndRecordNone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	h.repo.Commit("encrypted", sopsFiles(t, id.Recipient, e2ePassword))
	ctl := h.sopsController(ids)

	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("first pass: action %s: %v", res.Action, res.Err)
	}
	h.waitRunning(1)

	// The swarm secret is named after a keyed digest of the plaintext,
	// never its plain sha256, which anyone listing secrets could test
	// guesses against.
	sum := sha256.Sum256([]byte(e2ePassword))
	plainName := h.app.Stack + "_db_password-" + hex.EncodeToString(sum[:])[:10]
	app := h.services()["app"]
	refs := app.Spec.TaskTemplate.ContainerSpec.Secrets
	if len(refs) != 1 || !strings.HasPrefix(refs[0].SecretName, h.app.Stack+"_db_password-") || refs[0].SecretName == plainName {
		t.Fatalf("service mounts %+v, want a keyed db_password secret", refs)
	}
	wantSecret := refs[0].SecretName
	c := swarmtest.Client(t)
	if _, err := c.SecretInspect(context.Background(), refs[0].SecretID, client.SecretInspectOptions{}); err != nil {
		t.Fatalf("secret %s: %v", wantSecret, err)
	}
	env := app.Spec.TaskTemplate.ContainerSpec.Env
	for _, want := range []string{"API_TOKEN=" + e2eToken, "DB_USER=" + e2eDBUser} {
		if !slices.Contains(env, want) {
			t.Errorf("service env %q lacks %q", env, want)
		}
	}

	// The release record names the secret by digest only.
	rels, err := h.backend.Releases(context.Background(), h.app.Stack)
	if err != nil || len(rels) == 0 {
		t.Fatalf("releases: %v, %v", rels, err)
	}
	if m := rels[0].Manifest; strings.Contains(m, e2ePassword) || strings.Contains(m, e2eToken) || strings.Contains(m, e2eDBUser) || strings.Contains(m, "ENC[") {
		t.Fatalf("release record holds the secret's plaintext or ciphertext:\n%s", m)
	}

	// An unchanged pass writes nothing, though decryption runs again.
	if res = h.reconcile(ctl); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("unchanged pass: action %s: %v", res.Action, res.Err)
	}

	// A tampered secret fails the render; what runs is left alone.
	f := sopsFiles(t, id.Recipient, e2ePassword)
	f["deploy/db_password.txt"] = strings.Replace(f["deploy/db_password.txt"], `"mac": "ENC[AES256_GCM,data:`, `"mac": "ENC[AES256_GCM,data:AA`, 1)
	h.repo.Commit("tampered", f)
	before := versions(h.services())
	res = h.reconcile(ctl)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "MAC mismatch") || !strings.Contains(res.Err.Error(), "db_password.txt") {
		t.Fatalf("tampered pass: %v; want a MAC mismatch naming the file", res.Err)
	}
	if after := versions(h.services()); !maps.Equal(before, after) {
		t.Fatalf("a failed render changed services: %v → %v", before, after)
	}

	// A new password rotates the secret: an upgrade, by a new name.
	h.repo.Commit("rotate", sopsFiles(t, id.Recipient, e2ePassword+"-2"))
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("rotation: action %s: %v", res.Action, res.Err)
	}
	refs = h.services()["app"].Spec.TaskTemplate.ContainerSpec.Secrets
	if len(refs) != 1 || refs[0].SecretName == wantSecret {
		t.Fatalf("secret not rotated: %+v", refs)
	}
}

// sealedCompose is the compose file of the leak test: its own
// COMPOSE_SECRET is encrypted in place (--encrypted-regex), and every other
// kind of encrypted file feeds the service.
const sealedCompose = `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    env_file: ./app.env
    environment:
      DB_USER: ${DB_USER}
      COMPOSE_SECRET: %s
      PLAIN_SETTING: visible
    secrets: [db_password]
    configs: [app_conf]
    stop_grace_period: 1s
secrets:
  db_password:
    file: ./db_password.txt
configs:
  app_conf:
    file: ./app.conf
`

// leakValues are the plaintexts of one revision of the leak test.
type leakValues struct{ token, user, compose, password, conf string }

func leakRevision(n int) leakValues {
	return leakValues{
		token:    fmt.Sprintf("e2e-tok%d-a81f-plaintext", n),
		user:     fmt.Sprintf("e2e-usr%d-c3d0-plaintext", n),
		compose:  fmt.Sprintf("e2e-cmp%d-77be-plaintext", n),
		password: fmt.Sprintf("e2e-pw%d-5d1c-plaintext", n),
		conf:     fmt.Sprintf("e2e-conf%d-90aa-plaintext", n),
	}
}

func (v leakValues) all() []string { return []string{v.token, v.user, v.compose, v.password, v.conf} }

func leakFiles(t *testing.T, recipient string, v leakValues) map[string]string {
	enc := func(name, plain string) string {
		return string(sopsagetest.Encrypt(t, name, []byte(plain), recipient))
	}
	compose := fmt.Sprintf(sealedCompose, v.compose)
	return map[string]string{
		"deploy/docker-compose.yml": string(sopsagetest.EncryptMatching(t, "docker-compose.yml", []byte(compose), "^COMPOSE_SECRET$", recipient)),
		"deploy/.env":               enc(".env", "DB_USER="+v.user+"\n"),
		"deploy/app.env":            enc("app.env", "API_TOKEN="+v.token+"\n"),
		"deploy/db_password.txt":    enc("db_password.txt", v.password),
		"deploy/app.conf":           enc("app.conf", "listen="+v.conf+"\n"),
	}
}

// outputs collects everything the controller said, to be scanned.
type outputs struct {
	mu     sync.Mutex
	bodies map[string][]string // what -> bodies
}

func (o *outputs) add(what, body string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bodies == nil {
		o.bodies = map[string][]string{}
	}
	o.bodies[what] = append(o.bodies[what], body)
}

// waitReady waits until the controller at server answers /readyz with 200:
// its first passes are done and the swarm answers.
func waitReady(t *testing.T, server string, timeout time.Duration) {
	t.Helper()
	swarmtest.Eventually(t, timeout, func() (bool, string) {
		resp, err := http.Get(server + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// scan fails t for each output that holds one of secrets, naming the
// output and the value, and returns how many bytes it read.
func (o *outputs) scan(t *testing.T, secrets ...string) int {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	scanned := 0
	for what, bodies := range o.bodies {
		for _, body := range bodies {
			scanned += len(body)
			for _, s := range secrets {
				if strings.Contains(body, s) {
					t.Errorf("%s holds the plaintext %q", what, s)
				}
			}
		}
	}
	return scanned
}

// ageKeyFile makes a new age identity and writes its key file into dir, as
// an operator's --sops-age-key-file.
func ageKeyFile(t *testing.T, dir string) (sopsagetest.Identity, string) {
	t.Helper()
	id := sopsagetest.NewIdentity(t)
	keyFile := filepath.Join(dir, "age.key")
	if err := os.WriteFile(keyFile, id.File, 0o600); err != nil {
		t.Fatal(err)
	}
	return id, keyFile
}

func TestSopsDecryptedValuesReachNoOutputAndARollbackRedeploysThemExactly(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "seal")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	id, keyFile := ageKeyFile(t, dir)
	v1, v2 := leakRevision(1), leakRevision(2)
	const tampered = "e2e-tampered-4411-live"
	repo := gittest.New(t)
	repo.Commit("encrypted", leakFiles(t, id.Recipient, v1))

	var out outputs
	urlFile := notificationSink(t, dir, &out)
	appsFile := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
notifications:
  - name: recorder
    type: webhook
    urlFile: %[3]s
    events: [sync.started, sync.succeeded, sync.failed, drift.detected, drift.corrected, health.changed]
applications:
  - name: %[1]s
    source:
      repoURL: %[2]s
      revision: main
      path: deploy
      compose:
        envFiles: [.env]
    stack: %[1]s
    sops:
      ageKeyFile: %[4]s
    syncPolicy:
      automated: {}
      interval: 10m
`, stack, repo.Dir, urlFile, keyFile)), 0o644); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	const adminToken, readToken = "e2e-seal-admin-0123456789", "e2e-seal-read-0123456789"
	ctl, server, streams := startWatchedController(t, appsFile, "e2eseal", addr, adminToken, readToken)
	logs := ctl.logs

	a := apiReader{t, server}
	get := a.get
	collectAPI := func() { a.collect(stack, map[string]string{"admin": adminToken, "read": readToken}, &out) }
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + adminToken}}
	appEnv := func() ([]string, swarm.Service) {
		s, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_app", client.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Service.Spec.TaskTemplate.ContainerSpec.Env, s.Service
	}
	// mounted returns the config data and the secret name the service mounts.
	mounted := func(s swarm.Service) (string, string) {
		cs := s.Spec.TaskTemplate.ContainerSpec
		if len(cs.Configs) != 1 || len(cs.Secrets) != 1 {
			t.Fatalf("service mounts %d configs, %d secrets", len(cs.Configs), len(cs.Secrets))
		}
		cfg, err := swarmtest.Client(t).ConfigInspect(context.Background(), cs.Configs[0].ConfigID, client.ConfigInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(cfg.Config.Spec.Data), cs.Secrets[0].SecretName
	}
	wantEnv := func(env []string, v leakValues) {
		t.Helper()
		for _, want := range []string{"API_TOKEN=" + v.token, "DB_USER=" + v.user, "COMPOSE_SECRET=" + v.compose, "PLAIN_SETTING=visible"} {
			if !slices.Contains(env, want) {
				t.Errorf("live env %q lacks %q", env, want)
			}
		}
	}

	// Revision 1 is deployed with its real values.
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		var list api.ApplicationList
		c.mustJSON(&list, "app", "list")
		return len(list.Items) == 1 && list.Items[0].Sync == "Synced", fmt.Sprintf("%+v", list.Items)
	})
	env1, svc1 := appEnv()
	wantEnv(env1, v1)
	conf1, secret1 := mounted(svc1)
	if conf1 != "listen="+v1.conf+"\n" {
		t.Errorf("config data %q", conf1)
	}
	collectAPI()

	// Revision 2 changes every value.
	repo.Commit("rotate everything", leakFiles(t, id.Recipient, v2))
	if _, code := c.run("app", "sync", stack, "--wait", "--timeout", "2m"); code != 0 {
		t.Fatal("sync of revision 2 failed")
	}
	env2, _ := appEnv()
	wantEnv(env2, v2)
	collectAPI()

	// A sealed variable changed behind the controller's back is drift, and
	// its live value is masked like the desired one.
	h := &harness{t: t, app: application.Application{Stack: stack}}
	changeService(t, h, "app", func(s *swarm.ServiceSpec) {
		cs := s.TaskTemplate.ContainerSpec
		for i, e := range cs.Env {
			if strings.HasPrefix(e, "API_TOKEN=") {
				cs.Env[i] = "API_TOKEN=" + tampered
			}
		}
	})
	// Drift is judged once the update has settled; refresh until then.
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		if _, code := c.run("app", "refresh", stack); code != 0 {
			t.Fatal("refresh failed")
		}
		time.Sleep(time.Second)
		body := get(readToken, "/api/v1/applications/"+stack)
		return strings.Contains(body, `"env.API_TOKEN"`), body
	})
	collectAPI()

	// Roll back to revision 1: the exact old values, config and secret.
	if _, code := c.run("app", "rollback", stack, "1", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatal("rollback failed")
	}
	env3, svc3 := appEnv()
	wantEnv(env3, v1)
	if conf, secret := mounted(svc3); conf != conf1 || secret != secret1 {
		t.Errorf("rollback mounts config %q and secret %s, want %q and %s", conf, secret, conf1, secret1)
	}
	collectAPI()

	// Every release record on the swarm, as stored and decompressed.
	cl := swarmtest.Client(t)
	recs, err := cl.ConfigList(context.Background(), client.ConfigListOptions{Filters: make(client.Filters).Add("label", backend.LabelRelease+"="+stack)})
	if err != nil {
		t.Fatal(err)
	}
	nrec := 0
	for _, r := range recs.Items {
		if !strings.HasPrefix(r.Spec.Name, "flotilla-release") {
			continue
		}
		nrec++
		full, err := cl.ConfigInspect(context.Background(), r.ID, client.ConfigInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out.add("record "+r.Spec.Name, string(full.Config.Spec.Data))
		zr, err := gzip.NewReader(bytes.NewReader(full.Config.Spec.Data))
		if err != nil {
			t.Fatalf("record %s: %v", r.Spec.Name, err)
		}
		text, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		out.add("record "+r.Spec.Name+" (decompressed)", string(text))
	}
	if nrec != 3 {
		t.Fatalf("%d release records, want 3", nrec)
	}

	// Give the last notifications and events a moment, then scan it all.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		out.mu.Lock()
		n := len(out.bodies["notification"])
		out.mu.Unlock()
		return n >= 4 && strings.Contains(streams["read"].String(), "rollback"), fmt.Sprintf("%d notifications", n)
	})
	for role, s := range streams {
		out.add("events as "+role, s.String())
	}
	out.add("controller log", logs.String())
	secrets := slices.Concat(v1.all(), v2.all(), []string{tampered})
	for what, bodies := range out.bodies {
		for _, body := range bodies {
			if body == "" {
				t.Errorf("%s: empty", what)
			}
		}
	}
	scanned := out.scan(t, secrets...)
	t.Logf("scanned %d bytes from %d kinds of output", scanned, len(out.bodies))
}

// startWatchedController runs the built controller on addr with an admin
// and a read token, waits until it is ready, and follows the event stream
// as each role sees it for the whole test: what the no-plaintext scans read.
func startWatchedController(t *testing.T, appsFile, id, addr, adminToken, readToken string) (*stoppable, string, map[string]*lockedBuffer) {
	t.Helper()
	ctl := startController(t, appsFile, id, []string{"FLOTILLA_ADMIN_TOKEN=" + adminToken, "FLOTILLA_READ_TOKEN=" + readToken},
		"--listen", addr, "--log-format", "json")
	// The event streams below last as long as the test.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	server := "http://" + addr
	waitReady(t, server, 60*time.Second)
	streams := map[string]*lockedBuffer{}
	for role, token := range map[string]string{"admin": adminToken, "read": readToken} {
		s := &lockedBuffer{}
		streams[role] = s
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("events as %s: %v %v", role, err, resp)
		}
		go func() {
			defer resp.Body.Close()
			_, _ = io.Copy(s, resp.Body)
		}()
	}
	return ctl, server, streams
}
