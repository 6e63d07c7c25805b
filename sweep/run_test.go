package sweep

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// store is the swarm and release history the fakes share. Each fake below
// is a different set of capabilities over one store.
type store struct {
	stack     string
	services  map[string]swarm.Service
	networks  map[string]string
	configs   map[string]string
	secrets   map[string]string
	releases  []charts.Release
	manifests map[string]*compose.Stack
	// desiredFails are manifests DesiredServices cannot convert, as for a
	// revision that mounted a config since deleted.
	desiredFails map[string]bool
	// removeErr makes the removal of an id fail.
	removeErr map[string]error
	// listErr makes every listing fail.
	listErr error
	// owners are the owner stamps live resources carry, by Key.
	owners  map[string]string
	removed []string
}

// core is charts.Backend and nothing more.
type core struct{ *store }

func (f core) DeployStack(context.Context, charts.DeployRequest) (charts.DeployResult, error) {
	return charts.DeployResult{}, errors.New("fake: deploy not supported")
}

func (f core) StackServices(_ context.Context, stack string) []charts.ServiceState {
	var out []charts.ServiceState
	for _, name := range sortedKeys(f.services) {
		out = append(out, charts.ServiceState{Name: strings.TrimPrefix(name, stack+"_"), ID: f.services[name].ID})
	}
	return out
}

func (f core) RemoveStack(context.Context, string) error {
	return errors.New("fake: a sweep must not remove the whole stack")
}

func (f core) Releases(_ context.Context, release string) ([]charts.Release, error) {
	if release != f.stack {
		return nil, nil
	}
	return slices.Clone(f.releases), nil
}

func (f core) RecordRelease(context.Context, charts.Release, int) error {
	return errors.New("fake: record not supported")
}

// drift is capability.LiveDrift.
type drift struct{ *store }

func (f drift) DesiredServices(_ context.Context, manifest, _ string) (*compose.Stack, error) {
	if f.desiredFails[manifest] {
		return nil, fmt.Errorf("convert %s: config not found", manifest)
	}
	return f.declared(manifest)
}

func (f drift) LiveServices(context.Context, string) (map[string]swarm.Service, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return maps.Clone(f.services), nil
}

// declarer is capability.DeclaredLister.
type declarer struct{ *store }

func (f declarer) DeclaredResources(_ context.Context, manifest, _ string) (*compose.Stack, error) {
	return f.declared(manifest)
}

func (s *store) declared(manifest string) (*compose.Stack, error) {
	if d, ok := s.manifests[manifest]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("unknown manifest %q", manifest)
}

// lister is capability.ResourceLister.
type lister struct{ *store }

func (f lister) LiveNetworks(context.Context, string) (map[string]string, error) {
	return maps.Clone(f.networks), f.listErr
}

func (f lister) LiveConfigs(context.Context, string) (map[string]string, error) {
	return maps.Clone(f.configs), f.listErr
}

func (f lister) LiveSecrets(context.Context, string) (map[string]string, error) {
	return maps.Clone(f.secrets), f.listErr
}

// stamper is capability.OwnerStamps.
type stamper struct{ *store }

func (f stamper) LiveOwners(context.Context, string) (capability.Owners, error) {
	o := capability.Owners{Services: map[string]string{}, Networks: map[string]string{}, Configs: map[string]string{}, Secrets: map[string]string{}}
	for key, owner := range f.owners {
		kind, name, _ := strings.Cut(key, "/")
		switch Kind(kind) {
		case KindService:
			o.Services[name] = owner
		case KindNetwork:
			o.Networks[name] = owner
		case KindConfig:
			o.Configs[name] = owner
		case KindSecret:
			o.Secrets[name] = owner
		}
	}
	return o, f.listErr
}

// remover is capability.ResourceRemover.
type remover struct{ *store }

func (f remover) RemoveService(_ context.Context, id string) error {
	return f.remove(KindService, id, func(name string) {
		if f.services[name].ID == id {
			delete(f.services, name)
		}
	})
}

func (f remover) RemoveNetwork(_ context.Context, id string) error {
	return f.remove(KindNetwork, id, func(name string) { delete(f.networks, name) })
}

func (f remover) RemoveConfig(_ context.Context, id string) error {
	return f.remove(KindConfig, id, func(name string) { delete(f.configs, name) })
}

