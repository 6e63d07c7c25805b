package reconcile

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// batchFake is liveDriftFake plus both batched reads, counting how each
// kind of read is made. batchErr, when set, is what LiveServicesOf answers.
type batchFake struct {
	*liveDriftFake

	cmu                    sync.Mutex
	batches, ownReads      int
	headBatches, headAsked int
	releaseReads           int
	batchErr               error
}

var (
	_ capability.LiveDrift         = (*batchFake)(nil)
	_ capability.LiveServicesBatch = (*batchFake)(nil)
	_ capability.ReleaseHeads      = (*batchFake)(nil)
)

func (f *batchFake) LiveServices(ctx context.Context, stack string) (map[string]swarm.Service, error) {
	f.cmu.Lock()
	f.ownReads++
	f.cmu.Unlock()
	return f.liveDriftFake.LiveServices(ctx, stack)
}

func (f *batchFake) LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error) {
	f.cmu.Lock()
	f.batches++
	err := f.batchErr
	f.cmu.Unlock()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]swarm.Service{}
	for _, s := range stacks {
		m, err := f.liveDriftFake.LiveServices(ctx, s)
		if err != nil {
			return nil, err
		}
		out[s] = m
	}
	return out, nil
}

func (f *batchFake) Releases(ctx context.Context, release string) ([]charts.Release, error) {
	f.cmu.Lock()
	f.releaseReads++
	f.cmu.Unlock()
	return f.liveDriftFake.Releases(ctx, release)
}

func (f *batchFake) AreLatestReleases(ctx context.Context, kept []charts.Release) (map[string]bool, error) {
	f.cmu.Lock()
	f.headBatches++
	f.headAsked += len(kept)
	f.cmu.Unlock()
	out := map[string]bool{}
	for _, r := range kept {
		rs, err := f.liveDriftFake.MinimalBackend.Releases(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		out[r.Name] = len(rs) > 0 && rs[0].Revision == r.Revision && rs[0].Version == r.Version
	}
	return out, nil
}

// reset zeroes the counts and returns them as they were.
func (f *batchFake) reset() (batches, ownReads, headBatches, headAsked, releaseReads int) {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	batches, ownReads, headBatches, headAsked, releaseReads = f.batches, f.ownReads, f.headBatches, f.headAsked, f.releaseReads
	f.batches, f.ownReads, f.headBatches, f.headAsked, f.releaseReads = 0, 0, 0, 0, 0
	return
}

func batchOf(t *testing.T, n int) (*batchFake, *Controller) {
	t.Helper()
	b := &batchFake{liveDriftFake: newLiveDriftFake()}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	apps := numberedApps(n)
	c := newTestController(t, b, f, apps...)
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Install {
			t.Fatalf("%s: %v %s", r.App, r.Err, r.Action)
		}
	}
	b.reset()
	return b, c
}

func TestASteadyBatchReadsLiveServicesAndRecordHeadsOnceForAllItsApplications(t *testing.T) {
	b, c := batchOf(t, 20)
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil || r.Action != charts.Unchanged || len(r.Status.Drift) != 0 {
			t.Fatalf("%s: %v %s drift %v", r.App, r.Err, r.Action, r.Status.Drift)
		}
	}
	batches, own, heads, asked, reads := b.reset()
	if batches != 1 || own != 0 {
		t.Errorf("live services: %d batch reads and %d of one stack, want one batch read", batches, own)
	}
	if heads != 1 || asked != 20 || reads != 0 {
		t.Errorf("records: %d head checks of %d records, %d history reads, want one check of 20 and none", heads, asked, reads)
	}
}

// A batch read that fails costs no pass its own answer: each reads its own
// stack, and drift is reported as it would be without the batch.
func TestAFailedBatchReadOfLiveServicesFallsBackToEachStacksOwnRead(t *testing.T) {
	b, c := batchOf(t, 3)
	b.edit("app01_web", setEnv("foreign"))
	b.cmu.Lock()
	b.batchErr = errors.New("daemon hiccup")
	b.cmu.Unlock()
	res := c.RunOnce(context.Background())
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.App, r.Err)
		}
		drifted := slices.ContainsFunc(r.Status.Drift, func(d application.Drift) bool { return d.Service == "web" })
		if drifted != (r.App == "app01") {
			t.Errorf("%s: drift %v", r.App, r.Status.Drift)
		}
	}
	if batches, own, _, _, _ := b.reset(); batches != 1 || own != 3 {
		t.Errorf("%d batch reads and %d of one stack, want the one failed batch read and then each stack's own", batches, own)
	}
}

