package backend

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The node's own networks are local in scope on every node, and `docker
// stack deploy` attaches to them as they are. Once allowed, a stack using
// host or bridge deploys; the allowlist still decides (see
// TestGuard_hostNetworkIsExternalToo).
func TestAllowedHostAndBridgeNetworksDeployLikeStackDeploy(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "hostbr")
	swarmtest.Cleanup(t, stack)
	r := renderProject(t, stack, `version: "3.3"
services:
  h:
    image: `+swarmtest.Image+`
    networks: [hostnet]
    deploy: {replicas: 0}
  b:
    image: `+swarmtest.Image+`
    networks: [br]
    deploy: {replicas: 0}
networks:
  hostnet:
    external:
      name: host
  br:
    external:
      name: bridge
`)
	allowed := b.WithAllowedReferences(application.Allow{Networks: []string{"host", "bridge"}})
	if _, _, err := tryDeploy(t, allowed, b.Stats, stack, r, false); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	live := services(t, b, stack)
	for _, svc := range []string{"h", "b"} {
		if n := len(live[svc].Spec.TaskTemplate.Networks); n != 1 {
			t.Errorf("%s attached to %d networks, want 1", svc, n)
		}
	}
	// Unchanged, the second deploy writes nothing.
	if _, writes, err := tryDeploy(t, allowed, b.Stats, stack, r, false); err != nil || writes != 0 {
		t.Errorf("redeploy: %d writes, error %v", writes, err)
	}
}

// A self-named object is the stack's when the deploy creates it or it
// already carries this application's owner stamp; one that exists under
// another owner, or under none, is refused with who has it, and the
// allowlist still lets an application use an existing one on purpose.
func TestGuard_selfNamedObjectsBelongToWhoeverCreatedThem(t *testing.T) {
	t.Parallel()
	const stack = "sn"
	top := `networks:
  n:
    name: team-net
configs:
  c:
    file: ./data.txt
    name: team-conf
secrets:
  s:
    file: ./data.txt
    name: team-secret
volumes:
  v:
    name: team-data
`
	r := renderProject(t, stack, webWith("    networks: [n]\n    configs: [c]\n    secrets: [s]\n    volumes: [\"v:/v\"]\n", top))
	decl, err := compose.Convert(context.Background(), r.Manifest, stack, nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{LabelOwner: "ctl/sn", LabelNamespace: stack}
	theirs := map[string]string{LabelOwner: "ctl/other", LabelNamespace: "other"}
	handMade := map[string]string{}
	all := func(l map[string]string) existingObjects {
		return existingObjects{
			networks: map[string]map[string]string{"team-net": l}, configs: map[string]map[string]string{"team-conf": l},
			secrets: map[string]map[string]string{"team-secret": l}, volumes: map[string]map[string]string{"team-data": l},
		}
	}
	req := charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Labels: map[string]string{LabelOwner: "ctl/sn"}}
	fields := []string{"networks.n", "configs.c", "secrets.s", "volumes.v"}

	if err := (&Backend{}).guard(req, decl, nil, all(mine)); err != nil {
		t.Errorf("already this application's: refused: %v", err)
	}
	// Absent, a network, config or secret is created with the owner stamp;
	// a volume is created by whichever node first mounts it, so absence on
	// one node proves nothing: it needs a record of this application.
	err = (&Backend{}).guard(req, decl, nil, existingObjects{})
	wantRefused(t, err, "volumes.v", "team-data", "allow.volumes")
	if n := len(faults(err)); n != 1 {
		t.Errorf("absent: %d refusals, want the volume's only: %v", n, err)
	}
	recorded := existingObjects{recordedVolumes: map[string]bool{"team-data": true}}
	if err := (&Backend{}).guard(req, decl, nil, recorded); err != nil {
		t.Errorf("absent, volume in a record of this application: refused: %v", err)
	}
	err = (&Backend{}).guard(req, decl, nil, all(theirs))
	for _, f := range fields[:3] {
		wantRefused(t, err, f, "already exists", "ctl/other")
	}
	wantRefused(t, err, "volumes.v", `stack "other"`)
	err = (&Backend{}).guard(req, decl, nil, all(handMade))
	for _, f := range fields {
		wantRefused(t, err, f, "no stack")
	}
	if n := len(faults(err)); n != 4 {
		t.Errorf("%d refusals, want one per object: %v", n, err)
	}
	// Adopting a stack takes over what its docker stack deploy left.
	adopt := req
	adopt.Adopt = true
	if err := (&Backend{}).guard(adopt, decl, nil, all(map[string]string{LabelNamespace: stack})); err != nil {
		t.Errorf("adopted: refused: %v", err)
	}
	allowed := (&Backend{}).WithAllowedReferences(application.Allow{
		Networks: []string{"team-net"}, Configs: []string{"team-conf"}, Secrets: []string{"team-secret"}, Volumes: []string{"team-data"},
	}).(*Backend)
	if err := allowed.guard(req, decl, nil, all(theirs)); err != nil {
		t.Errorf("allowed: refused: %v", err)
	}
}

