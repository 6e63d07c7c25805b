package backend

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"

	"github.com/flotilla-gitops/flotilla/compose"
)

// existingObjects holds, by kind, the labels of the objects already on the
// swarm under the names a stack chose itself; a name that is absent has no
// entry. Scoped names need no such look-up: their prefix is the stack's.
type existingObjects struct {
	networks, configs, secrets, volumes map[string]map[string]string
}

func (e existingObjects) of(kind string) map[string]map[string]string {
	switch kind {
	case "config":
		return e.configs
	case "secret":
		return e.secrets
	}
	return nil
}

// readExisting looks up the self-named objects decl declares: networks in
// the listing the plan already read, configs, secrets and volumes with one
// request per kind, and only for a kind that has one.
func (b *Backend) readExisting(ctx context.Context, stack string, decl *compose.Stack, nets map[string]network.Summary) (existingObjects, error) {
	scoped := func(name string) bool { return strings.HasPrefix(name, stack+"_") }
	e := existingObjects{
		networks: map[string]map[string]string{}, configs: map[string]map[string]string{},
		secrets: map[string]map[string]string{}, volumes: map[string]map[string]string{},
	}
	for name := range decl.Networks {
		if n, ok := nets[name]; ok && !scoped(name) {
			e.networks[name] = n.Labels
		}
	}
	var configs, secrets, volumes []string
	for name := range decl.Configs {
		if !scoped(name) {
			configs = append(configs, name)
		}
	}
	for name := range decl.Secrets {
		if !scoped(name) {
			secrets = append(secrets, name)
		}
	}
	for _, name := range decl.Volumes {
		if !scoped(name) {
			volumes = append(volumes, name)
		}
	}
	if len(configs) > 0 {
		list, err := b.api.ConfigList(ctx, swarm.ConfigListOptions{Filters: nameFilter(configs)})
		if err != nil {
			return e, fmt.Errorf("list configs: %w", err)
		}
		want := setOf(configs)
		for _, c := range list {
			if want[c.Spec.Name] {
				e.configs[c.Spec.Name] = c.Spec.Labels
			}
		}
	}
	if len(secrets) > 0 {
		list, err := b.api.SecretList(ctx, swarm.SecretListOptions{Filters: nameFilter(secrets)})
		if err != nil {
			return e, fmt.Errorf("list secrets: %w", err)
		}
		want := setOf(secrets)
		for _, s := range list {
			if want[s.Spec.Name] {
				e.secrets[s.Spec.Name] = s.Spec.Labels
			}
		}
	}
	if len(volumes) > 0 {
		list, err := b.api.VolumeList(ctx, volume.ListOptions{Filters: nameFilter(volumes)})
		if err != nil {
			return e, fmt.Errorf("list volumes: %w", err)
		}
		want := setOf(volumes)
		for _, v := range list.Volumes {
			if want[v.Name] {
				e.volumes[v.Name] = v.Labels
			}
		}
	}
	return e, nil
}
