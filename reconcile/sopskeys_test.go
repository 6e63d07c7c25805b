package reconcile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// A project's key replaces the controller's for its members: team B's
// repository holding team A's ciphertext, encrypted to the controller-wide
// key A still uses, is refused naming the application and the file, and
// nothing is written or recorded.
func TestAProjectKeyRefusesAnotherTeamsCiphertext(t *testing.T) {
	shared, teamB := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	ctlKey, err := sopsage.ParseIdentities(shared.File)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "team-b-age-key")
	if err := os.WriteFile(keyFile, teamB.File, 0o600); err != nil {
		t.Fatal(err)
	}
	const teamAToken = "team-a-token-7c1e"
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, sealedRepo(t, teamAToken, shared.Recipient))
	app := testApp("shop", true)
	app.Project = &application.ProjectTerms{Name: "team-b", SOPS: &application.SOPS{AgeKeyFile: keyFile}}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: ctlKey}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	res := mustReconcile(t, c, "shop")
	if !errors.Is(res.Err, sopsage.ErrNoMatch) {
		t.Fatalf("pass error %v: want ErrNoMatch", res.Err)
	}
	for _, w := range []string{"web.env", "no age identity matches"} {
		if !strings.Contains(res.Err.Error(), w) {
			t.Errorf("error %q does not name %q", res.Err, w)
		}
	}
	if st := res.Status; !strings.Contains(st.LastError, `application "shop"`) || strings.Contains(st.LastError, teamAToken) {
		t.Errorf("status error %q: want it to name the application and never the value", st.LastError)
	}
	if b.Writes() != 0 {
		t.Errorf("%d writes after a refused render", b.Writes())
	}
	if rs, _ := b.Releases(context.Background(), "shop"); len(rs) != 0 {
		t.Errorf("%d releases recorded", len(rs))
	}

	// The same repository re-encrypted to team B's key deploys: the
	// project key is used, not only refused.
	f.commit(t, sealedRepo(t, "team-b-token-11d0", teamB.Recipient))
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatalf("team B's own ciphertext: %v", res.Err)
	}
}

// An application's own key wins over its project's.
func TestAnApplicationKeyWinsOverItsProjectKey(t *testing.T) {
	own, project := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, sealedRepo(t, "tok-project-9e2a", project.Recipient))
	app := testApp("shop", true)
	app.SOPS = &application.SOPS{AgeKeyFile: write("own", own.File)}
	app.Project = &application.ProjectTerms{Name: "shop", SOPS: &application.SOPS{AgeKeyFile: write("project", project.File)}}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet}, []application.Application{app})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); !errors.Is(res.Err, sopsage.ErrNoMatch) {
		t.Fatalf("pass error %v: want ErrNoMatch, the project key unused", res.Err)
	}
}

// A pull request's preview decrypts nothing with the keys of the
// controller or of the project its name falls in: its code could mount the
// plaintext. The base's ciphertext, which a static application of the same
// repository deploys, is refused in the preview naming the file and where
// a preview's key comes from; the set's preview key opens files encrypted
// to it.
func TestAPreviewDecryptsOnlyWithTheKeyItsSetGrants(t *testing.T) {
	shared, previewKey := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	ctlKey, err := sopsage.ParseIdentities(shared.File)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	projectKey := filepath.Join(dir, "project-age-key")
	if err := os.WriteFile(projectKey, shared.File, 0o600); err != nil {
		t.Fatal(err)
	}
	const baseToken = "base-token-5f0c"
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, sealedRepo(t, baseToken, shared.Recipient))
	static := testApp("shop", true)
	pr := testApp("shop-pr-3", true)
	pr.Project = &application.ProjectTerms{Name: "shop", SOPS: &application.SOPS{AgeKeyFile: projectKey}}
	pr.Generated = &application.Generated{Set: "previews", Prune: true, Preview: true, Index: 2}
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: ctlKey}, []application.Application{static, pr})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatalf("the static application with the controller's key: %v", res.Err)
	}
	writes := b.Writes()
	res := mustReconcile(t, c, "shop-pr-3")
	if !errors.Is(res.Err, sopsage.ErrNoIdentity) {
		t.Fatalf("preview pass error %v: want ErrNoIdentity", res.Err)
	}
	for _, w := range []string{"web.env", "no age identity is configured", "applicationSets[2].preview.sops"} {
		if !strings.Contains(res.Err.Error(), w) {
			t.Errorf("error %q does not name %q", res.Err, w)
		}
	}
	if strings.Contains(res.Status.LastError, baseToken) {
		t.Errorf("status error %q holds the value", res.Status.LastError)
	}
	if b.Writes() != writes {
		t.Errorf("%d writes after the preview's refused render", b.Writes()-writes)
	}
	if rs, _ := b.Releases(context.Background(), "shop-pr-3"); len(rs) != 0 {
		t.Errorf("%d preview releases recorded", len(rs))
	}

	// The set's preview key opens what is encrypted to it.
	keyFile := filepath.Join(dir, "preview-age-key")
	if err := os.WriteFile(keyFile, previewKey.File, 0o600); err != nil {
		t.Fatal(err)
	}
	pr.SOPS = &application.SOPS{AgeKeyFile: keyFile}
	c, err = New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: ctlKey}, []application.Application{static, pr})
	if err != nil {
		t.Fatal(err)
	}
	f.commit(t, sealedRepo(t, "preview-token-0a9d", previewKey.Recipient))
	if res := mustReconcile(t, c, "shop-pr-3"); res.Err != nil {
		t.Fatalf("the preview's own key: %v", res.Err)
	}
}
