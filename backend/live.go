package backend

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/compose"
)

// DesiredServices converts manifest against the swarm as it is, resolving
// config and secret references to live ids, so the specs compare with
// LiveServices field by field.
func (b *Backend) DesiredServices(ctx context.Context, manifest, stack string) (*compose.Stack, error) {
	s, err := compose.Convert(ctx, manifest, stack, liveResolver{b})
	if err != nil {
		return nil, fmt.Errorf("desired services of %s: %w", stack, err)
	}
	return s, nil
}

// DeclaredResources converts manifest without resolving anything, so a
// stored revision whose configs are gone still lists what it declared.
func (b *Backend) DeclaredResources(ctx context.Context, manifest, stack string) (*compose.Stack, error) {
	s, err := compose.Convert(ctx, manifest, stack, nil)
	if err != nil {
		return nil, fmt.Errorf("declared resources of %s: %w", stack, err)
	}
	return s, nil
}

// LiveServices returns the stack's services by scoped name.
func (b *Backend) LiveServices(ctx context.Context, stack string) (map[string]swarm.Service, error) {
	list, err := b.api.ServiceList(ctx, swarm.ServiceListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live services of %s: %w", stack, err)
	}
	out := make(map[string]swarm.Service, len(list))
	for _, s := range list {
		out[s.Spec.Name] = s
	}
	return out, nil
}

// LiveNetworkNames maps every network id on the swarm to its name.
func (b *Backend) LiveNetworkNames(ctx context.Context) (map[string]string, error) {
	list, err := b.api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := make(map[string]string, len(list))
	for _, n := range list {
		out[n.ID] = n.Name
	}
	return out, nil
}

// LiveNetworks maps the stack's networks, by scoped name, to their ids.
func (b *Backend) LiveNetworks(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.NetworkList(ctx, network.ListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live networks of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list))
	for _, n := range list {
		out[n.Name] = n.ID
	}
	return out, nil
}

// LiveConfigs maps the stack's configs, by name, to their ids. Release
// records carry no namespace label and never appear.
func (b *Backend) LiveConfigs(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.ConfigList(ctx, swarm.ConfigListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live configs of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list))
	for _, c := range list {
		if c.Spec.Labels[LabelRecord] == "" {
			out[c.Spec.Name] = c.ID
		}
	}
	return out, nil
}

// LiveSecrets maps the stack's secrets, by name, to their ids.
func (b *Backend) LiveSecrets(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.SecretList(ctx, swarm.SecretListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live secrets of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list))
	for _, s := range list {
		out[s.Spec.Name] = s.ID
	}
	return out, nil
}

// SwarmNodes counts the swarm's nodes, whatever their state.
func (b *Backend) SwarmNodes(ctx context.Context) (int, error) {
	nodes, err := b.api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	return len(nodes), nil
}
