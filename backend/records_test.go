package backend

import (
	"context"
	"errors"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestIsLatestRelease_saysNoOnceARecordIsDeletedByHandOrANewerOneIsWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "head")
	swarmtest.Cleanup(t, stack)
	latest := func() charts.Release {
		t.Helper()
		r, err := b.LatestRelease(ctx, stack)
		if err != nil || r == nil {
			t.Fatalf("latest release: %v, %v", r, err)
		}
		return *r
	}
	isLatest := func(r charts.Release) bool {
		t.Helper()
		ok, err := b.IsLatestRelease(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/app", Manifest: "one"}, 0); err != nil {
		t.Fatal(err)
	}
	r1 := latest()
	if r1.Version == 0 {
		t.Fatal("a record read from the swarm has no version")
	}
	if !isLatest(r1) {
		t.Fatal("the only record is not the latest")
	}
	if unversioned := r1; func() bool { unversioned.Version = 0; return isLatest(unversioned) }() {
		t.Fatal("a record without a version was confirmed")
	}

	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 2, Owner: "ctl/app", Manifest: "two"}, 0); err != nil {
		t.Fatal(err)
	}
	if isLatest(r1) {
		t.Fatal("revision 1 is still the latest after revision 2 was recorded")
	}
	r2 := latest()
	if r2.Revision != 2 || !isLatest(r2) {
		t.Fatalf("revision 2 is not the latest: %+v", r2)
	}

	recs, err := b.records(ctx, stack)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records: %d, %v", len(recs), err)
	}
	if _, err := swarmtest.Client(t).ConfigRemove(ctx, recs[0].ID, client.ConfigRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if isLatest(r2) {
		t.Fatal("revision 2 is still the latest after its config was removed by hand")
	}
	if got := latest(); got.Revision != 1 {
		t.Fatalf("latest after the hand removal: revision %d, want 1", got.Revision)
	}
}

func TestRecordRelease_aRecordWrittenMeanwhileUnderTheSameNameIsAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "race")
	swarmtest.Cleanup(t, stack)
	c := swarmtest.Client(t)

	// Another writer's record of revision 1 that the listing before the
	// create does not see (it has no labels): only the daemon's refusal of
	// a second config of that name stands between the two writers.
	name := recordName(stack, 1)
	created, err := c.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name}, Data: []byte("theirs")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.ConfigRemove(context.Background(), created.ID, client.ConfigRemoveOptions{}) })

	err = b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/app", Manifest: "mine"}, 0)
	if !errors.Is(err, charts.ErrRecordExists) {
		t.Fatalf("record over a config of the same name: %v, want charts.ErrRecordExists", err)
	}
	cfg, err := c.ConfigInspect(ctx, created.ID, client.ConfigInspectOptions{})
	if err != nil || string(cfg.Config.Spec.Data) != "theirs" {
		t.Fatalf("the other writer's config after the refused record: %q, %v", cfg.Config.Spec.Data, err)
	}
}
