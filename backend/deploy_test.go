package backend

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// taskIDs returns the ids of each service's running tasks.
func taskIDs(states []charts.ServiceState) map[string][]string {
	out := make(map[string][]string)
	for _, s := range states {
		for _, t := range s.Tasks {
			if t.DesiredState == "running" {
				out[s.Name] = append(out[s.Name], t.ID)
			}
		}
		slices.Sort(out[s.Name])
	}
	return out
}

func versions(live map[string]swarm.Service) map[string]uint64 {
	out := make(map[string]uint64)
	for name, s := range live {
		out[name] = s.Version.Index
	}
	return out
}

func TestDeployStack_writesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "deploy")
	swarmtest.Cleanup(t, stack)
	labels := map[string]string{"io.flotilla.owner": "ctl/app", "io.flotilla.revision": "1"}

	res := deploy(t, b, stack, fixture{Replicas: 1}, labels)
	if got := slices.Sorted(slices.Values(res.Created)); !slices.Equal(got, []string{"cache", "web", "worker"}) {
		t.Fatalf("created %v, want cache, web, worker", got)
	}
	// network + config + secret + 3 services
	if res.Writes != 6 {
		t.Errorf("first deploy wrote %d objects, want 6", res.Writes)
	}
	states := waitRunning(t, b, stack)
	tasks := taskIDs(states)

	// A read-back after the deploy compares attachments against the
	// networks the deploy names instead of listing every network of the
	// swarm, so they must name every network a written service attaches
	// to, by the id the swarm put in its spec, as the full listing does.
	t.Run("the result names each network the services attach to", func(t *testing.T) {
		all, err := b.LiveNetworkNames(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for name, s := range services(t, b, stack) {
			for _, n := range s.Spec.TaskTemplate.Networks {
				seen++
				if got, want := res.Networks[n.Target], all[n.Target]; got == "" || got != want {
					t.Errorf("%s attaches to %s: the deploy names it %q, the swarm %q", name, n.Target, got, want)
				}
			}
		}
		if seen == 0 {
			t.Fatal("no service attaches to a network: the fixture no longer tests this")
		}
		again := deploy(t, b, stack, fixture{Replicas: 1}, labels)
		if !maps.Equal(again.Networks, res.Networks) {
			t.Errorf("a redeploy finding the networks names %v, the deploy that created them %v", again.Networks, res.Networks)
		}
	})

	t.Run("labels go on the service, not the task template", func(t *testing.T) {
		for name, s := range services(t, b, stack) {
			for k, v := range labels {
				if s.Spec.Labels[k] != v {
					t.Errorf("%s: service label %s = %q, want %q", name, k, s.Spec.Labels[k], v)
				}
				if _, ok := s.Spec.TaskTemplate.ContainerSpec.Labels[k]; ok {
					t.Errorf("%s: label %s is in the container spec", name, k)
				}
			}
			if s.Spec.Labels[LabelSpecHash] == "" {
				t.Errorf("%s: no spec hash label", name)
			}
		}
	})

	t.Run("an unchanged redeploy writes nothing", func(t *testing.T) {
		before := versions(services(t, b, stack))
		stats := b.Stats()
		// A new revision label alone is bookkeeping, not a change.
		res := deploy(t, b, stack, fixture{Replicas: 1}, map[string]string{"io.flotilla.owner": "ctl/app", "io.flotilla.revision": "2"})
		delta := b.Stats().Sub(stats)
		if res.Writes != 0 || delta.Writes != 0 {
			t.Fatalf("unchanged redeploy: result writes %d, requests that write %d (%v)", res.Writes, delta.Writes, delta.Requests)
		}
		if len(res.Unchanged) != 3 {
			t.Errorf("unchanged = %v, want all three", res.Unchanged)
		}
		if after := versions(services(t, b, stack)); !mapsEqual(before, after) {
			t.Errorf("versions moved: before %v, after %v", before, after)
		}
		t.Logf("unchanged redeploy requests: %v", delta.Requests)
	})

	t.Run("an env change updates only that service", func(t *testing.T) {
		before := versions(services(t, b, stack))
		res := deploy(t, b, stack, fixture{Replicas: 1, Message: "changed"}, labels)
		if res.Writes != 1 || !slices.Equal(res.Updated, []string{"worker"}) {
			t.Fatalf("result %+v, want one write updating worker", res)
		}
		after := versions(services(t, b, stack))
		for name := range before {
			moved := after[name] != before[name]
			if moved != (name == "worker") {
				t.Errorf("%s: version %d -> %d", name, before[name], after[name])
			}
		}
	})

	t.Run("a config change rolls out a new config to its service only", func(t *testing.T) {
		waitRunning(t, b, stack) // the env change above may still be rolling out
		before := services(t, b, stack)
		configsBefore, err := b.LiveConfigs(ctx, stack)
		if err != nil {
			t.Fatal(err)
		}
		res := deploy(t, b, stack, fixture{Replicas: 1, Message: "changed", Config: "setting = 2\n"}, labels)
		if res.Writes != 2 || !slices.Equal(res.Updated, []string{"web"}) {
			t.Fatalf("result %+v, want a config create and an update of web", res)
		}
		configsAfter, err := b.LiveConfigs(ctx, stack)
		if err != nil {
			t.Fatal(err)
		}
		var newName, newID string
		for name, id := range configsAfter {
			if _, ok := configsBefore[name]; !ok {
				newName, newID = name, id
			}
		}
		if newName == "" {
			t.Fatalf("no new config: before %v, after %v", configsBefore, configsAfter)
		}
		after := services(t, b, stack)
		refs := after["web"].Spec.TaskTemplate.ContainerSpec.Configs
		if len(refs) != 1 || refs[0].ConfigID != newID || refs[0].ConfigName != newName {
			t.Errorf("web references %+v, want %s (%s)", refs[0], newName, newID)
		}
		for _, name := range []string{"worker", "cache"} {
			if after[name].Version != before[name].Version {
				t.Errorf("%s: version moved %d -> %d", name, before[name].Version.Index, after[name].Version.Index)
			}
		}
		// The swarm starts the update a moment after the write, so a
		// settled read can still show web's old task: wait for the new one
		// (on a busy machine the moment is long).
		var now map[string][]string
		swarmtest.Eventually(t, 45*time.Second, func() (bool, string) {
			now = taskIDs(waitRunning(t, b, stack))
			return !slices.Equal(now["web"], tasks["web"]), fmt.Sprintf("web tasks did not roll: %v", now["web"])
		})
		if !slices.Equal(now["cache"], tasks["cache"]) {
			t.Errorf("cache tasks restarted: %v -> %v", tasks["cache"], now["cache"])
		}
	})

	t.Run("heal rewrites a service whose spec hash matches", func(t *testing.T) {
		r := render(t, stack, fixture{Replicas: 1, Message: "changed", Config: "setting = 2\n"})
		res, err := b.DeployStack(ctx, charts.DeployRequest{
			Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets, Labels: labels,
			Heal: []string{stack + "_cache"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Updated, []string{"cache"}) || res.Writes != 1 {
			t.Errorf("result %+v, want cache updated alone", res)
		}
	})

	t.Run("capabilities read the deployed stack", func(t *testing.T) {
		r := render(t, stack, fixture{Replicas: 1, Message: "changed", Config: "setting = 2\n"})
		desired, err := b.DesiredServices(ctx, r.Manifest, stack)
		if err != nil {
			t.Fatal(err)
		}
		live := services(t, b, stack)
		web := desired.Services[stack+"_web"]
		if got, want := web.TaskTemplate.ContainerSpec.Configs[0].ConfigID, live["web"].Spec.TaskTemplate.ContainerSpec.Configs[0].ConfigID; got != want {
			t.Errorf("desired config id %q, live %q", got, want)
		}
		declared, err := b.DeclaredResources(ctx, r.Manifest, stack)
		if err != nil {
			t.Fatal(err)
		}
		if len(declared.Services) != 3 || len(declared.Secrets) != 1 {
			t.Errorf("declared %d services, %d secrets", len(declared.Services), len(declared.Secrets))
		}
		nets, err := b.LiveNetworks(ctx, stack)
		if err != nil {
			t.Fatal(err)
		}
		names, err := b.LiveNetworkNames(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id, ok := nets[stack+"_front"]
		if !ok || names[id] != stack+"_front" {
			t.Errorf("networks %v, names[%s] = %q", nets, id, names[id])
		}
		secrets, err := b.LiveSecrets(ctx, stack)
		if err != nil || len(secrets) != 1 {
			t.Errorf("secrets %v, %v", secrets, err)
		}
		n, err := b.SwarmNodes(ctx)
		if err != nil || n < 1 {
			t.Errorf("SwarmNodes = %d, %v", n, err)
		}
	})

	t.Run("remove stack takes everything with the namespace", func(t *testing.T) {
		if err := b.RemoveStack(ctx, stack); err != nil {
			t.Fatal(err)
		}
		states, err := b.ReadStackServices(ctx, stack)
		if err != nil || len(states) != 0 {
			t.Errorf("after remove: %v, %v", states, err)
		}
		for kind, list := range map[string]func(context.Context, string) (map[string]string, error){
			"networks": b.LiveNetworks, "configs": b.LiveConfigs, "secrets": b.LiveSecrets,
		} {
			m, err := list(ctx, stack)
			if err != nil || len(m) != 0 {
				t.Errorf("%s after remove: %v, %v", kind, m, err)
			}
		}
	})
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestDeployStack_missingExternalNetworkWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "extnet")
	swarmtest.Cleanup(t, stack)

	r := render(t, stack, fixture{ExternalNet: stack + "-nowhere"})
	before := b.Stats()
	_, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets})
	if err == nil || !strings.Contains(err.Error(), stack+"-nowhere") {
		t.Fatalf("deploy error = %v, want one naming the missing network", err)
	}
	if d := b.Stats().Sub(before); d.Writes != 0 {
		t.Errorf("failed deploy sent %d writes: %v", d.Writes, d.Requests)
	}
	configs, _ := b.LiveConfigs(ctx, stack)
	secrets, _ := b.LiveSecrets(ctx, stack)
	live, _ := b.LiveServices(ctx, stack)
	if len(configs)+len(secrets)+len(live) != 0 {
		t.Errorf("objects created: configs %v, secrets %v, services %d", configs, secrets, len(live))
	}
}

