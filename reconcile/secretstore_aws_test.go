package reconcile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/secretstore/kumotest"
)

// The pass with AWS Secrets Manager behind the references: kumo, an AWS
// emulator (scripts/kumo.sh), not AWS.

func awsApp(t *testing.T, srv *kumotest.Server) application.Application {
	t.Helper()
	dir := t.TempDir()
	auth := application.AWSAuth{AccessKeyIDFile: filepath.Join(dir, "key-id"), SecretAccessKeyFile: filepath.Join(dir, "secret-key")}
	for _, f := range []string{auth.AccessKeyIDFile, auth.SecretAccessKeyFile} {
		if err := os.WriteFile(f, []byte("test-"+filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &application.File{
		APIVersion: application.APIVersion,
		SecretStores: []application.SecretStore{{
			Name:         "aws",
			AWS:          &application.AWSStore{Region: kumotest.Region, Endpoint: srv.Endpoint, Auth: auth},
			PollInterval: application.Duration{Duration: time.Nanosecond},
			Grants:       []application.SecretGrant{{Applications: []string{"shop"}, Paths: []string{"shop/*"}}},
		}},
		Applications: []application.Application{testApp("shop", true)},
	}
	application.Defaults(f)
	if err := application.Validate(f); err != nil {
		t.Fatal(err)
	}
	return f.Applications[0]
}

func TestARotatedAWSSecretIsRecordedWithItsVersionIDs(t *testing.T) {
	srv := kumotest.Start(t)
	const pw1, pw2 = "aws-rec-pw1-4be0-plaintext", "aws-rec-pw2-4be0-plaintext"
	_, v1 := srv.Create("shop/db", `{"password":"`+pw1+`"}`)
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, map[string]string{"docker-compose.yml": strings.Replace(composeVault, "{store: vault, path: kv/data/shop/db,", "{store: aws, path: shop/db,", 1)})
	c := newTestController(t, b, f, awsApp(t, srv))

	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %s %v", res.Action, res.Err)
	}
	if refs := res.Status.SecretRefs; len(refs) != 1 || refs[0].VersionID != v1 || refs[0].Version != 0 {
		t.Fatalf("status refs %+v, want version id %s", refs, v1)
	}
	writes := b.Writes()
	if res = mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged || b.Writes() != writes {
		t.Fatalf("steady pass: %s %v, %d writes", res.Action, res.Err, b.Writes()-writes)
	}

	v2 := srv.Put("shop/db", `{"password":"`+pw2+`"}`)
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("rotation: %s %v", res.Action, res.Err)
	}
	if got := res.Deployed.Updated; !slices.Equal(got, []string{"api", "worker"}) {
		t.Fatalf("rotation updated %v, want api and worker", got)
	}
	rs, _ := b.Releases(t.Context(), "shop")
	rec := rs[0]
	if want := "secret rotated: aws shop/db key password version " + v1 + " to " + v2; rec.Trigger != want {
		t.Fatalf("trigger %q, want %q", rec.Trigger, want)
	}
	if len(rec.SecretRefs) != 1 || rec.SecretRefs[0].VersionID != v2 || rec.SecretRefs[0].RotatedRevision != rec.Revision {
		t.Fatalf("record refs %+v", rec.SecretRefs)
	}
	for _, r := range rs {
		if strings.Contains(r.Manifest, pw1) || strings.Contains(r.Manifest, pw2) {
			t.Fatalf("record %d holds a value", r.Revision)
		}
	}
}