// On the swarm: a stack that names its objects deploys them with its owner
// stamp and redeploys over them; another application's stack naming the
// same objects is refused before any write, naming the owner.
func TestSelfNamedObjectsDeployAndAreRefusedToAnotherOwner(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "selfn")
	other := swarmtest.Name(t, "selfo")
	swarmtest.Cleanup(t, stack)
	swarmtest.Cleanup(t, other)
	file := func(s string) string {
		return webWith("    networks: [n]\n    configs: [c]\n    secrets: [s]\n    deploy: {replicas: 0}\n", `networks:
  n:
    name: `+stack+`-net
configs:
  c:
    file: ./data.txt
    name: `+stack+`-conf
secrets:
  s:
    file: ./data.txt
    name: `+stack+`-secret
`)
	}
	r := renderProject(t, stack, file(stack))
	if _, _, err := tryDeploy(t, b, b.Stats, stack, r, false); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	ctx := context.Background()
	configs, err := b.LiveConfigs(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := configs[stack+"-conf"]; !ok {
		t.Fatalf("self-named config not listed in the stack's namespace: %v", configs)
	}
	res, err := b.api.ConfigInspect(ctx, configs[stack+"-conf"], client.ConfigInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Config
	if got := c.Spec.Labels[LabelOwner]; got != "ctl/"+stack {
		t.Errorf("config owner stamp %q, want ctl/%s", got, stack)
	}
	if _, writes, err := tryDeploy(t, b, b.Stats, stack, r, false); err != nil || writes != 0 {
		t.Errorf("redeploy: %d writes, error %v", writes, err)
	}

	ro := renderProject(t, other, file(stack))
	_, writes, err := tryDeploy(t, b, b.Stats, other, ro, false)
	for _, f := range []string{"networks.n", "configs.c", "secrets.s"} {
		wantRefused(t, err, f, "ctl/"+stack)
	}
	assertNothingCreated(t, b, other, writes)
}

// A manifest naming a service Swarm would refuse (300 characters) is
// refused before the first write, as bad input naming the field, although
// its network, config and other service are valid and come first.
func TestOverlongServiceNameIsRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "longn")
	swarmtest.Cleanup(t, stack)
	r := renderProject(t, stack, `version: "3.8"
services:
  a:
    image: `+swarmtest.Image+`
    networks: [n]
    configs: [c]
    deploy: {replicas: 0}
  web:
    image: `+swarmtest.Image+`
    networks: [n]
    deploy: {replicas: 0}
networks:
  n: {}
configs:
  c:
    file: ./data.txt
`)
	long := strings.Repeat("x", 300)
	bad := *r
	bad.Manifest = strings.Replace(r.Manifest, "\n    web:\n", "\n    "+long+":\n", 1)
	if bad.Manifest == r.Manifest {
		t.Fatal("manifest has no service web to rename")
	}
	_, writes, err := tryDeploy(t, b, b.Stats, stack, &bad, false)
	wantRefused(t, err, "services."+long, "Swarm allows 63", "stack prefix included")
	assertNothingCreated(t, b, stack, writes)
}

// Swarm refuses a service attached to the ingress network or to "none",
// but only when it reaches that service; docker stack deploy has created
// the stack's network by then. Flotilla refuses both before any write.
func TestIngressAndNoneNetworksAreRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	for _, net := range []string{"ingress", "none"} {
		stack := swarmtest.Name(t, "net"+net)
		swarmtest.Cleanup(t, stack)
		r := renderProject(t, stack, `version: "3.8"
services:
  a:
    image: `+swarmtest.Image+`
    deploy: {replicas: 0}
  b:
    image: `+swarmtest.Image+`
    networks: [x]
    deploy: {replicas: 0}
networks:
  x: {external: true, name: `+net+`}
`)
		allowed := b.WithAllowedReferences(application.Allow{Networks: []string{net}})
		_, writes, err := tryDeploy(t, allowed, b.Stats, stack, r, false)
		wantRefused(t, err, "networks", `"`+net+`"`)
		assertNothingCreated(t, b, stack, writes)
	}
}
