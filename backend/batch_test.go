package backend

import (
	"context"
	"github.com/moby/moby/client"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// One listing judges the kept records of many releases, each by its own
// release: a newer record of one, or a record of another removed by hand,
// answers no for that one alone.
func TestAreLatestReleases_judgesEveryKeptRecordFromOneListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	var names []string
	kept := map[string]charts.Release{}
	for _, p := range []string{"hda", "hdb", "hdc"} {
		name := swarmtest.Name(t, p)
		swarmtest.Cleanup(t, name)
		names = append(names, name)
		if err := b.RecordRelease(ctx, charts.Release{Name: name, Revision: 1, Owner: "ctl/" + p, Manifest: "one"}, 0); err != nil {
			t.Fatal(err)
		}
		r, err := b.LatestRelease(ctx, name)
		if err != nil || r == nil {
			t.Fatalf("latest of %s: %v %v", name, r, err)
		}
		kept[name] = *r
	}
	check := func() map[string]bool {
		t.Helper()
		var rs []charts.Release
		for _, n := range names {
			rs = append(rs, kept[n])
		}
		before := b.Stats()
		got, err := b.AreLatestReleases(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		if d := b.Stats().Sub(before); d.Total() != 1 || d.Requests["config.list"] != 1 {
			t.Fatalf("checking %d records sent %v, want one config listing", len(rs), d.Requests)
		}
		if len(got) != len(rs) {
			t.Fatalf("answer %v does not cover every kept record", got)
		}
		return got
	}
	for n, ok := range check() {
		if !ok {
			t.Errorf("%s: the only record is not the latest", n)
		}
	}

	a, c := names[0], names[2]
	if err := b.RecordRelease(ctx, charts.Release{Name: a, Revision: 2, Owner: "ctl/hda", Manifest: "two"}, 0); err != nil {
		t.Fatal(err)
	}
	recs, err := b.records(ctx, c)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records of %s: %d, %v", c, len(recs), err)
	}
	if _, err := swarmtest.Client(t).ConfigRemove(ctx, recs[0].ID, client.ConfigRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	got := check()
	if got[a] || !got[names[1]] || got[c] {
		t.Fatalf("after a newer record of %s and a hand removal of %s's: %v, want only %s latest", a, c, got, names[1])
	}

	unversioned := kept[names[1]]
	unversioned.Version = 0
	kept[names[1]] = unversioned
	if got := check(); got[names[1]] {
		t.Fatal("a record without a version was confirmed")
	}
}

// One listing answers for several stacks with what each stack's own
// LiveServices answers, and a stack with no services is present and empty.
func TestLiveServicesOf_answersEveryStackAsItsOwnListingWouldFromOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	one, two := swarmtest.Name(t, "livea"), swarmtest.Name(t, "liveb")
	missing := swarmtest.Name(t, "livenone")
	for _, s := range []string{one, two} {
		swarmtest.Cleanup(t, s)
		deploy(t, b, s, fixture{}, nil)
	}
	before := b.Stats()
	got, err := b.LiveServicesOf(ctx, []string{one, two, missing})
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Stats().Sub(before); d.Total() != 1 || d.Requests["service.list"] != 1 {
		t.Errorf("requests %v, want one service listing", d.Requests)
	}
	for _, s := range []string{one, two} {
		own, err := b.LiveServices(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[s]) != 3 || len(got[s]) != len(own) {
			t.Fatalf("%s: %d services from the batch, %d from its own listing, want 3", s, len(got[s]), len(own))
		}
		for name, svc := range own {
			if b := got[s][name]; b.ID != svc.ID || b.Spec.Name != name {
				t.Errorf("%s: %s from the batch is %s@%d, own listing %s@%d", s, name, b.ID, b.Version.Index, svc.ID, svc.Version.Index)
			}
		}
	}
	if m, ok := got[missing]; !ok || m == nil || len(m) != 0 {
		t.Errorf("stack that does not exist = %#v (present %v), want an empty map", m, ok)
	}
}

// The health read's own service listing carries the specs live drift
// compares: one service listing and one task listing answer both.
func TestReadLiveStacks_returnsTheSpecsOfTheListingHealthIsReadFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	one, missing := swarmtest.Name(t, "shared"), swarmtest.Name(t, "sharednone")
	swarmtest.Cleanup(t, one)
	deploy(t, b, one, fixture{}, nil)
	before := b.Stats()
	states, live, err := b.ReadLiveStacks(ctx, []string{one, missing})
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Stats().Sub(before); d.Requests["service.list"] != 1 || d.Requests["task.list"] != 1 || d.Total() != 2 {
		t.Errorf("requests %v, want one service and one task listing", d.Requests)
	}
	own, err := b.LiveServices(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if len(states[one]) != 3 || len(live[one]) != len(own) {
		t.Fatalf("%d states and %d specs, own listing %d, want 3 of each", len(states[one]), len(live[one]), len(own))
	}
	for name, svc := range own {
		got := live[one][name]
		// Versions are not compared: Swarm moves them itself while a new
		// service settles.
		if got.ID != svc.ID || got.Spec.Name != name || got.Spec.TaskTemplate.ContainerSpec.Image != svc.Spec.TaskTemplate.ContainerSpec.Image {
			t.Errorf("%s: shared listing has %s %q, own listing %s", name, got.ID, got.Spec.Name, svc.ID)
		}
	}
	if m, ok := live[missing]; !ok || len(m) != 0 || states[missing] == nil {
		t.Errorf("stack that does not exist: specs %#v (present %v), states %#v", m, ok, states[missing])
	}
}
