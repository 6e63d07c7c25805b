package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/source"
)

// idAttachingFake is liveDriftFake on a swarm that stores attachments by
// network id ("id-<name>"), as Swarm does. Its deploys name the networks
// they resolved in DeployResult.Networks, leaving out those in unnamed;
// LiveNetworkNames knows them all and counts its calls.
type idAttachingFake struct {
	*liveDriftFake
	nmu     sync.Mutex
	unnamed map[string]bool
	listed  int
}

func (f *idAttachingFake) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	res, err := f.liveDriftFake.DeployStack(ctx, req)
	if err != nil {
		return res, err
	}
	f.nmu.Lock()
	defer f.nmu.Unlock()
	res.Networks = map[string]string{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.live {
		nets := slices.Clone(s.Spec.TaskTemplate.Networks)
		for i := range nets {
			if !strings.HasPrefix(nets[i].Target, "id-") {
				nets[i].Target = "id-" + nets[i].Target
			}
			if n := strings.TrimPrefix(nets[i].Target, "id-"); !f.unnamed[n] {
				res.Networks[nets[i].Target] = n
			}
		}
		s.Spec.TaskTemplate.Networks = nets
		f.live[name] = s
	}
	return res, nil
}

func (f *idAttachingFake) LiveNetworkNames(context.Context) (map[string]string, error) {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.listed++
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for _, s := range f.live {
		for _, n := range s.Spec.TaskTemplate.Networks {
			out[n.Target] = strings.TrimPrefix(n.Target, "id-")
		}
	}
	return out, nil
}

func (f *idAttachingFake) takeListed() int {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	n := f.listed
	f.listed = 0
	return n
}

// The read-back after a deploy (does the daemon keep every field written?)
// compares the services' network attachments by name. It takes the names
// from the deploy itself, which resolved or created every network of the
// manifest, rather than listing every network of the swarm; a deploy that
// cannot name an attachment makes it list them, and either way the
// attachments compare equal and nothing is reported as not kept.
func TestTheReadBackAfterADeployNamesNetworksFromTheDeploy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unnamed    map[string]bool
		wantListed int
	}{
		{"every attachment named by the deploy", nil, 0},
		{"an attachment the deploy did not name", map[string]bool{"app_back": true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &idAttachingFake{liveDriftFake: newLiveDriftFake(), unnamed: tc.unnamed}
			f := newFakeFetcher()
			res := installApp(t, b, f, f)
			if n := b.takeListed(); n != tc.wantListed {
				t.Errorf("every network of the swarm listed %d times by the deploy's pass, want %d", n, tc.wantListed)
			}
			if w := res.Status.Warnings; slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "not kept") }) {
				t.Errorf("attachments read back as not kept: %q", w)
			}
			if len(b.live) == 0 {
				t.Fatal("nothing was deployed")
			}
		})
	}
}

// gatedReadFake is liveDriftFake whose batch read of the swarm answers only
// once gate is closed, or fails after a while, saying so in waitedOut.
type gatedReadFake struct {
	*liveDriftFake
	gate      chan struct{}
	waitedOut atomic.Bool
}

func (f *gatedReadFake) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	select {
	case <-f.gate:
	case <-time.After(5 * time.Second):
		f.waitedOut.Store(true)
		return nil, errors.New("the batch's read was kept waiting for a fetch that never started")
	}
	out := map[string][]charts.ServiceState{}
	for _, s := range stacks {
		out[s] = f.StackServices(ctx, s)
	}
	return out, nil
}

// gatingFetcher opens gate when its first fetch starts.
type gatingFetcher struct {
	*fakeFetcher
	once sync.Once
	gate chan struct{}
}

func (f *gatingFetcher) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	f.once.Do(func() { close(f.gate) })
	return f.fakeFetcher.Fetch(ctx, req)
}

// A pass does not wait for its batch's read of the swarm before it fetches
// and renders, which read nothing of the swarm: the git remote check and
// the render overlap the read. Here the read answers only once a fetch has
// started; a pass that waited for the read before fetching would see it
// time out.
func TestAPassFetchesWhileItsBatchReadsTheSwarm(t *testing.T) {
	gate := make(chan struct{})
	b := &gatedReadFake{liveDriftFake: newLiveDriftFake(), gate: gate}
	f := &gatingFetcher{fakeFetcher: newFakeFetcher(), gate: gate}
	installApp(t, b, f.fakeFetcher, f)
	if b.waitedOut.Load() {
		t.Error("the batch's read timed out waiting for the fetch: the pass waited for the swarm before fetching")
	}
}

