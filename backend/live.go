package backend

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

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
	// What a deploy writes; DeployStack says what it dropped.
	s.ForAPIVersion(b.fieldsAPIVersion(ctx))
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
	list, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live services of %s: %w", stack, err)
	}
	out := make(map[string]swarm.Service, len(list.Items))
	for _, s := range list.Items {
		out[s.Spec.Name] = s
	}
	return out, nil
}

// LiveServicesOf returns the services of several stacks, by stack and then
// by scoped name, from one service listing; every requested stack is in the
// map, with an empty map when it has none.
func (b *Backend) LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error) {
	out := make(map[string]map[string]swarm.Service, len(stacks))
	if len(stacks) == 0 {
		return out, nil
	}
	for _, st := range stacks {
		out[st] = map[string]swarm.Service{}
	}
	// One stack is filtered by the daemon; several are listed as every
	// stack's services and picked here, since label filters only combine
	// as "and".
	f := make(client.Filters).Add("label", LabelNamespace)
	if len(stacks) == 1 {
		f = namespace(stacks[0])
	}
	list, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("live services of %d stacks: %w", len(stacks), err)
	}
	for _, s := range list.Items {
		if m, ok := out[s.Spec.Labels[LabelNamespace]]; ok {
			m[s.Spec.Name] = s
		}
	}
	return out, nil
}

// APIVersion is the API version the client talks to the daemon with (the
// negotiated one once a request has been made), for reports that depend on
// what the daemon understands.
func (b *Backend) APIVersion() string { return b.api.ClientVersion() }

// LiveNetworkNames maps every network id on the swarm to its name.
//
// A service attached to the node's own host or bridge network holds the id
// of the swarm's stand-in for it, which the listing does not show (it shows
// the node-local network of that name); those two are asked for by name.
//
// Only each network's id and name are decoded, one network at a time (see
// withListBody): the listing is the whole swarm's, read once per
// application's deploy, and the rest of each entry (labels, options, IPAM,
// peers) is most of it.
func (b *Backend) LiveNetworkNames(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	type entry struct {
		ID   string `json:"Id"`
		Name string
	}
	decode := func(r io.Reader) error {
		return eachListed(r, func(n entry) { out[n.ID] = n.Name })
	}
	list, err := b.api.NetworkList(withListBody(ctx, decode), client.NetworkListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range list.Items { // empty unless the answer reached the client undecoded
		out[n.ID] = n.Name
	}
	for _, name := range []string{"host", "bridge"} {
		n, err := b.api.NetworkInspect(ctx, name, client.NetworkInspectOptions{Scope: "swarm"})
		switch {
		case isNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("inspect network %s: %w", name, err)
		default:
			out[n.Network.ID] = n.Network.Name
		}
	}
	return out, nil
}

// LiveNetworks maps the stack's networks, by scoped name, to their ids.
func (b *Backend) LiveNetworks(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.NetworkList(ctx, client.NetworkListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live networks of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list.Items))
	for _, n := range list.Items {
		out[n.Name] = n.ID
	}
	return out, nil
}

// LiveConfigs maps the stack's configs, by name, to their ids. Release
// records carry no namespace label and never appear.
func (b *Backend) LiveConfigs(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live configs of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list.Items))
	for _, c := range list.Items {
		if c.Spec.Labels[LabelRecord] == "" {
			out[c.Spec.Name] = c.ID
		}
	}
	return out, nil
}

// LiveSecrets maps the stack's secrets, by name, to their ids.
func (b *Backend) LiveSecrets(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.SecretList(ctx, client.SecretListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("live secrets of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list.Items))
	for _, s := range list.Items {
		out[s.Spec.Name] = s.ID
	}
	return out, nil
}

// SwarmNodes counts the swarm's nodes, whatever their state.
func (b *Backend) SwarmNodes(ctx context.Context) (int, error) {
	nodes, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	return len(nodes.Items), nil
}

// SwarmNodeNames names the swarm's nodes by hostname, sorted, whatever
// their state.
func (b *Backend) SwarmNodeNames(ctx context.Context) ([]string, error) {
	nodes, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, cmp.Or(n.Description.Hostname, n.ID))
	}
	slices.Sort(names)
	return names, nil
}

// LiveVolumes lists the named volumes carrying the stack's namespace label on
// the node this client talks to.
func (b *Backend) LiveVolumes(ctx context.Context, stack string) (map[string]string, error) {
	list, err := b.api.VolumeList(ctx, client.VolumeListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("list volumes of %s: %w", stack, err)
	}
	out := make(map[string]string, len(list.Items))
	for _, v := range list.Items {
		out[v.Name] = v.Name
	}
	return out, nil
}

// RemoveVolume deletes one named volume; one already gone is not an error,
// and one still in use is refused by the daemon, never forced.
func (b *Backend) RemoveVolume(ctx context.Context, name string) error {
	if err := b.checkOwnVolume(ctx, name); err != nil {
		return err
	}
	if _, err := b.api.VolumeRemove(ctx, name, client.VolumeRemoveOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}