func (f remover) RemoveSecret(_ context.Context, id string) error {
	return f.remove(KindSecret, id, func(name string) { delete(f.secrets, name) })
}

func (s *store) remove(k Kind, id string, del func(name string)) error {
	if err := s.removeErr[id]; err != nil {
		return err
	}
	name := strings.TrimPrefix(id, "id-")
	s.removed = append(s.removed, Key(k, name))
	del(name)
	return nil
}

// The fakes, each named for what it lacks.
type (
	fullFake struct {
		core
		drift
		declarer
		lister
		remover
		stamper
	}
	fakeNoRemover struct {
		core
		drift
		declarer
		lister
	}
	fakeNoLister struct {
		core
		drift
		declarer
		remover
	}
	fakeNoDeclared struct {
		core
		drift
		lister
		remover
	}
	fakeNoDrift struct {
		core
		declarer
		lister
		remover
	}
	fakeBackendOnly struct{ core }
	// wrapper decorates a backend and hides its methods, as a per-application
	// wrapper does; capabilities must still be found through Unwrap.
	wrapper struct{ inner charts.Backend }
)

var (
	_ charts.Backend             = (*fullFake)(nil)
	_ capability.LiveDrift       = (*fullFake)(nil)
	_ capability.DeclaredLister  = (*fullFake)(nil)
	_ capability.ResourceLister  = (*fullFake)(nil)
	_ capability.ResourceRemover = (*fullFake)(nil)
	_ capability.OwnerStamps     = (*fullFake)(nil)

	_ charts.Backend            = (*fakeNoRemover)(nil)
	_ capability.LiveDrift      = (*fakeNoRemover)(nil)
	_ capability.DeclaredLister = (*fakeNoRemover)(nil)
	_ capability.ResourceLister = (*fakeNoRemover)(nil)

	_ charts.Backend             = (*fakeNoLister)(nil)
	_ capability.LiveDrift       = (*fakeNoLister)(nil)
	_ capability.DeclaredLister  = (*fakeNoLister)(nil)
	_ capability.ResourceRemover = (*fakeNoLister)(nil)

	_ charts.Backend             = (*fakeNoDeclared)(nil)
	_ capability.LiveDrift       = (*fakeNoDeclared)(nil)
	_ capability.ResourceLister  = (*fakeNoDeclared)(nil)
	_ capability.ResourceRemover = (*fakeNoDeclared)(nil)

	_ charts.Backend             = (*fakeNoDrift)(nil)
	_ capability.DeclaredLister  = (*fakeNoDrift)(nil)
	_ capability.ResourceLister  = (*fakeNoDrift)(nil)
	_ capability.ResourceRemover = (*fakeNoDrift)(nil)

	_ charts.Backend = (*fakeBackendOnly)(nil)

	_ charts.Backend     = (*wrapper)(nil)
	_ capability.Wrapper = (*wrapper)(nil)
)

func (w *wrapper) DeployStack(ctx context.Context, r charts.DeployRequest) (charts.DeployResult, error) {
	return w.inner.DeployStack(ctx, r)
}
func (w *wrapper) StackServices(ctx context.Context, s string) []charts.ServiceState {
	return w.inner.StackServices(ctx, s)
}
func (w *wrapper) RemoveStack(ctx context.Context, s string) error {
	return w.inner.RemoveStack(ctx, s)
}
func (w *wrapper) Releases(ctx context.Context, r string) ([]charts.Release, error) {
	return w.inner.Releases(ctx, r)
}
func (w *wrapper) RecordRelease(ctx context.Context, r charts.Release, keep int) error {
	return w.inner.RecordRelease(ctx, r, keep)
}
func (w *wrapper) Unwrap() charts.Backend { return w.inner }

func service(name string, networks, configs, secrets []string) swarm.Service {
	cs := &swarm.ContainerSpec{}
	for _, c := range configs {
		cs.Configs = append(cs.Configs, &swarm.ConfigReference{ConfigName: c, ConfigID: "id-" + c})
	}
	for _, s := range secrets {
		cs.Secrets = append(cs.Secrets, &swarm.SecretReference{SecretName: s, SecretID: "id-" + s})
	}
	var nets []swarm.NetworkAttachmentConfig
	for _, n := range networks {
		nets = append(nets, swarm.NetworkAttachmentConfig{Target: "id-" + n})
	}
	return swarm.Service{ID: "id-" + name, Spec: swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: name},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: cs, Networks: nets},
	}}
}