// sweepGateFake is liveDriftFake whose sweep listing (LiveResources) waits
// until the stack's health has been read after a deploy, or fails after a
// while, saying so in waitedOut.
type sweepGateFake struct {
	*liveDriftFake
	deployed   atomic.Bool
	healthRead chan struct{}
	once       sync.Once
	waitedOut  atomic.Bool
}

func (f *sweepGateFake) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	res, err := f.liveDriftFake.DeployStack(ctx, req)
	f.deployed.Store(true)
	return res, err
}

func (f *sweepGateFake) ReadStackServices(ctx context.Context, stack string) ([]charts.ServiceState, error) {
	if f.deployed.Load() {
		f.once.Do(func() { close(f.healthRead) })
	}
	return f.StackServices(ctx, stack), nil
}

func (f *sweepGateFake) LiveResources(ctx context.Context, stack string) (capability.Resources, error) {
	select {
	case <-f.healthRead:
	case <-time.After(5 * time.Second):
		f.waitedOut.Store(true)
	}
	live, err := f.LiveServices(ctx, stack)
	return capability.Resources{Services: live, Networks: map[string]string{}, Configs: map[string]string{}, Secrets: map[string]string{}}, err
}

// After a deploy the health is read afresh for the confirmation. With no
// hook job to clean up, that read is made while the sweep reads (the sweep
// removes only services the manifest does not declare, which health does
// not judge), not after it. Here the sweep's listing answers only once the
// health read has begun; a pass that read health after the sweep would
// keep it waiting until it gave up.
func TestAfterADeployHealthIsReadBesideTheSweep(t *testing.T) {
	b := &sweepGateFake{liveDriftFake: newLiveDriftFake(), healthRead: make(chan struct{})}
	f := newFakeFetcher()
	res := installApp(t, b, f, f)
	if b.waitedOut.Load() {
		t.Error("the sweep's listing waited for a health read that came only after the sweep")
	}
	if res.Status.Sync != application.Synced {
		t.Errorf("sync %s, want Synced", res.Status.Sync)
	}
}

// slowReadFake is liveDriftFake whose batch read takes a while, and notes
// whether a fetch had started before it answered.
type slowReadFake struct {
	*liveDriftFake
	fetches         *atomic.Int32
	fetchDuringRead atomic.Bool
}

func (f *slowReadFake) ReadStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, error) {
	time.Sleep(100 * time.Millisecond)
	if f.fetches.Load() > 0 {
		f.fetchDuringRead.Store(true)
	}
	out := map[string][]charts.ServiceState{}
	for _, s := range stacks {
		out[s] = f.StackServices(ctx, s)
	}
	return out, nil
}

// countingFetcher counts the fetches begun.
type countingFetcher struct {
	*fakeFetcher
	n *atomic.Int32
}

func (f *countingFetcher) Fetch(ctx context.Context, req source.Request) (*source.Revision, error) {
	f.n.Add(1)
	return f.fakeFetcher.Fetch(ctx, req)
}

// A batch of more applications than overlapBatch starts its passes only
// once its read of the swarm is in, so the read's decoded services and the
// passes' renders are not in memory at once; a small batch overlaps them.
func TestOnlyASmallBatchFetchesWhileItReadsTheSwarm(t *testing.T) {
	for _, n := range []int{1, overlapBatch + 1} {
		var fetches atomic.Int32
		b := &slowReadFake{liveDriftFake: newLiveDriftFake(), fetches: &fetches}
		f := &countingFetcher{fakeFetcher: newFakeFetcher(), n: &fetches}
		f.commit(t, repoFiles(composeV1))
		apps := numberedApps(n)
		c := newTestController(t, b, f, apps...)
		for _, r := range c.RunOnce(context.Background()) {
			if r.Err != nil {
				t.Fatalf("%d applications: %s: %v", n, r.App, r.Err)
			}
		}
		if got, want := b.fetchDuringRead.Load(), n <= overlapBatch; got != want {
			t.Errorf("%d applications: a fetch began during the batch's read: %v, want %v", n, got, want)
		}
	}
}

// installApp commits composeV1 to repo, runs the first pass of
// application "app" on b with fetches through fetcher (repo itself or a
// wrapper of it), and wants it to install the stack.
func installApp(t *testing.T, b charts.Backend, repo *fakeFetcher, fetcher Fetcher) Result {
	t.Helper()
	repo.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, fetcher, testApp("app", true))
	res := c.RunOnce(context.Background())
	if len(res) != 1 || res[0].Err != nil || res[0].Action != charts.Install {
		t.Fatalf("first pass: %+v", res)
	}
	return res[0]
}
