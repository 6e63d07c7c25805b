package backend

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The owner of a release is its newest record's stamp, newest by revision
// number (10 after 2, not before it as text), even when an older record
// names someone else; and the answer costs one listing.
func TestReleaseOwners_namesTheStampOfEachReleasesNewestRecordFromOneListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	taken, kept := swarmtest.Name(t, "taken"), swarmtest.Name(t, "kept")
	swarmtest.Cleanup(t, taken)
	swarmtest.Cleanup(t, kept)
	for _, r := range []charts.Release{
		{Name: taken, Revision: 1, Owner: "ctl-a/app", Manifest: "one"},
		{Name: taken, Revision: 2, Owner: "ctl-a/app", Manifest: "two"},
		{Name: taken, Revision: 10, Owner: "ctl-b/app", Manifest: "ten"},
		{Name: kept, Revision: 2, Owner: "ctl-b/other", Manifest: "two"},
		{Name: kept, Revision: 10, Owner: "ctl-a/other", Manifest: "ten"},
	} {
		if err := b.RecordRelease(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := b.Stats()
	owners, err := b.ReleaseOwners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Stats().Sub(before).Requests; !maps.Equal(got, map[string]int{"config.list": 1}) {
		t.Errorf("ReleaseOwners sent %v, want one config.list", got)
	}
	if owners[taken] != "ctl-b/app" || owners[kept] != "ctl-a/other" {
		t.Errorf("owners: %s=%q, %s=%q; want ctl-b/app and ctl-a/other (the stamps of revision 10)",
			taken, owners[taken], kept, owners[kept])
	}
}

// Under withListBody the listing's answer goes to the caller's decoder and
// the client decodes an empty list, so the records' data is never decoded
// into memory by the client.
func TestWithListBody_givesTheAnswerToTheDecoderAndTheClientAnEmptyList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "body")
	swarmtest.Cleanup(t, stack)
	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/app", Manifest: "one"}, 0); err != nil {
		t.Fatal(err)
	}
	var seen []swarm.Config
	decode := func(r io.Reader) error { return json.NewDecoder(r).Decode(&seen) }
	list, err := b.api.ConfigList(withListBody(ctx, decode), client.ConfigListOptions{
		Filters: make(client.Filters).Add("label", LabelRelease+"="+stack),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("the client decoded %d configs itself", len(list.Items))
	}
	if len(seen) != 1 || seen[0].Spec.Labels[LabelOwner] != "ctl/app" || len(seen[0].Spec.Data) == 0 {
		t.Errorf("the decoder saw %+v, want the one record with its data", seen)
	}
}

// ReleaseOwners decodes three labels into fields; a tag that drifted from
// the label a record is written with would read every owner as empty.
func TestRecordOwnerLabels_matchTheLabelsRecordsAreWrittenWith(t *testing.T) {
	want := map[string]string{"Release": LabelRelease, "Revision": LabelRevision, "Owner": LabelOwner}
	typ := reflect.TypeFor[recordOwnerLabels]()
	if typ.NumField() != len(want) {
		t.Fatalf("recordOwnerLabels has %d fields, want %d", typ.NumField(), len(want))
	}
	for field, label := range want {
		f, ok := typ.FieldByName(field)
		if !ok || f.Tag.Get("json") != label {
			t.Errorf("field %s has tag %q, want %q", field, f.Tag.Get("json"), label)
		}
	}
}
