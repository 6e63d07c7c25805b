package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
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

// sopsController is h.controller with a renderer that decrypts with ids:
// the hook the controller command will fill from --sops-age-key-file.
func (h *harness) sopsController(ids *sopsage.Identities) *reconcile.Controller {
	h.t.Helper()
	c, err := reconcile.New(reconcile.Options{
		ControllerID: h.id,
		Backend:      h.backend,
		Fetcher:      source.New(source.Options{CacheDir: filepath.Join(h.cache, "git"), Logger: quiet}),
		Logger:       quiet,
		Render: func(stack string, d compose.Dir) (*compose.Rendered, error) {
			d.Decrypt = ids.Decrypt
			return compose.Render(stack, d)
		},
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

	// The swarm secret is named after the plaintext's digest, which is
	// what Render hashed and handed to the deploy.
	sum := sha256.Sum256([]byte(e2ePassword))
	wantSecret := h.app.Stack + "_db_password-" + hex.EncodeToString(sum[:])[:10]
	app := h.services()["app"]
	refs := app.Spec.TaskTemplate.ContainerSpec.Secrets
	if len(refs) != 1 || refs[0].SecretName != wantSecret {
		t.Fatalf("service mounts %+v, want secret %s", refs, wantSecret)
	}
	c := swarmtest.Client(t)
	if _, _, err := c.SecretInspectWithRaw(context.Background(), refs[0].SecretID); err != nil {
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
	if m := rels[0].Manifest; strings.Contains(m, e2ePassword) || strings.Contains(m, "ENC[") {
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
