package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
)

func TestADryRunSyncAnswersWithThePlannedWritesAndWritesNothing(t *testing.T) {
	b := newLiveDriftFake()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", false))
	if res, err := c.SyncNow(context.Background(), "shop", "test"); err != nil || res.Err != nil {
		t.Fatalf("install: %v %v", err, res.Err)
	}
	f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
	writes, records := b.Writes(), len(mustReleases(t, c))

	res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{By: "test", DryRun: true, Prune: true})
	if err != nil || res.Err != nil {
		t.Fatalf("dry run: %v %v", err, res.Err)
	}
	if res.Plan == nil {
		t.Fatal("the dry run's result has no plan")
	}
	var web *ServiceDiff
	for i := range res.Plan.Services {
		if res.Plan.Services[i].Name == "web" {
			web = &res.Plan.Services[i]
		}
	}
	if web == nil || web.Change != "update" || len(web.Fields) != 1 || web.Fields[0].Field != "env.MESSAGE" ||
		web.Fields[0].Desired != "two" || web.Fields[0].Live != "one" {
		t.Errorf("the plan's services %+v, want web's env.MESSAGE one -> two", res.Plan.Services)
	}
	if !strings.Contains(res.Plan.Manifest, "-        MESSAGE: one") || !strings.Contains(res.Plan.Manifest, "+        MESSAGE: two") {
		t.Errorf("the plan's manifest diff:\n%s", res.Plan.Manifest)
	}
	if b.Writes() != writes || len(mustReleases(t, c)) != records {
		t.Errorf("the dry run wrote: %d writes and %d records, then %d and %d", writes, records, b.Writes(), len(mustReleases(t, c)))
	}
	if res, _ := c.SyncNow(context.Background(), "shop", "test"); res.Plan != nil {
		t.Error("a real sync's result carries a plan")
	}
}

func TestTheDiffAgainstARevisionComparesItsManifestWithTheDeclaredOrTheDeployedOne(t *testing.T) {
	b := newLiveDriftFake()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", false))
	for _, msg := range []string{"two", "three"} {
		if res, err := c.SyncNow(context.Background(), "shop", "test"); err != nil || res.Err != nil {
			t.Fatalf("sync: %v %v", err, res.Err)
		}
		f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: "+msg, 1)))
	}
	// Revision 1 says one, revision 2 (deployed) two, the repository three.
	d, err := c.DiffRevision(context.Background(), "shop", 1, AgainstDeclared)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- revision 1\n", "+++ declared\n", "-        MESSAGE: one\n", "+        MESSAGE: three\n"} {
		if !strings.Contains(d.Manifest, want) {
			t.Errorf("against declared lacks %q:\n%s", want, d.Manifest)
		}
	}
	d, err = c.DiffRevision(context.Background(), "shop", 1, AgainstDeployed)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- deployed (revision 2)\n", "+++ revision 1\n", "-        MESSAGE: two\n", "+        MESSAGE: one\n"} {
		if !strings.Contains(d.Manifest, want) {
			t.Errorf("against deployed lacks %q:\n%s", want, d.Manifest)
		}
	}
	if d, err := c.DiffRevision(context.Background(), "shop", 2, AgainstDeployed); err != nil || d.Manifest != "" {
		t.Errorf("the deployed revision against itself: %q, %v; want no diff", d.Manifest, err)
	}
	if _, err := c.DiffRevision(context.Background(), "shop", 9, AgainstDeclared); !errors.Is(err, ErrNoRevision) {
		t.Errorf("a revision not kept: %v, want ErrNoRevision", err)
	}
	if _, err := c.DiffRevision(context.Background(), "nope", 1, AgainstDeclared); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown application: %v, want ErrNotFound", err)
	}
}

func TestAManifestDiffShowsAChangedSealedValueAsChangedButNeverItsDigest(t *testing.T) {
	a := "flotilla-sealed:" + strings.Repeat("a", 32)
	z := "flotilla-sealed:" + strings.Repeat("b", 32)
	text, err := manifestDiff("env:\n  TOKEN: "+a+"\n  PLAIN: x\n", "env:\n  TOKEN: "+z+"\n  PLAIN: x\n", "revision 1", "declared")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "flotilla-sealed:") || !strings.Contains(text, "-  TOKEN: ***\n") || !strings.Contains(text, "+  TOKEN: ***\n") {
		t.Errorf("diff:\n%s", text)
	}
	if text, _ := manifestDiff("same\n", "same\n", "a", "b"); text != "" {
		t.Errorf("equal manifests give %q", text)
	}
}

func mustReleases(t *testing.T, c *Controller) []charts.Release {
	t.Helper()
	rs, err := c.History(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