func TestDeployStack_secretWithoutPlaintextWritesNothing(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "nosecret")
	swarmtest.Cleanup(t, stack)

	r := render(t, stack, fixture{})
	before := b.Stats()
	_, err := b.DeployStack(context.Background(), charts.DeployRequest{Stack: stack, Manifest: r.Manifest})
	if err == nil || !strings.Contains(err.Error(), "plaintext") {
		t.Fatalf("deploy error = %v, want one about the secret's plaintext", err)
	}
	if d := b.Stats().Sub(before); d.Writes != 0 {
		t.Errorf("failed deploy sent %d writes: %v", d.Writes, d.Requests)
	}
}

func TestDeployStack_keepsPinnedImageWhileTagUnchanged(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "pin")
	swarmtest.Cleanup(t, stack)

	deploy(t, b, stack, fixture{}, nil)
	// Stand in for a digest a registry pinned: the live image is the
	// reference in git plus a digest, and the stack image label is unchanged.
	pinned := swarmtest.Image + "@sha256:" + strings.Repeat("ab", 32)
	updateBehindBack(t, services(t, b, stack)["worker"].ID, func(s *swarm.ServiceSpec) {
		s.TaskTemplate.ContainerSpec.Image = pinned
	})

	res := deploy(t, b, stack, fixture{Message: "other"}, nil)
	if !slices.Equal(res.Updated, []string{"worker"}) {
		t.Fatalf("updated %v, want worker", res.Updated)
	}
	if got := services(t, b, stack)["worker"].Spec.TaskTemplate.ContainerSpec.Image; got != pinned {
		t.Errorf("image after update with the same tag in git = %q, want the live %q", got, pinned)
	}

	// Another tag set behind the controller's back (docker service update
	// --image leaves the stack image label alone) is not kept: it is drift,
	// and keeping it would make self-heal write the drift back.
	updateBehindBack(t, services(t, b, stack)["worker"].ID, func(s *swarm.ServiceSpec) {
		s.TaskTemplate.ContainerSpec.Image = swarmtest.Image2
	})
	deploy(t, b, stack, fixture{Message: "third"}, nil)
	if got := services(t, b, stack)["worker"].Spec.TaskTemplate.ContainerSpec.Image; got != swarmtest.Image {
		t.Errorf("image after a hand-set tag = %q, want git's %q", got, swarmtest.Image)
	}

	// A new reference in git replaces the live image.
	res = deploy(t, b, stack, fixture{Message: "third", WebImage: swarmtest.Image2}, nil)
	if !slices.Equal(res.Updated, []string{"web"}) {
		t.Fatalf("updated %v, want web", res.Updated)
	}
	if got := services(t, b, stack)["web"].Spec.TaskTemplate.ContainerSpec.Image; got != swarmtest.Image2 {
		t.Errorf("web image = %q, want %q", got, swarmtest.Image2)
	}
}