func ids(names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = "id-" + n
	}
	return out
}

// newStore is stack s after three revisions of ctl-a/shop. Revision 3 is
// current; revision 2 declared s_old with its own network, config version
// and secret; revision 1 declared s_older. s_debug was made by hand.
func newStore() *store {
	return &store{
		stack: "s",
		services: map[string]swarm.Service{
			"s_web":   service("s_web", []string{"s_default"}, []string{"s_conf-bbbbbbbbbb"}, nil),
			"s_old":   service("s_old", []string{"s_back"}, []string{"s_conf-aaaaaaaaaa"}, []string{"s_key"}),
			"s_older": service("s_older", []string{"s_default"}, nil, nil),
			"s_debug": service("s_debug", []string{"s_default"}, nil, nil),
		},
		networks: ids("s_default", "s_back"),
		configs:  ids("s_conf-aaaaaaaaaa", "s_conf-bbbbbbbbbb"),
		secrets:  ids("s_key"),
		releases: []charts.Release{
			{Name: "s", Revision: 3, Owner: owner, Manifest: "m3"},
			{Name: "s", Revision: 2, Owner: owner, Manifest: "m2"},
			{Name: "s", Revision: 1, Owner: owner, Manifest: "m1"},
		},
		manifests: map[string]*compose.Stack{
			"m3": decl("service/s_web", "network/s_default", "config/s_conf-bbbbbbbbbb"),
			"m2": decl("service/s_web", "service/s_old", "network/s_default", "network/s_back", "config/s_conf-aaaaaaaaaa", "secret/s_key"),
			"m1": decl("service/s_web", "service/s_older", "network/s_default"),
		},
		desiredFails: map[string]bool{},
		removeErr:    map[string]error{},
	}
}

func runInput(s *store) RunInput {
	return RunInput{Stack: "s", Owner: owner, Current: s.manifests["m3"]}
}

var everyRemoval = []string{"service/s_old", "service/s_older", "network/s_back", "config/s_conf-aaaaaaaaaa", "secret/s_key"}

