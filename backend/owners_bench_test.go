package backend

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// BenchmarkReleaseOwners reads the owners of every release on the shared
// swarm, whatever records other tests left there (the count is in the
// output: the cost grows with it), against the same answer decoded whole by
// the client, as ReleaseOwners did before it read labels only. Wall time is
// mostly the daemon's; cpu-ms/op is this process's user and system time.
func BenchmarkReleaseOwners(b *testing.B) {
	ctx := context.Background()
	be, err := New(ctx, Options{Host: swarmtest.Client(b).DaemonHost(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	owners, err := be.ReleaseOwners(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, bm := range []struct {
		name string
		fn   func(context.Context) (map[string]string, error)
	}{
		{"labels", be.ReleaseOwners},
		{"whole", be.releaseOwnersWhole},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for range b.N {
				if _, err := bm.fn(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(len(owners)), "releases")
		})
	}
}

// releaseOwnersWhole is ReleaseOwners as it was: the client decodes every
// record, data included.
func (b *Backend) releaseOwnersWhole(ctx context.Context) (map[string]string, error) {
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{
		Filters: make(client.Filters).Add("label", LabelRecord+"="+recordKind),
	})
	if err != nil {
		return nil, err
	}
	sortRecords(list.Items)
	out := map[string]string{}
	for _, c := range list.Items {
		rel := c.Spec.Labels[LabelRelease]
		if _, seen := out[rel]; !seen && rel != "" {
			out[rel] = c.Spec.Labels[LabelOwner]
		}
	}
	return out, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLiveNetworkNames maps every network of the shared swarm, however
// many other tests left, against the same listing decoded whole by the
// client, as LiveNetworkNames did before it read ids and names only.
func BenchmarkLiveNetworkNames(b *testing.B) {
	ctx := context.Background()
	be, err := New(ctx, Options{Host: swarmtest.Client(b).DaemonHost(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	names, err := be.LiveNetworkNames(ctx)
	if err != nil {
		b.Fatal(err)
	}
	whole := func(ctx context.Context) (map[string]string, error) {
		list, err := be.api.NetworkList(ctx, client.NetworkListOptions{})
		out := map[string]string{}
		for _, n := range list.Items {
			out[n.ID] = n.Name
		}
		return out, err
	}
	for _, bm := range []struct {
		name string
		fn   func(context.Context) (map[string]string, error)
	}{
		{"names", be.LiveNetworkNames},
		{"whole", whole},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for range b.N {
				if _, err := bm.fn(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(len(names)), "networks")
		})
	}
}

// BenchmarkReadLiveStacksOfTwo reads two stacks that do not exist from the
// shared swarm's listing of every stack's services (what a batch of two or
// more stacks sends), against the same listing decoded whole by the client,
// as ReadLiveStacks did before it dropped other stacks' services while
// decoding.
func BenchmarkReadLiveStacksOfTwo(b *testing.B) {
	ctx := context.Background()
	be, err := New(ctx, Options{Host: swarmtest.Client(b).DaemonHost(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	stacks := []string{swarmtest.Name(b, "none1"), swarmtest.Name(b, "none2")}
	whole := func(ctx context.Context) error {
		_, err := be.api.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", LabelNamespace), Status: true})
		return err
	}
	lean := func(ctx context.Context) error {
		_, _, err := be.ReadLiveStacks(ctx, stacks)
		return err
	}
	for _, bm := range []struct {
		name string
		fn   func(context.Context) error
	}{{"dropping", lean}, {"whole", whole}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for range b.N {
				if err := bm.fn(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