func TestDeployStack_retriesLostCompareAndSwapAndReportsIt(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "cas")
	swarmtest.Cleanup(t, stack)

	deploy(t, b, stack, fixture{}, nil)

	var mu sync.Mutex
	var notified []string
	nb := b.WithOutOfBandNotifier(func(service string) {
		mu.Lock()
		defer mu.Unlock()
		notified = append(notified, service)
	}).(*Backend)
	// Another writer moves the service between the backend's read and its
	// write, once.
	nb.hooks = &testHooks{beforeServiceUpdate: func(_ context.Context, id string, attempt int) {
		if attempt == 1 {
			updateBehindBack(t, id, func(s *swarm.ServiceSpec) { s.Labels["someone"] = "else" })
		}
	}}

	before := nb.Stats()
	res := deploy(t, nb, stack, fixture{Message: "raced"}, nil)
	if !slices.Equal(res.Updated, []string{"worker"}) || res.Writes != 1 {
		t.Fatalf("result %+v, want worker updated with one write", res)
	}
	if d := nb.Stats().Sub(before); d.Conflicts != 1 || d.Requests["service.update"] != 2 {
		t.Errorf("conflicts %d, service updates %d; want 1 and 2", d.Conflicts, d.Requests["service.update"])
	}
	mu.Lock()
	if !slices.Equal(notified, []string{stack + "_worker"}) {
		t.Errorf("notified %v, want [%s_worker]", notified, stack)
	}
	mu.Unlock()
	env := services(t, b, stack)["worker"].Spec.TaskTemplate.ContainerSpec.Env
	if !slices.Contains(env, "APP_MESSAGE=raced") {
		t.Errorf("worker env %v lacks the deployed message", env)
	}
	// The original backend has no notifier: the copy did not leak into it.
	if b.outOfBand != nil {
		t.Error("WithOutOfBandNotifier changed the backend it was called on")
	}
}