func mustRun(t *testing.T, b charts.Backend, in RunInput) Report {
	t.Helper()
	rep, err := Run(context.Background(), b, in)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func hasLine(lines []string, substr string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func TestRun_fullBackendRemovesInOrderAndLeavesTheRest(t *testing.T) {
	s := newStore()
	rep := mustRun(t, &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, runInput(s))
	if !slices.Equal(s.removed, everyRemoval) {
		t.Errorf("removed %v, want %v", s.removed, everyRemoval)
	}
	if got := keys(rep.Removed); !slices.Equal(got, everyRemoval) {
		t.Errorf("Report.Removed = %v, want %v", got, everyRemoval)
	}
	if got := keys(rep.Plan.Unmanaged); !slices.Equal(got, []string{"service/s_debug"}) {
		t.Errorf("Unmanaged = %v, want the hand-made service", got)
	}
	if _, ok := s.services["s_debug"]; !ok {
		t.Error("the hand-made service was removed")
	}
	if rep.DryRun || len(rep.Degraded) != 0 || len(rep.Failures) != 0 {
		t.Errorf("DryRun=%v Degraded=%q Failures=%v, want a clean sweep", rep.DryRun, rep.Degraded, rep.Failures)
	}
}

func TestRun_capabilitiesSurviveAWrapper(t *testing.T) {
	s := newStore()
	mustRun(t, &wrapper{&fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}}, runInput(s))
	if !slices.Equal(s.removed, everyRemoval) {
		t.Errorf("removed %v through the wrapper, want %v", s.removed, everyRemoval)
	}
}

func TestRun_withoutResourceRemoverReportsADryRun(t *testing.T) {
	s := newStore()
	rep := mustRun(t, &fakeNoRemover{core{s}, drift{s}, declarer{s}, lister{s}}, runInput(s))
	if len(s.removed) != 0 {
		t.Fatalf("removed %v without a remover", s.removed)
	}
	if !rep.DryRun || !slices.Equal(keys(rep.Plan.Delete), everyRemoval) {
		t.Errorf("DryRun=%v Delete=%v, want a dry run of %v", rep.DryRun, keys(rep.Plan.Delete), everyRemoval)
	}
	msgs := rep.Messages()
	if hasLine(msgs, "would remove config s_conf-aaaaaaaaaa: backend lacks ResourceRemover") != 1 {
		t.Errorf("messages %q do not say what would be removed and why not", msgs)
	}
	if hasLine(msgs, "removal unavailable: backend lacks ResourceRemover") != 1 {
		t.Errorf("messages %q do not name the lost feature", msgs)
	}
}

func TestRun_dryRunDeletesNothingAndKeepsCounts(t *testing.T) {
	s := newStore()
	prev := map[string]int{"secret/s_key": 2}
	in := runInput(s)
	in.DryRun, in.Failures = true, prev
	rep := mustRun(t, &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, in)
	if len(s.removed) != 0 || !rep.DryRun || rep.DryRunCause != "" {
		t.Fatalf("removed=%v DryRun=%v cause=%q, want a requested dry run", s.removed, rep.DryRun, rep.DryRunCause)
	}
	if !maps.Equal(rep.Failures, prev) {
		t.Errorf("Failures = %v, want %v unchanged", rep.Failures, prev)
	}
	if hasLine(rep.Messages(), "would remove secret s_key") != 1 {
		t.Errorf("messages %q lack the pending removal", rep.Messages())
	}
}

func TestRun_withoutResourceListerSweepsServicesOnly(t *testing.T) {
	s := newStore()
	rep := mustRun(t, &fakeNoLister{core{s}, drift{s}, declarer{s}, remover{s}}, runInput(s))
	want := []string{"service/s_old", "service/s_older"}
	if !slices.Equal(s.removed, want) {
		t.Errorf("removed %v, want only services %v", s.removed, want)
	}
	if hasLine(rep.Degraded, "sweep of networks, configs and secrets unavailable: backend lacks ResourceLister") != 1 {
		t.Errorf("Degraded = %q, want the lost sweep of other kinds named", rep.Degraded)
	}
}

func TestRun_withoutLiveDriftKeepsWhatServicesMightUse(t *testing.T) {
	s := newStore()
	rep := mustRun(t, &fakeNoDrift{core{s}, declarer{s}, lister{s}, remover{s}}, runInput(s))
	want := []string{"service/s_old", "service/s_older"}
	if !slices.Equal(s.removed, want) {
		t.Errorf("removed %v, want only services %v", s.removed, want)
	}
	if hasLine(rep.Degraded, "backend lacks LiveDrift") != 1 {
		t.Errorf("Degraded = %q, want LiveDrift named", rep.Degraded)
	}
	if got := reasonOf(rep.Plan, "config/s_conf-aaaaaaaaaa"); !strings.Contains(got, "unknown") {
		t.Errorf("old config kept for %q, want the unknown references named", got)
	}
}

func TestRun_withoutDeclaredListerFallsBackAndReportsUnproven(t *testing.T) {
	s := newStore()
	s.desiredFails["m1"] = true // revision 1 mounted something since deleted
	rep := mustRun(t, &fakeNoDeclared{core{s}, drift{s}, lister{s}, remover{s}}, runInput(s))
	want := []string{"service/s_old", "network/s_back", "config/s_conf-aaaaaaaaaa", "secret/s_key"}
	if !slices.Equal(s.removed, want) {
		t.Errorf("removed %v, want what revision 2 proves: %v", s.removed, want)
	}
	if got := keys(rep.Plan.Unmanaged); !slices.Contains(got, "service/s_older") {
		t.Errorf("Unmanaged = %v, want s_older, which only revision 1 proved", got)
	}
	if len(rep.Plan.Unproven) != 1 || !strings.HasPrefix(rep.Plan.Unproven[0], "revision 1 ") {
		t.Errorf("Unproven = %q, want revision 1", rep.Plan.Unproven)
	}
	if hasLine(rep.Degraded, "backend lacks DeclaredLister") != 1 {
		t.Errorf("Degraded = %q, want DeclaredLister named", rep.Degraded)
	}
}

func TestRun_backendOnlyDeletesNothingAndSaysWhy(t *testing.T) {
	s := newStore()
	rep := mustRun(t, &fakeBackendOnly{core{s}}, runInput(s))
	if len(s.removed) != 0 || len(rep.Plan.Delete) != 0 {
		t.Fatalf("removed=%v plan=%v, want nothing: no record can be converted", s.removed, keys(rep.Plan.Delete))
	}
	if len(rep.Plan.Unproven) != 3 {
		t.Errorf("Unproven = %q, want all three revisions", rep.Plan.Unproven)
	}
	for _, c := range []string{"ResourceLister", "DeclaredLister", "ResourceRemover"} {
		if hasLine(rep.Degraded, "backend lacks "+c) == 0 {
			t.Errorf("Degraded = %q, want %s named", rep.Degraded, c)
		}
	}
}

func TestRun_ownStackIsReportedOnceAndNotCounted(t *testing.T) {
	s := newStore()
	for _, id := range []string{"id-s_old", "id-s_older", "id-s_back", "id-s_conf-aaaaaaaaaa", "id-s_key"} {
		s.removeErr[id] = fmt.Errorf("remove %s: %w", id, capability.ErrOwnStack)
	}
	rep := mustRun(t, &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, runInput(s))
	if !rep.OwnStack {
		t.Fatal("OwnStack not set")
	}
	if len(rep.Failed) != 0 || len(rep.Failures) != 0 {
		t.Errorf("Failed=%v Failures=%v, want a refusal not counted as failure", rep.Failed, rep.Failures)
	}
	if n := hasLine(rep.Messages(), "own stack"); n != 1 {
		t.Errorf("own stack reported %d times in %q, want once", n, rep.Messages())
	}
}

func TestRun_failuresAreCountedAndReportedAfterThree(t *testing.T) {
	s := newStore()
	s.removeErr["id-s_conf-aaaaaaaaaa"] = errors.New("config is in use by service s_other")
	b := &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}
	in := runInput(s)
	for pass := 1; pass <= StuckAfter; pass++ {
		rep := mustRun(t, b, in)
		if got := rep.Failures["config/s_conf-aaaaaaaaaa"]; got != pass {
			t.Fatalf("pass %d: count %d, want %d", pass, got, pass)
		}
		stuck := hasLine(rep.Messages(), "3 times in a row")
		if (pass == StuckAfter) != (stuck == 1) || len(rep.Stuck()) != stuck {
			t.Errorf("pass %d: stuck lines %d, Stuck() %v", pass, stuck, rep.Stuck())
		}
		in.Failures = rep.Failures
	}
	delete(s.removeErr, "id-s_conf-aaaaaaaaaa")
	rep := mustRun(t, b, in)
	if len(rep.Failures) != 0 || !slices.Contains(keys(rep.Removed), "config/s_conf-aaaaaaaaaa") {
		t.Errorf("after the cause went: Failures=%v Removed=%v, want the config removed and forgotten", rep.Failures, keys(rep.Removed))
	}
}

