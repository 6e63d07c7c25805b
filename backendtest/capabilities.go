package backendtest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// check is the conformance check of one capability. It runs only against a
// backend that implements it, and asserts what the capability's doc comment
// promises, with the contract's own behaviour as the reference.
type check func(s *suite, t *testing.T, b charts.Backend)

// checks holds one check per capability of capability.All; a capability
// added to the table without one fails TestEveryCapabilityHasACheck.
var checks = map[string]check{
	"StacksReader":        checkStacksReader,
	"StackServicesReader": checkStackServicesReader,
	"LiveDrift":           checkLiveDrift,
	"NetworkNamer":        checkNetworkNamer,
	"OutOfBand":           checkOutOfBand,
	"DeclaredLister":      checkDeclaredLister,
	"ResourceLister":      checkResourceLister,
	"ResourceRemover":     checkResourceRemover,
	"SwarmSizer":          checkSwarmSizer,
	"SwarmNodeNamer":      checkSwarmNodeNamer,
	"AllowedReferences":   checkAllowedReferences,
	"ForbidSecrets":       checkForbidSecrets,
	"RegistryAuth":        checkRegistryAuth,
	"ReleaseLister":       checkReleaseLister,
	"ReleaseHead":         (*suite).testReleaseHeadAgreesWithReleases,
	"LiveServicesBatch":   checkLiveServicesBatch,
	"LiveStacksReader":    checkLiveStacksReader,
	"ReleaseHeads":        (*suite).testReleaseHeadsAgreeWithReleases,
	"OwnerStamps":         checkOwnerStamps,
	"LiveResources":       checkLiveResources,
	"NotKeptMemory":       checkNotKeptMemory,
	"VolumeSweeper":       checkVolumeSweeper,
	"ServiceLogs":         checkServiceLogs,
	"StackLogs":           checkStackLogs,
	"APIVersioner":        checkAPIVersioner,
}

// runCapabilities runs, under "Capability", the check of every capability
// the backend implements; a backend implementing none runs nothing.
func (s *suite) runCapabilities(t *testing.T) {
	probe := s.newBackend(t)
	var claimed []capability.Descriptor
	for _, d := range capability.All() {
		if d.In(probe) {
			claimed = append(claimed, d)
		}
	}
	if len(claimed) == 0 {
		return
	}
	t.Run("Capability", func(t *testing.T) {
		for _, d := range claimed {
			fn, ok := checks[d.Name]
			if !ok {
				t.Errorf("no conformance check for %s", d.Name)
				continue
			}
			t.Run(d.Name, func(t *testing.T) {
				t.Parallel()
				fn(s, t, s.newBackend(t))
			})
		}
	})
}

// must is As for a check that runs only where the capability is.
func must[T any](t *testing.T, b charts.Backend) T {
	t.Helper()
	c, ok := capability.As[T](b)
	if !ok {
		t.Fatalf("backend lost the capability between two calls of newBackend")
	}
	return c
}

// deployed deploys the zero project to a fresh stack and returns the stack
// and the request.
func (s *suite) deployed(t *testing.T, b charts.Backend) (string, charts.DeployRequest) {
	t.Helper()
	stack := s.stack(t)
	req := s.request(t, stack, project{})
	deploy(t, b, req)
	return stack, req
}