func TestDeployStack_givesUpAfterRepeatedLostWrites(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "casmax")
	swarmtest.Cleanup(t, stack)
	deploy(t, b, stack, fixture{}, nil)

	var n int
	b.hooks = &testHooks{beforeServiceUpdate: func(_ context.Context, id string, _ int) {
		n++
		updateBehindBack(t, id, func(s *swarm.ServiceSpec) { s.Labels["writer"] = strconv.Itoa(n) })
	}}
	r := render(t, stack, fixture{Message: "never"})
	_, err := b.DeployStack(context.Background(), charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets})
	if !isOutOfSequence(err) {
		t.Fatalf("error = %v, want the refused write", err)
	}
	t.Logf("error: %v", err)
	if c := b.Stats().Conflicts; c != maxCASAttempts {
		t.Errorf("conflicts = %d, want %d", c, maxCASAttempts)
	}
}

func TestDeployStack_resolveChangedFallsBackToTheTagAndAsksOnlyOnChange(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	b.resolve, b.resolveTimeout = ResolveChanged, 2*time.Second
	stack := swarmtest.Name(t, "resolve")
	swarmtest.Cleanup(t, stack)

	// No registry answers here: every lookup fails and the tag is kept.
	before := b.Stats()
	deploy(t, b, stack, fixture{}, nil)
	if n := b.Stats().Sub(before).Requests["distribution.inspect"]; n != 3 {
		t.Errorf("digest lookups on create = %d, want one per service", n)
	}
	for name, s := range services(t, b, stack) {
		if got := s.Spec.TaskTemplate.ContainerSpec.Image; got != swarmtest.Image {
			t.Errorf("%s image = %q, want the tag", name, got)
		}
	}

	before = b.Stats()
	res := deploy(t, b, stack, fixture{Message: "changed"}, nil)
	if n := b.Stats().Sub(before).Requests["distribution.inspect"]; n != 0 || !slices.Equal(res.Updated, []string{"worker"}) {
		t.Errorf("update with an unchanged tag: %d lookups, updated %v; want 0 and worker", n, res.Updated)
	}
	before = b.Stats()
	deploy(t, b, stack, fixture{Message: "changed", WebImage: swarmtest.Image2}, nil)
	if n := b.Stats().Sub(before).Requests["distribution.inspect"]; n != 1 {
		t.Errorf("update with a new tag: %d lookups, want 1", n)
	}
}