func TestRun_aServiceThatStaysDefersWhatItUses(t *testing.T) {
	s := newStore()
	s.removeErr["id-s_old"] = errors.New("daemon timeout")
	rep := mustRun(t, &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, runInput(s))
	if got, want := keys(rep.Deferred), []string{"network/s_back", "config/s_conf-aaaaaaaaaa", "secret/s_key"}; !slices.Equal(got, want) {
		t.Errorf("Deferred = %v, want %v", got, want)
	}
	if want := map[string]int{"service/s_old": 1}; !maps.Equal(rep.Failures, want) {
		t.Errorf("Failures = %v, want only the service counted: %v", rep.Failures, want)
	}
}

func TestRun_aFailedReadDeletesNothing(t *testing.T) {
	s := newStore()
	s.listErr = errors.New("daemon unreachable")
	_, err := Run(context.Background(), &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, runInput(s))
	if err == nil || len(s.removed) != 0 {
		t.Fatalf("err=%v removed=%v, want an error and nothing removed", err, s.removed)
	}
}

func TestRefsOf(t *testing.T) {
	web := service("s_web", []string{"s_default"}, []string{"s_conf-bbbbbbbbbb"}, []string{"s_key"})
	prev := service("s_web", nil, []string{"s_conf-aaaaaaaaaa"}, nil).Spec
	web.PreviousSpec = &prev
	web.Spec.TaskTemplate.ContainerSpec.Mounts = append(web.Spec.TaskTemplate.ContainerSpec.Mounts,
		mountVolume("s_data"))
	refs := RefsOf(map[string]swarm.Service{"s_web": web}, ids("s_default"))
	for _, k := range []string{"network/s_default", "config/s_conf-bbbbbbbbbb", "config/s_conf-aaaaaaaaaa", "secret/s_key", "volume/s_data"} {
		if !slices.Equal(refs[k], []string{"s_web"}) {
			t.Errorf("refs[%s] = %v, want [s_web]", k, refs[k])
		}
	}
}

