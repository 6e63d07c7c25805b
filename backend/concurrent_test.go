package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestBounded_neverRunsMoreThanTheBoundAndStartsNothingAfterAFailure(t *testing.T) {
	var running, most, calls atomic.Int32
	err := bounded(50, func(i int) error {
		calls.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		switch {
		case i == 20:
			return fmt.Errorf("call %d failed", i)
		case i > 20:
			// Holds its slot well past the failure, so the next start
			// can only come after the failure was seen.
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	if err == nil || err.Error() != "call 20 failed" {
		t.Fatalf("error %v, want call 20's", err)
	}
	if m := most.Load(); m > writeConcurrency {
		t.Errorf("%d calls ran at once, want at most %d", m, writeConcurrency)
	}
	// Calls 0-20, plus at most the writeConcurrency-1 started beside call
	// 20 before it failed.
	if c := calls.Load(); c < 21 || c > 20+writeConcurrency {
		t.Errorf("%d calls made, want 21 to %d: none may start once the failure is known", c, 20+writeConcurrency)
	}
}

func TestBounded_joinsEveryErrorInCallOrder(t *testing.T) {
	release := make(chan struct{})
	err := bounded(3, func(i int) error {
		if i == 0 {
			<-release // fails last, but is named first
			return errors.New("first")
		}
		if i == 2 {
			defer close(release)
		}
		return fmt.Errorf("call %d", i)
	})
	if err == nil || err.Error() != "first\ncall 1\ncall 2" {
		t.Fatalf("error %q, want every error in call order", err)
	}
}

// manyServices renders a stack of n replica-0 services on one overlay
// network.
func manyServices(t *testing.T, stack string, n int) *compose.Rendered {
	t.Helper()
	var b strings.Builder
	b.WriteString("version: \"3.8\"\nservices:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  svc%02d:\n    image: %s\n    networks: [back]\n    deploy: {replicas: 0}\n", i, swarmtest.Image)
	}
	b.WriteString("networks:\n  back: {driver: overlay}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

func TestDeployStack_writesIndependentServicesConcurrentlyWithTheSameRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "conc")
	swarmtest.Cleanup(t, stack)

	// The first writeConcurrency creates wait for each other: a deploy
	// that wrote one service at a time would never get them all here.
	var arrived atomic.Int32
	all := make(chan struct{})
	b.hooks = &testHooks{beforeServiceCreate: func(context.Context, string) {
		n := arrived.Add(1)
		if n == writeConcurrency {
			close(all)
		}
		if n <= writeConcurrency {
			select {
			case <-all:
			case <-time.After(20 * time.Second):
			}
		}
	}}
	r := manyServices(t, stack, 20)
	before := b.Stats()
	res, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	select {
	case <-all:
	default:
		t.Errorf("only %d service creates were in flight at once, want %d", arrived.Load(), writeConcurrency)
	}
	d := b.Stats().Sub(before)
	if d.Requests["service.create"] != 20 || d.Requests["network.create"] != 1 || d.Writes != 21 {
		t.Errorf("requests %v (%d writes), want 20 service creates and 1 network create", d.Requests, d.Writes)
	}
	want := make([]string, 20)
	for i := range want {
		want[i] = fmt.Sprintf("svc%02d", i+1)
	}
	if !slices.Equal(res.Created, want) || res.Writes != 21 {
		t.Errorf("result created %v with %d writes, want svc01..svc20 in order and 21", res.Created, res.Writes)
	}
	if n := len(services(t, b, stack)); n != 20 {
		t.Errorf("%d services on the swarm, want 20", n)
	}
}

func TestDeployStack_aServiceWriteFailingPartWayReportsExactlyWhatWasWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "part")
	swarmtest.Cleanup(t, stack)
	api := swarmtest.Client(t)

	// Right before svc05 is created, another writer takes its name, so the
	// daemon refuses that one create after the network and some services
	// were written.
	var once sync.Once
	b.hooks = &testHooks{beforeServiceCreate: func(ctx context.Context, name string) {
		if name != stack+"_svc05" {
			return
		}
		once.Do(func() {
			spec := swarm.ServiceSpec{
				Annotations:  swarm.Annotations{Name: name, Labels: map[string]string{LabelNamespace: stack}},
				TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: swarmtest.Image}},
				Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: new(uint64)}},
			}
			if _, err := api.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec}); err != nil {
				t.Errorf("take svc05's name: %v", err)
			}
		})
	}}
	r := manyServices(t, stack, 20)
	labels := map[string]string{LabelOwner: "ctl/part"}
	res, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Labels: labels})
	if err == nil {
		t.Fatal("deploy succeeded although svc05's name was taken")
	}
	if !strings.Contains(err.Error(), "create service svc05") || !strings.Contains(err.Error(), "part-way") {
		t.Errorf("error %q does not name svc05 and say the deploy stopped part-way", err)
	}
	if slices.Contains(res.Created, "svc05") {
		t.Errorf("result claims svc05 was created: %v", res.Created)
	}
	if res.Writes != len(res.Created)+1 {
		t.Errorf("result counts %d writes for %d services and the network", res.Writes, len(res.Created))
	}
	var ours []string
	for name, s := range services(t, b, stack) {
		if s.Spec.Labels[LabelOwner] == "ctl/part" {
			ours = append(ours, unscoped(stack, name))
		}
	}
	slices.Sort(ours)
	if !slices.Equal(ours, res.Created) {
		t.Errorf("services the deploy wrote on the swarm %v, result says %v", ours, res.Created)
	}
}
