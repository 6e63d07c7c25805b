package reconcile

import (
	"context"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

func generatedApp(name string, prune bool) application.Application {
	a := testApp(name, true)
	a.Generated = &application.Generated{Set: "previews", Prune: prune}
	return a
}

func TestAnApplicationLeavingASetThatPrunesHasItsStackRemovedWithoutControllerPrune(t *testing.T) {
	for _, prune := range []bool{false, true} {
		removals := 0
		b := releaseListing{chartstest.NewMinimal(), &removals}
		f := newFakeFetcher()
		f.commit(t, repoFiles(composeV1))
		c := newTestController(t, b, f, testApp("blog", true), generatedApp("shop", prune))
		if st, _ := c.Status("shop"); st.Set != "previews" {
			t.Fatalf("status of a generated application names set %q", st.Set)
		}
		c.RunOnce(context.Background())
		c.SetApplications([]application.Application{testApp("blog", true)})
		if _, err := c.SweepOrphans(context.Background()); err != nil {
			t.Fatal(err)
		}
		if (removals > 0) != prune {
			t.Fatalf("set prune %v: %d removals", prune, removals)
		}
	}
}

func TestOrphanPruningHeldWhileASetCannotBeExpandedRemovesNothing(t *testing.T) {
	removals := 0
	b := releaseListing{chartstest.NewMinimal(), &removals}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, PruneOrphans: true},
		[]application.Application{testApp("blog", true), generatedApp("shop", true)})
	if err != nil {
		t.Fatal(err)
	}
	c.RunOnce(context.Background())
	c.HoldOrphanPruning(true)
	c.SetApplications([]application.Application{testApp("blog", true)})
	orphans, err := c.SweepOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if removals != 0 || len(orphans) != 1 || !orphans[0].Sweep.DryRun {
		t.Fatalf("held pruning removed %d objects (orphans %+v)", removals, orphans)
	}
	c.HoldOrphanPruning(false)
	if _, err := c.SweepOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	if removals == 0 {
		t.Fatal("released pruning removed nothing")
	}
}
