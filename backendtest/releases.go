package backendtest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// Releases lists newest first, and keep < 1 prunes nothing.
func (s *suite) testReleasesNewestFirst(t *testing.T, b charts.Backend) {
	name := s.stack(t)
	for rev, keep := range []int{0, 0, -1, 0} {
		record(t, b, charts.Release{Name: name, Revision: rev + 1, Owner: "ctl/app"}, keep)
	}
	if got := revisions(releases(t, b, name)); !slices.Equal(got, []int{4, 3, 2, 1}) {
		t.Fatalf("revisions %v, want [4 3 2 1]", got)
	}
}

// RecordRelease keeps the newest keep revisions, the one it just stored
// among them.
func (s *suite) testRecordReleaseKeep(t *testing.T, b charts.Backend) {
	name := s.stack(t)
	for rev := 1; rev <= 4; rev++ {
		record(t, b, charts.Release{Name: name, Revision: rev, Owner: "ctl/app"}, 2)
	}
	if got := revisions(releases(t, b, name)); !slices.Equal(got, []int{4, 3}) {
		t.Fatalf("revisions with keep 2: %v, want [4 3]", got)
	}
	record(t, b, charts.Release{Name: name, Revision: 5, Owner: "ctl/app"}, 1)
	if got := revisions(releases(t, b, name)); !slices.Equal(got, []int{5}) {
		t.Fatalf("revisions with keep 1: %v, want [5]", got)
	}
}

// A revision is recorded once: a second record of it is refused and the
// first stays as it was, so history cannot be rewritten.
func (s *suite) testRecordReleaseRefusesDuplicate(t *testing.T, b charts.Backend) {
	name := s.stack(t)
	record(t, b, charts.Release{Name: name, Revision: 1, Owner: "ctl/app", Commit: "aaaa"}, 0)
	err := b.RecordRelease(context.Background(), charts.Release{Name: name, Revision: 1, Owner: "ctl/app", Commit: "bbbb"}, 0)
	if !errors.Is(err, charts.ErrRecordExists) {
		t.Fatalf("second record of revision 1: %v, want an error wrapping charts.ErrRecordExists", err)
	}
	rs := releases(t, b, name)
	if len(rs) != 1 || rs[0].Commit != "aaaa" {
		t.Fatalf("records after refused duplicate: %+v, want revision 1 with commit aaaa only", rs)
	}
}

// Every field of a record comes back as stored; Time to the second, since
// a backend may store less precision than time.Time has.
func (s *suite) testRecordReleaseRoundTrip(t *testing.T, b charts.Backend) {
	name := s.stack(t)
	manifest := s.render(t, name, project{}).Manifest
	recorded := time.Date(2024, 5, 17, 9, 30, 12, 345678901, time.FixedZone("test", 2*60*60))
	wantRel := charts.Release{
		Name:         name,
		Revision:     7,
		Owner:        "ctl-1/shop",
		Manifest:     manifest,
		Commit:       "0123456789abcdef0123456789abcdef01234567",
		Time:         recorded,
		Trigger:      "rollback",
		PinnedCommit: "fedcba9876543210fedcba9876543210fedcba98",
		Author:       "Alice <alice@example.com>",
		Message:      "Roll back the worker\n\nIt crashed.",
	}
	record(t, b, wantRel, 0)
	rs := releases(t, b, name)
	if len(rs) != 1 {
		t.Fatalf("%d records, want 1", len(rs))
	}
	got := rs[0]
	if d := got.Time.Sub(wantRel.Time).Abs(); d >= time.Second {
		t.Errorf("time %v, want %v", got.Time, wantRel.Time)
	}
	got.Time, wantRel.Time = time.Time{}, time.Time{}
	got.Version = 0 // the store's bookkeeping, not part of the record
	if !reflect.DeepEqual(got, wantRel) {
		t.Errorf("record round trip:\n got %+v\nwant %+v", got, wantRel)
	}
}

// A release never recorded has no revisions, and that is an answer, not an
// error: planning treats it as a first install. Other releases' records do
// not leak into it.
func (s *suite) testReleasesUnknown(t *testing.T, b charts.Backend) {
	other, unknown := s.stack(t), s.stack(t)
	record(t, b, charts.Release{Name: other, Revision: 1, Owner: "ctl/app"}, 0)
	rs, err := b.Releases(context.Background(), unknown)
	if err != nil {
		t.Fatalf("releases of an unknown release: %v", err)
	}
	if len(rs) != 0 {
		t.Fatalf("unknown release has revisions %v", revisions(rs))
	}
}

// A backend that implements capability.ReleaseHead confirms the newest
// record it returned and no other: not an older one once a newer one is
// recorded, and not one without the version it was read at.
func (s *suite) testReleaseHeadAgreesWithReleases(t *testing.T, b charts.Backend) {
	h, ok := capability.As[capability.ReleaseHead](b)
	if !ok {
		t.Log("backend lacks ReleaseHead: planning reads the whole history, nothing to check")
		return
	}
	ctx := context.Background()
	name := s.stack(t)
	isLatest := func(r charts.Release) bool {
		t.Helper()
		ok, err := h.IsLatestRelease(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	record(t, b, charts.Release{Name: name, Revision: 1, Owner: "ctl/app"}, 0)
	r1 := releases(t, b, name)[0]
	if !isLatest(r1) {
		t.Fatal("the only record is not confirmed as the newest")
	}
	record(t, b, charts.Release{Name: name, Revision: 2, Owner: "ctl/app"}, 0)
	if isLatest(r1) {
		t.Fatal("revision 1 is confirmed as the newest after revision 2 was recorded")
	}
	r2 := releases(t, b, name)[0]
	if !isLatest(r2) {
		t.Fatal("revision 2 is not confirmed as the newest")
	}
	r2.Version = 0
	if isLatest(r2) {
		t.Fatal("a record without the version it was read at is confirmed")
	}
}

// A backend that implements capability.ReleaseHeads answers for several
// releases at once what checking each on its own answers: the newest record
// of each is confirmed, an older one of the same release is not, and every
// record asked about is in the answer.
func (s *suite) testReleaseHeadsAgreeWithReleases(t *testing.T, b charts.Backend) {
	h, ok := capability.As[capability.ReleaseHeads](b)
	if !ok {
		t.Log("backend lacks ReleaseHeads: each record is checked on its own, nothing to check")
		return
	}
	ctx := context.Background()
	one, two := s.stack(t), s.stack(t)
	record(t, b, charts.Release{Name: one, Revision: 1, Owner: "ctl/one"}, 0)
	record(t, b, charts.Release{Name: two, Revision: 1, Owner: "ctl/two"}, 0)
	old := releases(t, b, one)[0]
	record(t, b, charts.Release{Name: one, Revision: 2, Owner: "ctl/one"}, 0)
	got, err := h.AreLatestReleases(ctx, []charts.Release{old, releases(t, b, two)[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[one] || !got[two] {
		t.Fatalf("heads %v: want %s's revision 1 not confirmed and %s's confirmed", got, one, two)
	}
	if got, err := h.AreLatestReleases(ctx, []charts.Release{releases(t, b, one)[0]}); err != nil || !got[one] {
		t.Fatalf("the newest record of %s: %v, %v", one, got, err)
	}
}