// A record written by another writer since the controller read its own is
// noticed from the batch's check and planned against, as a check of each
// record on its own would.
func TestARecordWrittenBehindTheControllersBackIsNoticedByTheBatchCheck(t *testing.T) {
	b, c := batchOf(t, 3)
	rs, err := b.liveDriftFake.MinimalBackend.Releases(context.Background(), "app02")
	if err != nil || len(rs) != 1 {
		t.Fatalf("records of app02: %v %v", rs, err)
	}
	newer := rs[0]
	newer.Revision = 2
	if err := b.liveDriftFake.MinimalBackend.RecordRelease(context.Background(), newer, 10); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.App, r.Err)
		}
		want := 1
		if r.App == "app02" {
			want = 2
		}
		if r.Status.LastAppliedRevision != want {
			t.Errorf("%s: planned against revision %d, want %d", r.App, r.Status.LastAppliedRevision, want)
		}
	}
	if _, _, heads, _, reads := b.reset(); heads != 1 || reads != 1 {
		t.Errorf("%d batch checks and %d history reads, want one check and app02's history read", heads, reads)
	}
}

// Losing a batched read costs requests, not answers, and the status says so.
func TestABackendWithoutBatchedReadsSaysSoAndOneWithThemDoesNot(t *testing.T) {
	lacks := []string{
		"batched live drift reads unavailable: backend lacks LiveServicesBatch",
		"batched release record checks unavailable: backend lacks ReleaseHeads",
	}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	without := mustReconcile(t, newTestController(t, newLiveDriftFake(), f, testApp("shop", true)), "shop")
	_, c := batchOf(t, 1)
	with := mustReconcile(t, c, "app00")
	for _, want := range lacks {
		if !slices.Contains(without.Status.Unavailable, want) {
			t.Errorf("without batched reads, status does not say %q: %v", want, without.Status.Unavailable)
		}
		if slices.Contains(with.Status.Unavailable, want) {
			t.Errorf("with batched reads, status says %q", want)
		}
	}
}

// sharedFake is batchFake whose batch read of health also returns the specs.
type sharedFake struct {
	*batchFake
	shared int
}

var _ capability.LiveStacksReader = (*sharedFake)(nil)

func (f *sharedFake) ReadLiveStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, map[string]map[string]swarm.Service, error) {
	f.cmu.Lock()
	f.shared++
	f.cmu.Unlock()
	states := map[string][]charts.ServiceState{}
	live := map[string]map[string]swarm.Service{}
	for _, s := range stacks {
		states[s] = f.StackServices(ctx, s)
		m, err := f.liveDriftFake.LiveServices(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		live[s] = m
	}
	return states, live, nil
}

// With a backend whose health read carries the specs, a steady batch lists
// its services once, for health and live drift together, and still sees
// drift.
func TestABatchWhoseHealthReadCarriesSpecsAnswersLiveDriftFromIt(t *testing.T) {
	b := &sharedFake{batchFake: &batchFake{liveDriftFake: newLiveDriftFake()}}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("app00", true), testApp("app01", true))
	for _, r := range c.RunOnce(context.Background()) {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.App, r.Err)
		}
	}
	b.edit("app01_web", setEnv("foreign"))
	b.reset()
	b.cmu.Lock()
	b.shared = 0
	b.cmu.Unlock()
	for _, r := range c.RunOnce(context.Background()) {
		drifted := slices.ContainsFunc(r.Status.Drift, func(d application.Drift) bool { return d.Service == "web" })
		if r.Err != nil || drifted != (r.App == "app01") {
			t.Errorf("%s: %v, drift %v", r.App, r.Err, r.Status.Drift)
		}
	}
	batches, own, _, _, _ := b.reset()
	if b.shared != 1 || batches != 0 || own != 0 {
		t.Errorf("%d shared reads, %d batch reads of live services, %d of one stack; want one shared read and nothing else", b.shared, batches, own)
	}
}
