package reconcile

import (
	"context"
	"reflect"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
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

func TestADeployOfAGeneratedApplicationRecordsItsSetAndPolicy(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	shop := generatedApp("shop", true)
	shop.Generated.Preview = true
	c := newTestController(t, b, f, testApp("blog", true), shop)
	c.RunOnce(context.Background())
	for stack, want := range map[string]*charts.SetRef{"shop": {Name: "previews", Prune: true, Preview: true}, "blog": nil} {
		rs, err := b.Releases(context.Background(), stack)
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s: %d records, %v", stack, len(rs), err)
		}
		if !reflect.DeepEqual(rs[0].Set, want) {
			t.Errorf("%s: record says set %+v, want %+v", stack, rs[0].Set, want)
		}
	}
}

// A controller that starts after the set stopped generating an application
// has only the stack's record to go by; the set's policy is the one the
// file says now.
func TestAStackItsSetMadeIsJudgedAfterARestartByTheRecordAndTheSetsPolicyNow(t *testing.T) {
	tests := []struct {
		name string
		// recorded is the set's policy when the stack was deployed; nil
		// deploys an application of the file itself (or a record older
		// than the set field).
		recorded *bool
		sets     map[string]bool // what the file says now; nil: never told
		held     bool
		removed  bool
	}{
		{name: "the set still prunes", recorded: ptr(true), sets: map[string]bool{"previews": true}, removed: true},
		{name: "the set turned prune on since", recorded: ptr(false), sets: map[string]bool{"previews": true}, removed: true},
		{name: "the set turned prune off since", recorded: ptr(true), sets: map[string]bool{"previews": false}},
		{name: "the set never pruned", recorded: ptr(false), sets: map[string]bool{"previews": false}},
		{name: "the set was deleted from the file", recorded: ptr(true), sets: map[string]bool{"other": true}},
		{name: "a set has not expanded yet", recorded: ptr(true), sets: map[string]bool{"previews": true}, held: true},
		{name: "no set made the stack", sets: map[string]bool{"previews": true}},
		{name: "the controller was never told its sets", recorded: ptr(true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			removals := 0
			b := releaseListing{chartstest.NewMinimal(), &removals}
			f := newFakeFetcher()
			f.commit(t, repoFiles(composeV1))
			shop := testApp("shop", true)
			if tt.recorded != nil {
				shop = generatedApp("shop", *tt.recorded)
			}
			newTestController(t, b, f, testApp("blog", true), shop).RunOnce(context.Background())

			// The restarted controller: shop is gone from its set.
			c := newTestController(t, b, f, testApp("blog", true))
			c.HoldOrphanPruning(tt.held)
			if tt.sets != nil {
				c.SetApplicationSets(tt.sets)
			}
			orphans, err := c.SweepOrphans(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(orphans) != 1 || orphans[0].Stack != "shop" {
				t.Fatalf("orphans %+v", orphans)
			}
			if (removals > 0) != tt.removed || orphans[0].Sweep.DryRun == tt.removed {
				t.Fatalf("%d removals, dry run %v; want removed %v", removals, orphans[0].Sweep.DryRun, tt.removed)
			}
			if want := map[bool]string{true: "previews"}[tt.removed]; orphans[0].Set != want {
				t.Errorf("orphan names set %q, want %q", orphans[0].Set, want)
			}
		})
	}
}

func TestARestartedControllerKeepsTheStackOfAGeneratedNameThatIsLoadedAgainElsewhere(t *testing.T) {
	removals := 0
	b := releaseListing{chartstest.NewMinimal(), &removals}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	newTestController(t, b, f, testApp("blog", true), generatedApp("shop", true)).RunOnce(context.Background())

	// shop is now an application of the file deploying another stack: its
	// old stack is an orphan, but not one its set stopped generating.
	moved := testApp("shop", true)
	moved.Stack = "shop-v2"
	c := newTestController(t, b, f, testApp("blog", true), moved)
	c.SetApplicationSets(map[string]bool{"previews": true})
	if _, err := c.SweepOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	if removals != 0 {
		t.Fatalf("%d removals from the stack of an application still loaded", removals)
	}
}

func TestAnApplicationLeavingASetIsJudgedByThePolicyOfTheFileThatDroppedIt(t *testing.T) {
	for name, sets := range map[string]map[string]bool{
		"prune turned off in the same file": {"previews": false},
		"the whole set deleted":             {},
	} {
		t.Run(name, func(t *testing.T) {
			removals := 0
			b := releaseListing{chartstest.NewMinimal(), &removals}
			f := newFakeFetcher()
			f.commit(t, repoFiles(composeV1))
			c := newTestController(t, b, f, testApp("blog", true), generatedApp("shop", true))
			c.SetApplicationSets(map[string]bool{"previews": true})
			c.RunOnce(context.Background())
			c.SetApplicationSets(sets)
			c.SetApplications([]application.Application{testApp("blog", true)})
			if _, err := c.SweepOrphans(context.Background()); err != nil {
				t.Fatal(err)
			}
			if removals != 0 {
				t.Fatalf("%d removals", removals)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
