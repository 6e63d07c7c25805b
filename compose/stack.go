package compose

import (
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// Stack is a manifest converted to the swarm objects it declares. Every map
// is keyed by the name the object has on the swarm, so a Stack and a live
// listing can be matched without knowing ids.
type Stack struct {
	// Namespace is the stack name every object is scoped to.
	Namespace string
	// Services maps the scoped service name (stack_web) to its spec.
	Services map[string]swarm.ServiceSpec
	// Networks maps the scoped names of the networks the stack creates.
	Networks map[string]client.NetworkCreateOptions
	// ExternalNetworks lists networks the stack uses but does not create.
	ExternalNetworks []string
	// Configs maps the content-hashed scoped names of the configs the stack
	// creates to their specs, data included.
	Configs map[string]swarm.ConfigSpec
	// Secrets maps the content-hashed scoped names of the secrets the stack
	// creates. Data is filled only when the plaintext is known (a deploy);
	// a stack converted from a stored manifest has names and labels only.
	Secrets map[string]swarm.SecretSpec
	// ExternalConfigs and ExternalSecrets list what the stack mounts without
	// creating it.
	ExternalConfigs []string
	ExternalSecrets []string
	// Volumes lists the scoped names of named volumes the stack declares
	// and does not mark external.
	Volumes []string
	// ExternalVolumes lists named volumes the stack mounts without owning.
	ExternalVolumes []string
}
