package backend

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestNamespaceOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, ns string
		ok       bool
	}{
		{"shop_default", "shop", true},
		{"shop_db-data", "shop", true},
		{"shop-2_x_y", "shop-2", true},
		{"Legacy_x", "Legacy", true},
		{"shop-data", "", false},
		{"_x", "", false},
		{"-shop_x", "", false},
		{"shop.v1_x", "", false},
		{"flotilla-lease.ctl", "", false},
		{"", "", false},
	} {
		ns, ok := namespaceOf(tt.name)
		if ns != tt.ns || ok != tt.ok {
			t.Errorf("namespaceOf(%q) = %q, %v; want %q, %v", tt.name, ns, ok, tt.ns, tt.ok)
		}
	}
}

// FuzzNamespaceOf checks the classification every guard decision on a
// declared name starts from: a name in a namespace is exactly that stack's
// prefix and the rest, and the stack is one a scoped name could start with.
func FuzzNamespaceOf(f *testing.F) {
	for _, s := range []string{"shop_default", "a_b_c", "x", "_", "flotilla-release.a.1", "Ab-9_", "a-_b", "é_x", "a\x00_b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ns, ok := namespaceOf(name)
		if !ok {
			if ns != "" {
				t.Fatalf("namespaceOf(%q) = %q without a namespace", name, ns)
			}
			if i := strings.IndexByte(name, '_'); i > 0 && namespaceStackRE.MatchString(name[:i]) {
				t.Fatalf("namespaceOf(%q): %q is a stack name, yet no namespace", name, name[:i])
			}
			return
		}
		if !strings.HasPrefix(name, ns+"_") || strings.Contains(ns, "_") || !namespaceStackRE.MatchString(ns) {
			t.Fatalf("namespaceOf(%q) = %q", name, ns)
		}
		// A stack owns a name exactly when the name is in its namespace.
		g := &guardCheck{stack: ns}
		if !g.own(name) {
			t.Fatalf("stack %q does not own %q", ns, name)
		}
	})
}

// The "flotilla-" prefix is the controller's, for every kind and whatever
// the allowlist says; only the controller's own stack may use names under
// it, and never a lease or a record.
func TestGuard_reservedPrefixWhateverTheAllowlist(t *testing.T) {
	t.Parallel()
	const stack = "rp"
	file := webWith("    networks: [n]\n    configs: [c]\n    secrets: [s, ctl]\n    volumes: [\"v:/v\"]\n", `networks:
  n:
    name: flotilla-net
configs:
  c:
    file: ./data.txt
    name: flotilla-lease.ctl
secrets:
  s:
    file: ./data.txt
    name: flotilla-token
  ctl:
    external: true
    name: flotilla-applications-1
volumes:
  v:
    name: flotilla-data
`)
	r := renderProject(t, stack, file)
	decl, err := compose.Convert(context.Background(), r.Manifest, stack, nil)
	if err != nil {
		t.Fatal(err)
	}
	allow := application.Allow{
		Networks: []string{"flotilla-net"}, Configs: []string{"flotilla-lease.ctl"},
		Secrets: []string{"flotilla-token", "flotilla-applications-1"}, Volumes: []string{"flotilla-data"},
	}
	req := charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Labels: map[string]string{LabelOwner: "ctl/rp"}}
	other := (&Backend{}).WithAllowedReferences(allow).(*Backend)
	err = other.guard(req, decl, nil, existingObjects{})
	for _, f := range []string{"networks.n", "configs.c", "secrets.s", "secrets.ctl", "volumes.v"} {
		wantRefused(t, err, f, "reserved", "flotilla-")
	}

	self := (&Backend{self: Self{Stack: stack}}).WithAllowedReferences(allow).(*Backend)
	err = self.guard(req, decl, nil, existingObjects{volumes: map[string]map[string]string{"flotilla-data": {LabelNamespace: stack}}})
	wantRefused(t, err, "configs.c", "flotilla-lease.ctl", "reserved")
	if n := len(faults(err)); n != 1 {
		t.Errorf("the controller's own stack: %d refusals, want the lease's only: %v", n, err)
	}

	// A stack whose own name starts with the prefix keeps its scoped names.
	scoped := renderProject(t, "flotilla-x", webWith("    networks: [n]\n", "networks:\n  n: {}\n"))
	sdecl, err := compose.Convert(context.Background(), scoped.Manifest, "flotilla-x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Backend{}).guard(charts.DeployRequest{Stack: "flotilla-x", Manifest: scoped.Manifest}, sdecl, nil, existingObjects{}); err != nil {
		t.Errorf("stack flotilla-x, its own network: %v", err)
	}
}

