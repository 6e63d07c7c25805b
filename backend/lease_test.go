package backend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/lease"
)

func newLeaseStore(t *testing.T, key string) *LeaseStore {
	t.Helper()
	s, err := NewLeaseStore(Options{Host: swarmtest.Client(t).DaemonHost()}, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = swarmtest.Client(t).ConfigRemove(context.Background(), s.Name(), client.ConfigRemoveOptions{})
	})
	return s
}

func TestLeaseStore_updatesTheConfigsLabelsByCompareAndSwapOnItsVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := swarmtest.Name(t, "lease")
	a, b := newLeaseStore(t, key), newLeaseStore(t, key)

	if _, _, err := a.Get(ctx); !errors.Is(err, lease.ErrNoRecord) {
		t.Fatalf("Get before any record: %v, want ErrNoRecord", err)
	}
	first := lease.Record{Holder: "a", Epoch: 1, Renewed: time.Now().UTC(), Duration: 3 * time.Second}
	v1, err := a.Create(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, lease.Record{Holder: "b", Epoch: 1}); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("second Create: %v, want ErrConflict", err)
	}
	got, v, err := b.Get(ctx)
	if err != nil || v != v1 || got.Holder != "a" || got.Epoch != 1 || got.Duration != 3*time.Second || !got.Renewed.Equal(first.Renewed) {
		t.Fatalf("Get = %+v at %d, %v; want a's record at %d", got, v, err, v1)
	}

	v2, err := a.Update(ctx, v1, lease.Record{Holder: "a", Epoch: 1, Renewed: time.Now().UTC(), Duration: 3 * time.Second})
	if err != nil || v2 <= v1 {
		t.Fatalf("renewal: version %d, %v", v2, err)
	}
	// b still holds v1: its takeover must lose.
	if _, err := b.Update(ctx, v1, lease.Record{Holder: "b", Epoch: 2, Renewed: time.Now().UTC(), Duration: time.Second}); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("takeover at a stale version: %v, want ErrConflict", err)
	}
	if got, _, _ := b.Get(ctx); got.Holder != "a" {
		t.Fatalf("the stale takeover changed the record: %+v", got)
	}

	// The lease config is not a stack's and not a record: removal refuses it.
	if err := newBackend(t).RemoveConfig(ctx, a.Name()); err == nil {
		t.Fatal("RemoveConfig removed the lease")
	}
}

// fakeGate is a WriteGate a test opens, closes and moves between epochs.
type fakeGate struct {
	mu    sync.Mutex
	epoch uint64
	open  bool
}

func (g *fakeGate) set(open bool, epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open, g.epoch = open, epoch
}

func (g *fakeGate) Permit() (uint64, time.Time, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		return 0, time.Time{}, &lease.NotLeaderError{ID: "test", Holder: "other", Epoch: g.epoch}
	}
	return g.epoch, time.Now().Add(time.Minute), nil
}

