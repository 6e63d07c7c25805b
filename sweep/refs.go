package sweep

import (
	"slices"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
)

// RefsOf builds Live.ServiceRefs from live services keyed by scoped name:
// for every network, config, secret and named volume one of them uses, the
// services that use it. For configs and secrets the previous spec counts as
// much as the current one, since a Swarm rollback goes back to it and needs
// what it mounted. Networks and volumes count from the current spec only: a
// rollback cannot reattach a network the repository removed anyway, and
// keeping one for the previous spec would keep it until that service next
// changes, however long that is.
//
// networks is the stack's network listing, scoped name to id: a service
// names its attachments by id, and the sweep knows networks by name.
func RefsOf(services map[string]swarm.Service, networks map[string]string) map[string][]string {
	byID := make(map[string]string, len(networks))
	for name, id := range networks {
		byID[id] = name
	}
	out := map[string][]string{}
	add := func(k Kind, name, service string) {
		if name != "" {
			key := Key(k, name)
			if !slices.Contains(out[key], service) {
				out[key] = append(out[key], service)
			}
		}
	}
	for _, name := range sortedKeys(services) {
		s := services[name]
		for _, n := range s.Spec.TaskTemplate.Networks {
			if nn, ok := byID[n.Target]; ok {
				add(KindNetwork, nn, name)
			} else {
				add(KindNetwork, n.Target, name)
			}
		}
		if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
			for _, m := range cs.Mounts {
				if m.Type == mount.TypeVolume {
					add(KindVolume, m.Source, name)
				}
			}
		}
		for _, spec := range []*swarm.ServiceSpec{&s.Spec, s.PreviousSpec} {
			if spec == nil {
				continue
			}
			cs := spec.TaskTemplate.ContainerSpec
			if cs == nil {
				continue
			}
			for _, c := range cs.Configs {
				add(KindConfig, c.ConfigName, name)
			}
			for _, c := range cs.Secrets {
				add(KindSecret, c.SecretName, name)
			}
		}
	}
	return out
}