// An object under the stack's own prefix that exists already is used only
// as this application's: its owner stamp, or this stack's namespace label
// with adopt or once the application runs the stack.
func TestGuard_scopedObjectsMustBeThisApplications(t *testing.T) {
	t.Parallel()
	const stack = "vs"
	r := renderProject(t, stack, webWith("    networks: [default]\n    configs: [c]\n    secrets: [s]\n", `networks:
  default: {}
configs:
  c: {file: ./data.txt}
secrets:
  s: {file: ./data.txt}
`))
	decl, err := compose.Convert(context.Background(), r.Manifest, stack, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := func(l map[string]string) existingObjects {
		e := existingObjects{networks: map[string]map[string]string{}, configs: map[string]map[string]string{}, secrets: map[string]map[string]string{}}
		for name := range decl.Networks {
			e.networks[name] = l
		}
		for name := range decl.Configs {
			e.configs[name] = l
		}
		for name := range decl.Secrets {
			e.secrets[name] = l
		}
		return e
	}
	req := charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Labels: map[string]string{LabelOwner: "ctl/vs"}}
	fields := []string{"networks.default", "configs.c", "secrets.s"}

	if err := (&Backend{}).guard(req, decl, nil, all(map[string]string{LabelOwner: "ctl/vs", LabelNamespace: stack})); err != nil {
		t.Errorf("this application's: refused: %v", err)
	}
	err = (&Backend{}).guard(req, decl, nil, all(map[string]string{LabelOwner: "ctl/evil", LabelNamespace: "evil"}))
	for _, f := range fields {
		wantRefused(t, err, f, "this stack's prefix", "ctl/evil")
	}
	err = (&Backend{}).guard(req, decl, nil, all(map[string]string{LabelNamespace: "evil"}))
	for _, f := range fields {
		wantRefused(t, err, f, "this stack's prefix", `stack "evil"`)
	}
	legacy := all(map[string]string{LabelNamespace: stack})
	err = (&Backend{}).guard(req, decl, nil, legacy)
	for _, f := range fields {
		wantRefused(t, err, f, "adopt")
	}
	adopt := req
	adopt.Adopt = true
	if err := (&Backend{}).guard(adopt, decl, nil, legacy); err != nil {
		t.Errorf("adopted: refused: %v", err)
	}
	live := map[string]swarm.Service{stack + "_web": {Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Labels: map[string]string{LabelOwner: "ctl/vs"}}}}}
	if err := (&Backend{}).guard(req, decl, live, legacy); err != nil {
		t.Errorf("unstamped leftovers of a stack this application runs: refused: %v", err)
	}
}

// On the swarm, the victim's side: a network under the victim's prefix made
// before its first deploy by another application is not used; the deploy is
// refused naming its maker, and writes nothing.
func TestSquattedScopedNetworkIsRefusedToTheVictim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	victim, evil := swarmtest.Name(t, "nsvic"), swarmtest.Name(t, "nsevil")
	swarmtest.Cleanup(t, evil) // after the victim's, whose service uses the network
	swarmtest.Cleanup(t, victim)
	if _, err := swarmtest.Client(t).NetworkCreate(ctx, victim+"_default", client.NetworkCreateOptions{
		Driver: "overlay", Attachable: true,
		Labels: map[string]string{LabelNamespace: evil, LabelOwner: "ctl/" + evil},
	}); err != nil {
		t.Fatal(err)
	}
	r := renderProject(t, victim, webWith("    deploy: {replicas: 0}\n", ""))
	_, writes, err := tryDeploy(t, b, b.Stats, victim, r, false)
	wantRefused(t, err, "networks", victim+"_default", "ctl/"+evil)
	assertNothingCreated(t, b, victim, writes)

	// The squatter's own repository cannot make it either, and is told
	// whose namespace it is once the victim runs.
	svc := renderProject(t, victim, webWith("    deploy: {replicas: 0}\n", ""))
	ok := b.WithAllowedReferences(application.Allow{Networks: []string{victim + "_default"}})
	if _, _, err := tryDeploy(t, ok, b.Stats, victim, svc, false); err != nil {
		t.Fatalf("victim with the squatted network allowed on purpose: %v", err)
	}
	sq := renderProject(t, evil, webWith("    networks: [n]\n", "networks:\n  n:\n    name: "+victim+"_back\n"))
	_, writes, err = tryDeploy(t, b, b.Stats, evil, sq, false)
	wantRefused(t, err, "networks.n", victim+"_back", `namespace of stack "`+victim+`"`, "ctl/"+victim)
	if writes != 0 {
		t.Errorf("squatter's deploy sent %d writes", writes)
	}
}

// A self-named volume outside every namespace deploys when one of this
// application's release records declared it, and not on another
// application's record.
func TestSelfNamedVolumeNeedsARecordOrAnAllowEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "nsvol")
	swarmtest.Cleanup(t, stack)
	vol := stack + "-data"
	r := renderProject(t, stack, webWith("    volumes: [\"v:/v\"]\n    deploy: {replicas: 0}\n", "volumes:\n  v:\n    name: "+vol+"\n"))
	_, writes, err := tryDeploy(t, b, b.Stats, stack, r, false)
	wantRefused(t, err, "volumes.v", vol, "allow.volumes")
	assertNothingCreated(t, b, stack, writes)

	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 1, Owner: "ctl/someone-else", Manifest: r.Manifest}, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = tryDeploy(t, b, b.Stats, stack, r, false)
	wantRefused(t, err, "volumes.v", vol)

	if err := b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 2, Owner: "ctl/" + stack, Manifest: r.Manifest}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tryDeploy(t, b, b.Stats, stack, r, false); err != nil {
		t.Fatalf("volume a record of this application declared: %v", err)
	}
}