func gatedBackend(t *testing.T, g WriteGate) *Backend {
	t.Helper()
	b, err := New(context.Background(), Options{Host: swarmtest.Client(t).DaemonHost(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGate_refusesEveryWriteWithoutTheLeaseAndStampsTheEpochOnEverythingWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := &fakeGate{epoch: 6}
	b := gatedBackend(t, g)
	stack := swarmtest.Name(t, "gate")
	swarmtest.Cleanup(t, stack)
	labels := map[string]string{LabelOwner: "ctl/" + stack}
	r := render(t, stack, fixture{})
	req := charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets, Labels: labels}

	before := b.Stats()
	_, err := b.DeployStack(ctx, req)
	var nl *lease.NotLeaderError
	if !errors.Is(err, ErrWriteRefused) || !errors.As(err, &nl) || nl.Holder != "other" {
		t.Fatalf("deploy without the lease: %v, want a refusal naming the leader", err)
	}
	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/x", Manifest: "m"}, 0); !errors.Is(err, ErrWriteRefused) {
		t.Fatalf("record without the lease: %v", err)
	}
	// Below every method: a raw write through the backend's own client.
	if _, err := b.Client().NetworkCreate(ctx, stack+"_raw", client.NetworkCreateOptions{Driver: "overlay"}); !errors.Is(err, ErrWriteRefused) {
		t.Fatalf("raw network create without the lease: %v", err)
	}
	if d := b.Stats().Sub(before); d.Writes != 0 || d.Gated != 1 {
		t.Fatalf("without the lease: %d writes reached the daemon, %d gated; want 0 and 1", d.Writes, d.Gated)
	}

	g.set(true, 7)
	res, err := b.DeployStack(ctx, req)
	if err != nil || len(res.Created) != 3 {
		t.Fatalf("deploy with the lease: %+v, %v", res, err)
	}
	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/x", Manifest: "m"}, 0); err != nil {
		t.Fatal(err)
	}
	api := swarmtest.Client(t)
	want := "7"
	for name, s := range services(t, b, stack) {
		if s.Spec.Labels[LabelEpoch] != want {
			t.Errorf("service %s epoch label %q, want %q", name, s.Spec.Labels[LabelEpoch], want)
		}
	}
	nets, _ := api.NetworkList(ctx, client.NetworkListOptions{Filters: namespace(stack)})
	cfgs, _ := api.ConfigList(ctx, client.ConfigListOptions{Filters: namespace(stack)})
	secs, _ := api.SecretList(ctx, client.SecretListOptions{Filters: namespace(stack)})
	if len(nets.Items) == 0 || len(cfgs.Items) == 0 || len(secs.Items) == 0 {
		t.Fatalf("deployed %d networks, %d configs, %d secrets", len(nets.Items), len(cfgs.Items), len(secs.Items))
	}
	for _, n := range nets.Items {
		if n.Labels[LabelEpoch] != want {
			t.Errorf("network %s epoch label %q", n.Name, n.Labels[LabelEpoch])
		}
	}
	for _, c := range cfgs.Items {
		if c.Spec.Labels[LabelEpoch] != want {
			t.Errorf("config %s epoch label %q", c.Spec.Name, c.Spec.Labels[LabelEpoch])
		}
	}
	for _, s := range secs.Items {
		if s.Spec.Labels[LabelEpoch] != want {
			t.Errorf("secret %s epoch label %q", s.Spec.Name, s.Spec.Labels[LabelEpoch])
		}
	}
	recs, err := b.records(ctx, stack)
	if err != nil || len(recs) != 1 || recs[0].Spec.Labels[LabelEpoch] != want {
		t.Fatalf("record epoch: %v, %v", recs, err)
	}

	// A steady redeploy in a later epoch writes nothing: the epoch is
	// bookkeeping, not part of any spec.
	g.set(true, 8)
	if res, err := b.DeployStack(ctx, req); err != nil || res.Writes != 0 {
		t.Fatalf("unchanged redeploy in a new epoch: %+v, %v", res, err)
	}

	// Writes begun in one epoch are refused once the lease is in another,
	// even though this controller holds that one too.
	ectx, epoch, err := b.permitWrites(ctx)
	if err != nil || epoch != 8 {
		t.Fatalf("permit: %d, %v", epoch, err)
	}
	g.set(true, 9)
	if _, err := b.Client().NetworkCreate(ectx, stack+"_late", client.NetworkCreateOptions{Driver: "overlay"}); !errors.Is(err, ErrWriteRefused) {
		t.Fatalf("write begun in epoch 8 sent in epoch 9: %v", err)
	}
}

func TestRecords_aNewerRecordFormatIsRefusedNotPlannedFromOrRecordedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "format")
	swarmtest.Cleanup(t, stack)
	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/x", Manifest: "m"}, 0); err != nil {
		t.Fatal(err)
	}
	recs, err := b.records(ctx, stack)
	if err != nil || len(recs) != 1 || recs[0].Spec.Labels[labels.RecordFormat] != strconv.Itoa(recordFormat) {
		t.Fatalf("a new record does not carry format %d: %v, %v", recordFormat, recs, err)
	}

	// A newer controller wrote revision 2 in a format this one does not know.
	data, err := encodeRecord(charts.Release{Name: stack, Revision: 2, Owner: "ctl/x", Manifest: "m2"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = swarmtest.Client(t).ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{
		Name: recordName(stack, 2),
		Labels: map[string]string{LabelRecord: recordKind, LabelRelease: stack, LabelRevision: "2",
			LabelOwner: "ctl/x", labels.RecordFormat: strconv.Itoa(recordFormat + 1)},
	}, Data: data}})
	if err != nil {
		t.Fatal(err)
	}

	var newer *NewerRecordError
	if _, err := b.LatestRelease(ctx, stack); !errors.As(err, &newer) || newer.Format != recordFormat+1 {
		t.Fatalf("LatestRelease over a newer format: %v", err)
	}
	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 3, Owner: "ctl/x", Manifest: "m3"}, 1); !errors.As(err, &newer) {
		t.Fatalf("RecordRelease over a newer format: %v", err)
	}
	if recs, _ := b.records(ctx, stack); len(recs) != 2 {
		t.Fatalf("after the refusal %d records, want the 2 there were (nothing written, nothing pruned)", len(recs))
	}
}