func mountVolume(name string) mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: name, Target: "/data"}
}

// together is capability.LiveResources over the store. It reads the store
// directly, so a sweep that used the separate reads (which fail when
// listErr is set) instead would fail.
type together struct{ *store }

func (f together) LiveResources(ctx context.Context, _ string) (capability.Resources, error) {
	s := *f.store
	s.listErr = nil
	o, _ := stamper{&s}.LiveOwners(ctx, "")
	return capability.Resources{
		Networks: maps.Clone(s.networks), Configs: maps.Clone(s.configs), Secrets: maps.Clone(s.secrets),
		Services: maps.Clone(s.services), Owners: o,
	}, nil
}

type fakeTogether struct {
	fullFake
	together
}

var (
	_ capability.LiveResources = (*fakeTogether)(nil)
	_ capability.OwnerStamps   = (*fakeTogether)(nil)
)

func TestRun_aBackendReadingAStacksResourcesTogetherIsSweptFromThatOneRead(t *testing.T) {
	s := newStore()
	s.listErr = errors.New("a separate listing was used")
	b := &fakeTogether{fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, together{s}}
	rep := mustRun(t, b, runInput(s))
	if !slices.Equal(s.removed, everyRemoval) {
		t.Errorf("removed %v, want %v", s.removed, everyRemoval)
	}
	if got := keys(rep.Plan.Unmanaged); !slices.Equal(got, []string{"service/s_debug"}) {
		t.Errorf("Unmanaged = %v, want the hand-made service", got)
	}
	if len(rep.Degraded) != 0 {
		t.Errorf("Degraded = %q, want nothing lost", rep.Degraded)
	}
}

// volumes is capability.VolumeSweeper, SwarmSizer and SwarmNodeNamer over a
// store, counting the node listings.
type volumes struct {
	*store
	live      map[string]string
	nodes     []string
	nodeReads *int
}

func (f volumes) LiveVolumes(context.Context, string) (map[string]string, error) {
	out := map[string]string{} // a listing, even an empty one, is never nil
	maps.Copy(out, f.live)
	return out, nil
}

func (f volumes) RemoveVolume(_ context.Context, name string) error {
	f.removed = append(f.removed, Key(KindVolume, name))
	return nil
}

func (f volumes) SwarmNodes(context.Context) (int, error) {
	*f.nodeReads++
	return len(f.nodes), nil
}

func (f volumes) SwarmNodeNames(context.Context) ([]string, error) {
	*f.nodeReads++
	return f.nodes, nil
}

type fakeVolumes struct {
	fullFake
	volumes
}

// The node listing answers only questions about volumes: a stack with none
// listed and none ever declared sweeps without it, and one with a volume on
// either side still gets the node count and names its nodes.
func TestRun_theNodesAreListedOnlyForAStackWithVolumes(t *testing.T) {
	for _, tt := range []struct {
		name      string
		live      map[string]string
		declared  bool
		wantReads int
	}{
		{name: "no volume anywhere", wantReads: 0},
		{name: "a volume on the node", live: map[string]string{"s_data": "s_data"}, wantReads: 2},
		{name: "a volume an earlier revision declared", declared: true, wantReads: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore()
			if tt.declared {
				s.manifests["m2"].Volumes = []string{"s_data"}
			}
			reads := 0
			b := &fakeVolumes{fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}},
				volumes{store: s, live: tt.live, nodes: []string{"edge-1", "edge-2"}, nodeReads: &reads}}
			rep := mustRun(t, b, runInput(s))
			if reads != tt.wantReads {
				t.Errorf("node listings = %d, want %d", reads, tt.wantReads)
			}
			if tt.declared {
				var kept []string
				for _, it := range rep.Plan.Kept {
					kept = append(kept, it.Key()+": "+it.Reason)
				}
				if !slices.ContainsFunc(kept, func(k string) bool {
					return strings.HasPrefix(k, "volume/s_data") && strings.Contains(k, "each node (edge-1, edge-2)")
				}) {
					t.Errorf("the volume an earlier revision declared is not kept with its nodes named: %q", kept)
				}
			}
		})
	}
}
