package reconcile

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// headBackend is MinimalBackend plus ReleaseHead, counting how the release
// history is read. beforeRecord, when set, runs once just before the next
// RecordRelease, as another writer racing this one would.
type headBackend struct {
	*chartstest.MinimalBackend

	mu           sync.Mutex
	heads, reads int
	beforeRecord func(r charts.Release)
	// beforeHead, when set, runs once just before head check number n.
	beforeHead   func()
	beforeHeadAt int
}

var _ capability.ReleaseHead = (*headBackend)(nil)

func (b *headBackend) Releases(ctx context.Context, release string) ([]charts.Release, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	return b.MinimalBackend.Releases(ctx, release)
}

func (b *headBackend) IsLatestRelease(ctx context.Context, r charts.Release) (bool, error) {
	b.mu.Lock()
	b.heads++
	var f func()
	if b.beforeHead != nil && b.heads == b.beforeHeadAt {
		f, b.beforeHead = b.beforeHead, nil
	}
	b.mu.Unlock()
	if f != nil {
		f()
	}
	rs, err := b.MinimalBackend.Releases(ctx, r.Name)
	return err == nil && len(rs) > 0 && rs[0].Revision == r.Revision && rs[0].Version == r.Version, err
}

func (b *headBackend) RecordRelease(ctx context.Context, r charts.Release, keep int) error {
	b.mu.Lock()
	f := b.beforeRecord
	b.beforeRecord = nil
	b.mu.Unlock()
	if f != nil {
		f(r)
	}
	return b.MinimalBackend.RecordRelease(ctx, r, keep)
}

func (b *headBackend) counts() (heads, reads int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.heads, b.reads
}

func TestARecordWriteThatWasLostFailsThePassInsteadOfReportingSynced(t *testing.T) {
	b, _, c := shopOnMinimal(t, true)
	b.LoseRecords = true
	res := mustReconcile(t, c, "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "no record on the swarm") {
		t.Fatalf("pass after a lost record write: err %v", res.Err)
	}
	if res.Status.Sync == application.Synced || res.Status.LastError == "" {
		t.Fatalf("status after a lost record write: sync %s, last error %q", res.Status.Sync, res.Status.LastError)
	}

	// Once records stick again, the next pass records revision 1.
	b.LoseRecords = false
	res = mustReconcile(t, c, "shop")
	if res.Err != nil || res.Revision != 1 || res.Status.Sync != application.Synced {
		t.Fatalf("pass once records are kept: %+v", res)
	}
}

func TestARecordDeletedByHandIsNoticedOnTheNextPass(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*chartstest.MinimalBackend) charts.Backend
	}{
		{"with ReleaseHead", func(m *chartstest.MinimalBackend) charts.Backend { return &headBackend{MinimalBackend: m} }},
		{"without ReleaseHead", func(m *chartstest.MinimalBackend) charts.Backend { return m }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := chartstest.NewMinimal()
			f := newFakeFetcher()
			f.commit(t, repoFiles(composeV1))
			c := newTestController(t, tc.wrap(m), f, testApp("shop", true))
			mustReconcile(t, c, "shop")
			f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
			if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
				t.Fatalf("second deploy: %+v", res)
			}

			if !m.DeleteRelease("shop", 2) {
				t.Fatal("no record 2 to delete")
			}
			// The newest record is now revision 1, whose manifest is not
			// git's: the pass plans an upgrade against it and records
			// revision 2 again, rather than trusting its memory of 2.
			res := mustReconcile(t, c, "shop")
			if res.Err != nil || res.Action != charts.Upgrade || res.Revision != 2 {
				t.Fatalf("pass after record 2 was deleted: action %s revision %d err %v", res.Action, res.Revision, res.Err)
			}
			if res.Deployed == nil || res.Deployed.Writes != 0 {
				t.Fatalf("redeploy of what runs wrote: %+v", res.Deployed)
			}
			rs, _ := m.Releases(context.Background(), "shop")
			if got := revs(rs); !slices.Equal(got, []int{2, 1}) {
				t.Fatalf("records %v, want [2 1]", got)
			}
		})
	}
}

