package drift_test

import (
	"fmt"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/drift"
)

// A live spec that differs only by what the daemon writes (a pinned digest,
// a network id, Flotilla's own labels) reports just the one real change.
func ExampleDiff() {
	desired := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Labels: map[string]string{"com.docker.stack.namespace": "shop"}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: "flotilla-test/app:1", Env: []string{"LOG_LEVEL=info", "API_TOKEN=s3cr3t"}},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: "shop_default", Aliases: []string{"web"}}},
		},
	}
	live := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Labels: map[string]string{"com.docker.stack.namespace": "shop", "io.flotilla.revision": "4"}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:     "flotilla-test/app:1@sha256:0000000000000000000000000000000000000000000000000000000000000000",
				Env:       []string{"API_TOKEN=rotated-by-hand", "LOG_LEVEL=info"},
				Isolation: "default",
			},
			Networks: []swarm.NetworkAttachmentConfig{{Target: "x1y2z3", Aliases: []string{"web"}}},
			Runtime:  swarm.RuntimeContainer,
		},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeVIP},
	}
	for _, c := range drift.Diff(desired, live, drift.Options{NetworkNames: map[string]string{"x1y2z3": "shop_default"}}) {
		fmt.Printf("%s: %s -> %s (masked %t)\n", c.Field, c.Desired, c.Live, c.Masked)
	}
	// Output:
	// env.API_TOKEN: *** -> *** (masked true)
}
