package backend

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
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