func TestASteadyPassChecksTheNewestRecordWithoutReadingTheHistory(t *testing.T) {
	m := chartstest.NewMinimal()
	b := &headBackend{MinimalBackend: m}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	mustReconcile(t, c, "shop")
	heads, reads := b.counts()
	for range 3 {
		if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged {
			t.Fatalf("steady pass: %+v", res)
		}
	}
	h, r := b.counts()
	if h-heads != 3 || r != reads {
		t.Fatalf("3 steady passes: %d head checks and %d history reads, want 3 and 0", h-heads, r-reads)
	}
}

func TestARevisionNumberTakenByAnotherWriterIsRecordedUnderTheNextNotOverwritten(t *testing.T) {
	m := chartstest.NewMinimal()
	b := &headBackend{MinimalBackend: m}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	mustReconcile(t, c, "shop")

	f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
	theirs := strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: theirs", 1)
	b.beforeRecord = func(r charts.Release) {
		// A second controller of the same id, during a start-first
		// update, records revision 2 first with another manifest.
		if err := m.RecordRelease(context.Background(), charts.Release{Name: r.Name, Revision: r.Revision, Owner: r.Owner, Manifest: theirs}, 0); err != nil {
			t.Error(err)
		}
	}
	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Revision != 3 || res.Status.Sync != application.Synced {
		t.Fatalf("pass that lost revision 2: revision %d sync %s err %v", res.Revision, res.Status.Sync, res.Err)
	}
	rs, _ := m.Releases(context.Background(), "shop")
	if got := revs(rs); !slices.Equal(got, []int{3, 2, 1}) {
		t.Fatalf("records %v, want [3 2 1]", got)
	}
	if rs[1].Manifest != theirs {
		t.Fatal("the other writer's revision 2 was overwritten")
	}
	if rs[0].Manifest == theirs {
		t.Fatal("revision 3 records the other writer's manifest")
	}
}

func TestARevisionRecordedMeanwhileWithTheSameManifestIsKept(t *testing.T) {
	m := chartstest.NewMinimal()
	b := &headBackend{MinimalBackend: m}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	b.beforeRecord = func(r charts.Release) {
		if err := m.RecordRelease(context.Background(), r, 0); err != nil {
			t.Error(err)
		}
	}
	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Revision != 1 || res.Status.Sync != application.Synced {
		t.Fatalf("pass whose revision was recorded meanwhile: %+v", res)
	}
	rs, _ := m.Releases(context.Background(), "shop")
	if got := revs(rs); !slices.Equal(got, []int{1}) {
		t.Fatalf("records %v, want [1]", got)
	}
}

func revs(rs []charts.Release) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.Revision
	}
	return out
}

func TestARecordWrittenBetweenPlanAndApplyIsPlannedAgainstBeforeAnyWrite(t *testing.T) {
	m := chartstest.NewMinimal()
	b := &headBackend{MinimalBackend: m}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	mustReconcile(t, c, "shop")

	f.commit(t, repoFiles(strings.Replace(composeV1, "MESSAGE: one", "MESSAGE: two", 1)))
	// Plan checks the cached record (head check 1 of this pass); then,
	// before apply checks again, a second controller deploys and records
	// this very change as revision 2.
	other := newTestController(t, m, f, testApp("shop", true))
	heads, _ := b.counts()
	b.beforeHead, b.beforeHeadAt = func() {
		if res := mustReconcile(t, other, "shop"); res.Err != nil || res.Revision != 2 {
			t.Errorf("other controller: %+v", res)
		}
	}, heads+2
	writes := m.Writes()
	res := mustReconcile(t, c, "shop")
	if res.Err != nil || res.Action != charts.Unchanged || res.Deployed != nil || res.Revision != 0 {
		t.Fatalf("pass after the other controller's deploy: action %s deployed %+v revision %d err %v", res.Action, res.Deployed, res.Revision, res.Err)
	}
	if m.Writes() != writes+1 {
		t.Fatalf("%d writes, want only the other controller's one", m.Writes()-writes)
	}
	if res.Status.Sync != application.Synced || res.Status.LastAppliedRevision != 2 {
		t.Fatalf("status: sync %s, last applied %d", res.Status.Sync, res.Status.LastAppliedRevision)
	}
	rs, _ := m.Releases(context.Background(), "shop")
	if got := revs(rs); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("records %v, want [2 1]", got)
	}
}
