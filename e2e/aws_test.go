package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/secretstore/kumotest"
)

// awsCompose: api and worker mount the secret taken from AWS Secrets
// Manager (kumo, the emulator, here), web mounts nothing.
const awsCompose = `version: "3.8"
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
      secretRef: {store: aws, path: %s/db, key: password}
`

func TestAWSSecretRotationRollsOnlyTheConsumersOnce(t *testing.T) {
	t.Parallel()
	flotillaBinary(t)
	srv := kumotest.Start(t)
	stack := swarmtest.Name(t, "aws")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	pw := func(n int) string { return fmt.Sprintf("aws-e2e-pw%d-91b4-plaintext", n) }
	const keyID, secretKey = "AKIDE2EAWS0001", "aws-e2e-secret-access-key-5d1e"
	name := stack + "/db"
	_, v1 := srv.Create(name, fmt.Sprintf(`{"password":%q,"user":"shop"}`, pw(1)))
	keyIDFile, secretKeyFile := filepath.Join(dir, "aws-key-id"), filepath.Join(dir, "aws-secret-key")
	for f, body := range map[string]string{keyIDFile: keyID, secretKeyFile: secretKey} {
		if err := os.WriteFile(f, []byte(body+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	repo := gittest.New(t)
	repo.Commit("secret by reference to AWS", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(awsCompose, stack)})
	appsFile := storeAppsFile(t, dir, storeApps{stack: stack, repo: repo.Dir, grant: stack + "/*", store: secretStore{"aws", "aws",
		fmt.Sprintf("{region: %s, endpoint: %s, auth: {accessKeyIDFile: %s, secretAccessKeyFile: %s}}", kumotest.Region, srv.Endpoint, keyIDFile, secretKeyFile)}})

	addr := freeAddr(t)
	const adminToken, readToken = "e2e-aws-admin-0123456789", "e2e-aws-read-0123456789"
	ctl, server, streams := startWatchedController(t, appsFile, "e2eaws", addr, adminToken, readToken)
	var out outputs
	a := apiReader{t, server}
	status := func() application.Status { return a.status(readToken, stack, &out) }
	history := func() []charts.Release { return a.history(readToken, stack, &out) }
	cl := swarmtest.Client(t)
	mounted := func(svc string) string { return mountedSecret(t, cl, stack, svc) }

	// Revision 1: deployed with the value from the store, its version id
	// recorded.
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		st := status()
		return st.Sync == application.Synced && st.LastAppliedRevision == 1, fmt.Sprintf("%s rev %d %s", st.Sync, st.LastAppliedRevision, st.LastError)
	})
	secret1 := mounted("api")
	if secret1 == "" || mounted("worker") != secret1 || mounted("web") != "" {
		t.Fatalf("mounts: api %q worker %q web %q", secret1, mounted("worker"), mounted("web"))
	}
	if st := status(); len(st.SecretRefs) != 1 || st.SecretRefs[0].VersionID != v1 || st.SecretRefs[0].Path != name || st.SecretRefs[0].SwarmSecret != secret1 {
		t.Fatalf("status secret refs %+v, want version id %s", st.SecretRefs, v1)
	}
	writes := serviceWrites(t, stack)

	// Rotation: a new AWSCURRENT version. The watch notices it between
	// passes; revision 2 deploys it with the cause naming both versions.
	v2 := srv.Put(name, fmt.Sprintf(`{"password":%q,"user":"shop"}`, pw(2)))
	want := fmt.Sprintf("secret rotated: aws %s key password version %s to %s", name, v1, v2)
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		h := history()
		st := status()
		return len(h) > 0 && h[0].Revision == 2 && h[0].Trigger == want && st.LastAppliedRevision == 2 && st.Sync == application.Synced,
			fmt.Sprintf("status %s rev %d %s, history %+v", st.Sync, st.LastAppliedRevision, st.LastError, h)
	})
	h := history()
	if r := h[0].SecretRefs; len(r) != 1 || r[0].VersionID != v2 || r[0].Version != 0 || r[0].RotatedRevision != 2 {
		t.Fatalf("record of revision 2: %+v", r)
	}
	if st := status(); len(st.SecretRefs) != 1 || st.SecretRefs[0].VersionID != v2 || st.SecretRefs[0].RotatedRevision != 2 || st.SecretRefs[0].LastRotated.IsZero() {
		t.Fatalf("status after the rotation: %+v", st.SecretRefs)
	}
	secret2 := mounted("api")
	if secret2 == secret1 || mounted("worker") != secret2 || mounted("web") != "" {
		t.Fatalf("after the rotation: api %q worker %q web %q (before %q)", secret2, mounted("worker"), mounted("web"), secret1)
	}
	// Exactly the consumers were written, once each; web never. A later
	// pass with the version unchanged writes nothing more.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		w := writes()
		return w["api"] == 1 && w["worker"] == 1, fmt.Sprint(w)
	})
	c := cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + adminToken}}
	if _, code := c.run("app", "refresh", stack); code != 0 {
		t.Fatal("refresh failed")
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		st := status()
		return st.LastPass.After(h[0].Time) && st.Sync == application.Synced && st.LastAppliedRevision == 2,
			fmt.Sprintf("last pass %s, rev %d", st.LastPass, st.LastAppliedRevision)
	})
	if w := writes(); w["api"] != 1 || w["worker"] != 1 || w["web"] != 0 {
		t.Fatalf("service writes %v: want api and worker once, web never", w)
	}

	// No value, and no AWS key, in the records, the API, the events or
	// the log.
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
	for role, s := range streams {
		out.add("events as "+role, s.String())
	}
	out.add("controller log", ctl.logs.String())
	out.scan(t, pw(1), pw(2), secretKey)
	if len(out.bodies["controller log"]) == 0 || !strings.Contains(strings.Join(out.bodies["events as read"], ""), "secret rotated") {
		t.Error("the log or the rotation event was not scanned")
	}
}
