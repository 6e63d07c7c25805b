package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// A steady batch reads the swarm a constant number of times: the same
// requests, operation by operation, at 10 and 100 applications, none of
// them once per application, although applications mount a config and a
// secret whose ids a conversion would resolve. Request counts are
// exact, so this is asserted here; the time a batch takes is the
// benchmark's to report (BenchmarkSteadyStatePass1000Apps takes the same
// figure at 1,000 applications, whose swarm takes minutes to build).
//
// The 10 applications are the first of the 100, the ones with a config
// and a secret (the other 90 have one service each, to keep the swarm
// cheap to build), read by a controller of their own. A controller's first batch compares every application in full
// (it has compared nothing yet) and is only logged; the two after it are
// the steady state.
func TestSteadyBatch_sendsTheSameRequestsAt10And100Applications(t *testing.T) {
	ctx := context.Background()
	batch := map[int]backend.Stats{}
	began := time.Now()
	f := steadyFixture(t, steadyShape{apps: 100, full: 10, services: 2})
	t.Logf("100 applications deployed in %s", time.Since(began).Round(time.Millisecond))
	be, m := f.be, f.m
	for _, apps := range []int{10, 100} {
		ctl := f.ctl
		if apps < len(f.apps) {
			ctl = f.controller(t, apps)
		}
		first := steadyBatch(ctx, t, ctl, be)
		t.Logf("first batch of the controller over %d applications: %d requests: %s", apps, first.Total(), opsOf(first))
		for i := range 2 {
			before := requestsMetric(t, m)
			d := steadyBatch(ctx, t, ctl, be)
			t.Logf("steady batch %d over %d applications: %d requests: %s", i+1, apps, d.Total(), opsOf(d))
			if got := requestsMetric(t, m) - before; got != d.Total() {
				t.Errorf("%d applications: flotilla_docker_requests_total moved by %d in the batch, the backend counted %d", apps, got, d.Total())
			}
			for op, n := range d.Requests {
				if n >= apps {
					t.Errorf("%d applications: %s sent %d times in one batch, once per application or more", apps, op, n)
				}
			}
			if prev, ok := batch[apps]; ok && !maps.Equal(prev.Requests, d.Requests) {
				t.Errorf("%d applications: two steady batches differ: %s, then %s", apps, opsOf(prev), opsOf(d))
			}
			batch[apps] = d
		}
	}
	if !maps.Equal(batch[10].Requests, batch[100].Requests) {
		t.Errorf("a steady batch's requests grow with its applications: 10 send %s, 100 send %s", opsOf(batch[10]), opsOf(batch[100]))
	}
}

// requestsMetric sums flotilla_docker_requests_total of the local swarm.
func requestsMetric(t *testing.T, m *metrics.Metrics) int {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		if f.GetName() != "flotilla_docker_requests_total" {
			continue
		}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if l.GetName() == "swarm" && l.GetValue() == metrics.LocalSwarm {
					n += int(s.GetCounter().GetValue())
				}
			}
		}
	}
	return n
}

// cleanupPrefix registers removal of everything the stacks named
// prefix-... left on the swarm — services, networks, configs, secrets and
// release records — with one listing of each kind, where a cleanup per stack
// would list every kind once per stack. prefix comes from swarmtest.Name,
// so nothing another test made matches it.
func cleanupPrefix(tb testing.TB, prefix string) {
	tb.Helper()
	c := swarmtest.Client(tb)
	ours := func(labels map[string]string, key string) bool {
		return strings.HasPrefix(labels[key], prefix+"-")
	}
	const namespace, release = "com.docker.stack.namespace", "io.flotilla.release"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var errs []error
		services, err := c.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", namespace)})
		errs = append(errs, err)
		removed := map[string]bool{}
		for _, s := range services.Items {
			if ours(s.Spec.Labels, namespace) {
				errs = append(errs, secondErr(c.ServiceRemove(ctx, s.ID, client.ServiceRemoveOptions{})))
				removed[s.ID] = true
			}
		}
		for deadline := time.Now().Add(2 * time.Minute); len(removed) > 0; time.Sleep(200 * time.Millisecond) {
			tasks, err := c.TaskList(ctx, client.TaskListOptions{})
			left := 0
			for _, t := range tasks.Items {
				if removed[t.ServiceID] && t.Status.State != swarm.TaskStateShutdown && t.Status.State != swarm.TaskStateComplete {
					left++
				}
			}
			if err == nil && left == 0 {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("%d tasks of removed services still present", left))
				break
			}
		}
		networks, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", namespace)})
		errs = append(errs, err)
		for _, n := range networks.Items {
			if ours(n.Labels, namespace) {
				errs = append(errs, secondErr(c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})))
			}
		}
		secrets, err := c.SecretList(ctx, client.SecretListOptions{})
		errs = append(errs, err)
		for _, s := range secrets.Items {
			if ours(s.Spec.Labels, namespace) {
				errs = append(errs, secondErr(c.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{})))
			}
		}
		configs, err := c.ConfigList(ctx, client.ConfigListOptions{})
		errs = append(errs, err)
		for _, cfg := range configs.Items {
			if ours(cfg.Spec.Labels, namespace) || ours(cfg.Spec.Labels, release) {
				errs = append(errs, secondErr(c.ConfigRemove(ctx, cfg.ID, client.ConfigRemoveOptions{})))
			}
		}
		if err := errors.Join(errs...); err != nil {
			tb.Errorf("cleanup of stacks %s-*: %v", prefix, err)
		}
	})
}

// secondErr is the error of a call that also returns a result.
func secondErr[T any](_ T, err error) error { return err }
