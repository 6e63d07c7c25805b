package backend

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// The ids a deploy resolves: configs and secrets it created, or that the
// swarm already holds, and the small name helpers the deploy uses.

// resolvePending swaps the placeholder ids of configs and secrets this
// deploy created for their real ids. It copies what it changes, since the
// references are pointers shared with the plan.
func resolvePending(spec *swarm.ServiceSpec, created map[string]string) error {
	cs := spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return nil
	}
	c := *cs
	c.Configs = make([]*swarm.ConfigReference, len(cs.Configs))
	for i, r := range cs.Configs {
		ref := *r
		if strings.HasPrefix(ref.ConfigID, pendingPrefix) {
			id, ok := created[ref.ConfigID]
			if !ok {
				return fmt.Errorf("config %s was not created", ref.ConfigName)
			}
			ref.ConfigID = id
		}
		c.Configs[i] = &ref
	}
	c.Secrets = make([]*swarm.SecretReference, len(cs.Secrets))
	for i, r := range cs.Secrets {
		ref := *r
		if strings.HasPrefix(ref.SecretID, pendingPrefix) {
			id, ok := created[ref.SecretID]
			if !ok {
				return fmt.Errorf("secret %s was not created", ref.SecretName)
			}
			ref.SecretID = id
		}
		c.Secrets[i] = &ref
	}
	if cs.Configs == nil {
		c.Configs = nil
	}
	if cs.Secrets == nil {
		c.Secrets = nil
	}
	spec.TaskTemplate.ContainerSpec = &c
	return nil
}

// mapResolver answers compose.Convert from ids read before the conversion,
// so converting sends no request of its own.
type mapResolver struct {
	configs, secrets map[string]string
}

func (r mapResolver) ConfigIDs(_ context.Context, names []string) (map[string]string, error) {
	return pick("config", r.configs, names)
}

func (r mapResolver) SecretIDs(_ context.Context, names []string) (map[string]string, error) {
	return pick("secret", r.secrets, names)
}

func pick(kind string, ids map[string]string, names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	var missing []string
	for _, n := range names {
		id, ok := ids[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		out[n] = id
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s not found on the swarm: %s", kind, strings.Join(missing, ", "))
	}
	return out, nil
}

// configIDs returns name to id for those of names that exist, in one
// request.
func (b *Backend) configIDs(ctx context.Context, names []string) (map[string]string, error) {
	objs, err := b.configsNamed(ctx, names)
	return idsOf(objs), err
}

// secretIDs is configIDs for secrets.
func (b *Backend) secretIDs(ctx context.Context, names []string) (map[string]string, error) {
	objs, err := b.secretsNamed(ctx, names)
	return idsOf(objs), err
}

// configsNamed returns the id and labels of those of names that exist, in
// one request. The daemon's name filter matches prefixes, so names are
// matched exactly here.
func (b *Backend) configsNamed(ctx context.Context, names []string) (map[string]listedObject, error) {
	out := make(map[string]listedObject)
	if len(names) == 0 {
		return out, nil
	}
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: nameFilter(names)})
	if err != nil {
		return nil, fmt.Errorf("list configs: %w", err)
	}
	want := setOf(names)
	for _, c := range list.Items {
		if want[c.Spec.Name] {
			out[c.Spec.Name] = listedObject{id: c.ID, labels: c.Spec.Labels}
		}
	}
	return out, nil
}

// secretsNamed is configsNamed for secrets.
func (b *Backend) secretsNamed(ctx context.Context, names []string) (map[string]listedObject, error) {
	out := make(map[string]listedObject)
	if len(names) == 0 {
		return out, nil
	}
	list, err := b.api.SecretList(ctx, client.SecretListOptions{Filters: nameFilter(names)})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	want := setOf(names)
	for _, s := range list.Items {
		if want[s.Spec.Name] {
			out[s.Spec.Name] = listedObject{id: s.ID, labels: s.Spec.Labels}
		}
	}
	return out, nil
}

// liveResolver resolves against the swarm as it is, one request per kind
// asked for. It serves conversions that are not deploys (live drift).
type liveResolver struct{ b *Backend }

func (r liveResolver) ConfigIDs(ctx context.Context, names []string) (map[string]string, error) {
	ids, err := r.b.configIDs(ctx, names)
	if err != nil {
		return nil, err
	}
	return pick("config", ids, names)
}

func (r liveResolver) SecretIDs(ctx context.Context, names []string) (map[string]string, error) {
	ids, err := r.b.secretIDs(ctx, names)
	if err != nil {
		return nil, err
	}
	return pick("secret", ids, names)
}

func namespace(stack string) client.Filters {
	return make(client.Filters).Add("label", LabelNamespace+"="+stack)
}

func nameFilter(names []string) client.Filters {
	f := make(client.Filters)
	for _, n := range names {
		f.Add("name", n)
	}
	return f
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// unscoped strips the stack prefix from a scoped name.
func unscoped(stack, name string) string {
	return strings.TrimPrefix(name, stack+"_")
}