// scopedServices is what the zero project's services are called on stack.
func scopedServices(stack string) []string {
	out := make([]string, 0, len(projectServices))
	for _, name := range projectServices {
		out = append(out, scoped(stack, name))
	}
	return out
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func checkStacksReader(s *suite, t *testing.T, b charts.Backend) {
	r := must[capability.StacksReader](t, b)
	stack, _ := s.deployed(t, b)
	unknown := s.stack(t)
	got, err := r.ReadStacks(context.Background(), []string{stack, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[unknown]; !ok || len(got[unknown]) != 0 {
		t.Fatalf("a stack with no services: present %v, %s; a nil error promises every stack asked for", ok, describe(got[unknown]))
	}
	if n := names(got[stack]); !slices.Equal(n, projectServices) {
		t.Fatalf("services of %s: %v, want %v", stack, n, projectServices)
	}
}

func checkStackServicesReader(s *suite, t *testing.T, b charts.Backend) {
	r := must[capability.StackServicesReader](t, b)
	stack, _ := s.deployed(t, b)
	got, err := r.ReadStackServices(context.Background(), stack)
	if err != nil {
		t.Fatal(err)
	}
	if n := names(got); !slices.Equal(n, projectServices) {
		t.Fatalf("services of %s: %v, want %v", stack, n, projectServices)
	}
	if got, err := r.ReadStackServices(context.Background(), s.stack(t)); err != nil || len(got) != 0 {
		t.Fatalf("a stack with no services: %s, %v; want none and no error", describe(got), err)
	}
}

func checkLiveDrift(s *suite, t *testing.T, b charts.Backend) {
	ld := must[capability.LiveDrift](t, b)
	ctx := context.Background()
	stack, req := s.deployed(t, b)
	want := scopedServices(stack)
	desired, err := ld.DesiredServices(ctx, req.Manifest, stack)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(desired.Services); !slices.Equal(got, want) {
		t.Fatalf("desired services %v, want %v", got, want)
	}
	live, err := ld.LiveServices(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(live); !slices.Equal(got, want) {
		t.Fatalf("live services %v, want %v", got, want)
	}
	for name, svc := range live {
		if svc.Spec.Name != name || svc.ID == "" {
			t.Fatalf("live service %s: name %q, id %q", name, svc.Spec.Name, svc.ID)
		}
	}
	if live, err := ld.LiveServices(ctx, s.stack(t)); err != nil || len(live) != 0 {
		t.Fatalf("a stack with no services: %v, %v", keys(live), err)
	}
}

func checkNetworkNamer(s *suite, t *testing.T, b charts.Backend) {
	nn := must[capability.NetworkNamer](t, b)
	stack, _ := s.deployed(t, b)
	names, err := nn.LiveNetworkNames(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(slices.Collect(maps.Values(names)), scoped(stack, "front")) {
		t.Fatalf("the network the deploy created, %s, is not named: %v", scoped(stack, "front"), names)
	}
}

// redeployUnchanged deploys req again through d, a decoration of the
// backend req was deployed with: it is the same swarm, so nothing changes.
func redeployUnchanged(t *testing.T, what string, d charts.Backend, req charts.DeployRequest) {
	t.Helper()
	if d == nil {
		t.Fatalf("%s returned no backend", what)
	}
	checkResult(t, "the same manifest through "+what, deploy(t, d, req), want{unchanged: projectServices})
}

func checkOutOfBand(s *suite, t *testing.T, b charts.Backend) {
	_, req := s.deployed(t, b)
	d := must[capability.OutOfBand](t, b).WithOutOfBandNotifier(func(service string) {
		t.Errorf("out-of-band write reported on %s with no other writer", service)
	})
	redeployUnchanged(t, "WithOutOfBandNotifier", d, req)
}

func checkAllowedReferences(s *suite, t *testing.T, b charts.Backend) {
	_, req := s.deployed(t, b)
	redeployUnchanged(t, "WithAllowedReferences", must[capability.AllowedReferences](t, b).WithAllowedReferences(application.Allow{}), req)
}

func checkForbidSecrets(s *suite, t *testing.T, b charts.Backend) {
	_, req := s.deployed(t, b)
	d := must[capability.ForbidSecrets](t, b).WithForbiddenSecrets(map[string]struct{}{"backendtest-controller-secret": {}})
	redeployUnchanged(t, "WithForbiddenSecrets", d, req)
}

// noCredentials is a regauth.Resolver with no credential for any image.
type noCredentials struct{}

func (noCredentials) RegistryAuth(context.Context, string) (string, error) { return "", nil }

func checkRegistryAuth(s *suite, t *testing.T, b charts.Backend) {
	_, req := s.deployed(t, b)
	redeployUnchanged(t, "WithRegistryAuth", must[capability.RegistryAuth](t, b).WithRegistryAuth(noCredentials{}), req)
}

func checkDeclaredLister(s *suite, t *testing.T, b charts.Backend) {
	dl := must[capability.DeclaredLister](t, b)
	stack := s.stack(t)
	// Nothing of it exists: the answer needs nothing on the swarm.
	st, err := dl.DeclaredResources(context.Background(), s.request(t, stack, project{}).Manifest, stack)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(st.Services), scopedServices(stack); !slices.Equal(got, want) {
		t.Fatalf("declared services %v, want %v", got, want)
	}
	if got := keys(st.Networks); !slices.Equal(got, []string{scoped(stack, "front")}) {
		t.Fatalf("declared networks %v", got)
	}
	if len(st.Configs) != 1 || len(st.Secrets) != 1 {
		t.Fatalf("declared configs %v and secrets %v, want one of each", keys(st.Configs), keys(st.Secrets))
	}
}

func checkResourceLister(s *suite, t *testing.T, b charts.Backend) {
	rl := must[capability.ResourceLister](t, b)
	ctx := context.Background()
	stack, _ := s.deployed(t, b)
	for kind, list := range map[string]func(context.Context, string) (map[string]string, error){
		"networks": rl.LiveNetworks, "configs": rl.LiveConfigs, "secrets": rl.LiveSecrets,
	} {
		got, err := list(ctx, stack)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if len(got) != 1 {
			t.Fatalf("%s of %s: %v, want the one the project declares", kind, stack, got)
		}
		if other, err := list(ctx, s.stack(t)); err != nil || len(other) != 0 {
			t.Fatalf("%s of a stack with none: %v, %v", kind, other, err)
		}
	}
}

func checkResourceRemover(s *suite, t *testing.T, b charts.Backend) {
	rr := must[capability.ResourceRemover](t, b)
	ld, ok := capability.As[capability.LiveDrift](b)
	if !ok {
		t.Log("without LiveDrift there is no id to remove by; only the claim is checked")
		return
	}
	ctx := context.Background()
	stack, _ := s.deployed(t, b)
	live, err := ld.LiveServices(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	if err := rr.RemoveService(ctx, live[scoped(stack, "worker")].ID); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, func() (bool, string) {
		got := b.StackServices(ctx, stack)
		return slices.Equal(names(got), []string{"web"}), describe(got)
	})
}

func checkSwarmSizer(_ *suite, t *testing.T, b charts.Backend) {
	if n, err := must[capability.SwarmSizer](t, b).SwarmNodes(context.Background()); err != nil || n < 1 {
		t.Fatalf("%d nodes, %v", n, err)
	}
}

func checkSwarmNodeNamer(_ *suite, t *testing.T, b charts.Backend) {
	ctx := context.Background()
	got, err := must[capability.SwarmNodeNamer](t, b).SwarmNodeNames(ctx)
	if err != nil || len(got) == 0 || !slices.IsSorted(got) {
		t.Fatalf("node names %v, %v; want some, sorted", got, err)
	}
	if sz, ok := capability.As[capability.SwarmSizer](b); ok {
		if n, err := sz.SwarmNodes(ctx); err != nil || n != len(got) {
			t.Fatalf("%d nodes named, SwarmNodes says %d (%v)", len(got), n, err)
		}
	}
}

func checkReleaseLister(s *suite, t *testing.T, b charts.Backend) {
	rl := must[capability.ReleaseLister](t, b)
	name := s.stack(t)
	record(t, b, charts.Release{Name: name, Revision: 1, Owner: "ctl/first"}, 0)
	record(t, b, charts.Release{Name: name, Revision: 2, Owner: "ctl/second"}, 0)
	owners, err := rl.ReleaseOwners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if owners[name] != "ctl/second" {
		t.Fatalf("owner of %s: %q, want the newest record's, ctl/second", name, owners[name])
	}
}

func checkLiveServicesBatch(s *suite, t *testing.T, b charts.Backend) {
	lb := must[capability.LiveServicesBatch](t, b)
	stack, _ := s.deployed(t, b)
	unknown := s.stack(t)
	got, err := lb.LiveServicesOf(context.Background(), []string{stack, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := got[unknown]; !ok || len(m) != 0 {
		t.Fatalf("a stack with no services: present %v, %v; a nil error promises every stack asked for", ok, keys(m))
	}
	if k, want := keys(got[stack]), scopedServices(stack); !slices.Equal(k, want) {
		t.Fatalf("services of %s: %v, want %v", stack, k, want)
	}
}

func checkLiveStacksReader(s *suite, t *testing.T, b charts.Backend) {
	r := must[capability.LiveStacksReader](t, b)
	stack, _ := s.deployed(t, b)
	unknown := s.stack(t)
	states, live, err := r.ReadLiveStacks(context.Background(), []string{stack, unknown})
	if err != nil {
		t.Fatal(err)
	}
	_, stateOK := states[unknown]
	m, liveOK := live[unknown]
	if !stateOK || !liveOK || len(states[unknown])+len(m) != 0 {
		t.Fatalf("a stack with no services: in states %v, in live %v; a nil error promises every stack asked for in both", stateOK, liveOK)
	}
	if n := names(states[stack]); !slices.Equal(n, projectServices) {
		t.Fatalf("services of %s: %v, want %v", stack, n, projectServices)
	}
	if k, want := keys(live[stack]), scopedServices(stack); !slices.Equal(k, want) {
		t.Fatalf("live services of %s: %v, want %v", stack, k, want)
	}
}

// A deploy whose request carries no owner stamp stamps nothing, and an
// object without a stamp is left out.
func checkOwnerStamps(s *suite, t *testing.T, b charts.Backend) {
	stamps := must[capability.OwnerStamps](t, b)
	stack, _ := s.deployed(t, b)
	for _, st := range []string{stack, s.stack(t)} {
		o, err := stamps.LiveOwners(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(o.Services) + len(o.Networks) + len(o.Configs) + len(o.Secrets); n != 0 {
			t.Fatalf("%d owner stamps in %s, which nothing stamped: %+v", n, st, o)
		}
	}
}

// LiveResources answers what ResourceLister, LiveDrift and OwnerStamps
// answer one at a time, for those of them the backend has.
func checkLiveResources(s *suite, t *testing.T, b charts.Backend) {
	ctx := context.Background()
	stack, _ := s.deployed(t, b)
	got, err := must[capability.LiveResources](t, b).LiveResources(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	if k, want := keys(got.Services), scopedServices(stack); !slices.Equal(k, want) {
		t.Fatalf("services %v, want %v", k, want)
	}
	if len(got.Networks) != 1 || len(got.Configs) != 1 || len(got.Secrets) != 1 {
		t.Fatalf("networks %v, configs %v, secrets %v: want the one of each the project declares", got.Networks, got.Configs, got.Secrets)
	}
	if rl, ok := capability.As[capability.ResourceLister](b); ok {
		for kind, pair := range map[string]struct {
			list func(context.Context, string) (map[string]string, error)
			got  map[string]string
		}{"networks": {rl.LiveNetworks, got.Networks}, "configs": {rl.LiveConfigs, got.Configs}, "secrets": {rl.LiveSecrets, got.Secrets}} {
			if one, err := pair.list(ctx, stack); err != nil || !maps.Equal(one, pair.got) {
				t.Fatalf("%s: ResourceLister says %v (%v), LiveResources %v", kind, one, err, pair.got)
			}
		}
	}
	if ld, ok := capability.As[capability.LiveDrift](b); ok {
		live, err := ld.LiveServices(ctx, stack)
		if err != nil || !maps.EqualFunc(live, got.Services, func(a, b swarm.Service) bool { return a.ID == b.ID }) {
			t.Fatalf("LiveDrift says %v (%v), LiveResources %v", keys(live), err, keys(got.Services))
		}
	}
}

func checkNotKeptMemory(s *suite, t *testing.T, b charts.Backend) {
	m := must[capability.NotKeptMemory](t, b)
	ctx := context.Background()
	stack := s.stack(t)
	read := func() map[string]map[string]capability.NotKeptField {
		t.Helper()
		got, err := m.NotKept(ctx, stack)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("a stack never remembered: %v", got)
	}
	fields := map[string]map[string]capability.NotKeptField{
		scoped(stack, "web"): {"TaskTemplate.ContainerSpec.Init": {Desired: "d1", Live: "l1", APIVersion: "1.44"}},
	}
	if err := m.RememberNotKept(ctx, stack, fields); err != nil {
		t.Fatal(err)
	}
	if got := read(); !maps.EqualFunc(got, fields, maps.Equal) {
		t.Fatalf("remembered %v, read back %v", fields, got)
	}
	if err := m.RememberNotKept(ctx, stack, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("after forgetting: %v", got)
	}
}

func checkVolumeSweeper(s *suite, t *testing.T, b charts.Backend) {
	if got, err := must[capability.VolumeSweeper](t, b).LiveVolumes(context.Background(), s.stack(t)); err != nil || len(got) != 0 {
		t.Fatalf("volumes of a stack with none: %v, %v", got, err)
	}
}

// A service with no task has written nothing, and a read asks for at most
// so many lines.
func checkServiceLogs(s *suite, t *testing.T, b charts.Backend) {
	ctx := context.Background()
	stack, _ := s.deployed(t, b)
	web, ok := byName(t, b.StackServices(ctx, stack))["web"]
	if !ok || web.ID == "" {
		t.Fatalf("no id for web in %s", describe(b.StackServices(ctx, stack)))
	}
	if lines, err := must[capability.ServiceLogs](t, b).ServiceLogTail(ctx, web.ID, 3); err != nil || len(lines) > 3 {
		t.Fatalf("logs of a service with no task: %q, %v", lines, err)
	}
}

func checkStackLogs(s *suite, t *testing.T, b charts.Backend) {
	stack, _ := s.deployed(t, b)
	err := must[capability.StackLogs](t, b).StackLogs(context.Background(), stack, capability.LogQuery{Service: "nosuch", Tail: 1},
		func(capability.LogLine) error { return nil })
	if !errors.Is(err, capability.ErrNoLogSource) {
		t.Fatalf("logs of a service the stack does not have: %v, want ErrNoLogSource", err)
	}
}

func checkAPIVersioner(_ *suite, t *testing.T, b charts.Backend) {
	if v := must[capability.APIVersioner](t, b).APIVersion(); v == "" {
		t.Fatal("no API version")
	}
}
