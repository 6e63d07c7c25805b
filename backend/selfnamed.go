package backend

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/client"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/compose"
)

// maxForeignNamespaces bounds the namespaces a refused deploy asks about to
// name their owners: one request each, for a refusal's wording only.
const maxForeignNamespaces = 4

// existingObjects holds, by kind, the labels of the objects already on the
// swarm under the names a stack declares, scoped and self-named alike; a
// name that is absent has no entry.
type existingObjects struct {
	networks, configs, secrets, volumes map[string]map[string]string
	// namespaceOwners holds the owner stamps found on the services of each
	// other stack's namespace a declared name lies in.
	namespaceOwners map[string][]string
	// recordedVolumes are the self-named volumes this application's own
	// release records declare.
	recordedVolumes map[string]bool
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

// ownersOf is " (application a, b)" naming who is known to own stack ns, or
// who owns the object itself (labels), or "".
func (e existingObjects) ownersOf(ns string, labels map[string]string) string {
	owners := slices.Clone(e.namespaceOwners[ns])
	if o := labels[LabelOwner]; o != "" && !slices.Contains(owners, o) {
		owners = append(owners, o)
	}
	if len(owners) == 0 {
		return ""
	}
	slices.Sort(owners)
	return ", deployed by " + strings.Join(owners, ", ")
}

// namespaceStackRE is a stack name as it prefixes object names: Swarm's
// names without the "_" that ends the prefix. It is wider than what the
// applications file accepts, so that hand-deployed stacks count too.
var namespaceStackRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-]*$`)

// namespaceOf returns the stack whose namespace name lies in: the part
// before its first "_" when that part can be a stack name. Stack names
// cannot contain "_", so the first one ends the prefix, and a name has at
// most one such stack.
func namespaceOf(name string) (string, bool) {
	ns, _, found := strings.Cut(name, "_")
	if !found || !namespaceStackRE.MatchString(ns) {
		return "", false
	}
	return ns, true
}

// listedObject is what a plan keeps of an existing config or secret: its id
// for references, its labels for the guards.
type listedObject struct {
	id     string
	labels map[string]string
}

func labelsOf(objs map[string]listedObject) map[string]map[string]string {
	out := make(map[string]map[string]string, len(objs))
	for name, o := range objs {
		out[name] = o.labels
	}
	return out
}

func idsOf(objs map[string]listedObject) map[string]string {
	out := make(map[string]string, len(objs))
	for name, o := range objs {
		out[name] = o.id
	}
	return out
}

// readExisting gathers what the guards need about the objects decl
// declares. Networks, configs and secrets come from the listings the plan
// already made; volumes take one request. Two more reads happen only when
// the deploy needs them: the services of another stack's namespace a name
// lies in (to name its owner in the refusal), and this application's release
// records when a self-named volume has no other evidence of being its own.
func (b *Backend) readExisting(ctx context.Context, stack, owner string, decl *compose.Stack, nets map[string]listedNetwork, configs, secrets map[string]listedObject) (existingObjects, error) {
	e := existingObjects{
		networks: map[string]map[string]string{}, configs: labelsOf(configs), secrets: labelsOf(secrets),
		volumes: map[string]map[string]string{}, namespaceOwners: map[string][]string{}, recordedVolumes: map[string]bool{},
	}
	for name := range decl.Networks {
		if n, ok := nets[name]; ok {
			e.networks[name] = n.Labels
		}
	}
	scoped := func(name string) bool { return strings.HasPrefix(name, stack+"_") }
	var volumes []string
	for _, name := range decl.Volumes {
		if !scoped(name) && !slices.Contains(b.allow.Volumes, name) {
			volumes = append(volumes, name)
		}
	}
	if len(volumes) > 0 {
		list, err := b.api.VolumeList(ctx, client.VolumeListOptions{Filters: nameFilter(volumes)})
		if err != nil {
			return e, fmt.Errorf("list volumes: %w", err)
		}
		want := setOf(volumes)
		for _, v := range list.Items {
			if want[v.Name] {
				e.volumes[v.Name] = v.Labels
			}
		}
	}

	var foreign []string
	var unproven bool
	note := func(name string, allow []string) {
		if scoped(name) || slices.Contains(allow, name) {
			return
		}
		if ns, ok := namespaceOf(name); ok {
			if !slices.Contains(foreign, ns) {
				foreign = append(foreign, ns)
			}
		}
	}
	for name := range decl.Networks {
		note(name, b.allow.Networks)
	}
	for name := range decl.Configs {
		note(name, b.allow.Configs)
	}
	for name := range decl.Secrets {
		note(name, b.allow.Secrets)
	}
	for _, name := range volumes {
		note(name, nil)
		if _, inNamespace := namespaceOf(name); !inNamespace && !strings.HasPrefix(name, reservedNamePrefix) {
			if _, onNode := e.volumes[name]; !onNode {
				unproven = true
			}
		}
	}
	slices.Sort(foreign)
	for _, ns := range foreign[:min(len(foreign), maxForeignNamespaces)] {
		svcs, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: namespace(ns)})
		if err != nil {
			return e, fmt.Errorf("list services of stack %s: %w", ns, err)
		}
		for _, s := range svcs.Items {
			if o := s.Spec.Labels[LabelOwner]; o != "" && !slices.Contains(e.namespaceOwners[ns], o) {
				e.namespaceOwners[ns] = append(e.namespaceOwners[ns], o)
			}
		}
	}
	if unproven {
		if err := b.readRecordedVolumes(ctx, stack, owner, e.recordedVolumes); err != nil {
			return e, err
		}
	}
	return e, nil
}

// readRecordedVolumes adds to into the self-named volumes declared by the
// release records of stack that owner wrote. Records are written by the
// controller alone (their names and labels are reserved), so a volume one of
// them declares was this application's before: a name it kept from an
// earlier release, or one allowed to it then.
func (b *Backend) readRecordedVolumes(ctx context.Context, stack, owner string, into map[string]bool) error {
	recs, err := b.records(ctx, stack)
	if err != nil {
		return err
	}
	for _, c := range recs {
		if c.Spec.Labels[LabelOwner] != owner {
			continue
		}
		r, err := decodeRecord(c)
		if err != nil {
			return err
		}
		for _, name := range selfNamedVolumes(r.Manifest) {
			into[name] = true
		}
	}
	return nil
}

// selfNamedVolumes reads the volumes a manifest's compose section declares
// with a name of their own and not as external. A manifest it cannot read
// declares none.
func selfNamedVolumes(manifest string) []string {
	var m struct {
		Compose struct {
			Volumes map[string]struct {
				Name     string `yaml:"name"`
				External any    `yaml:"external"`
			} `yaml:"volumes"`
		} `yaml:"compose"`
	}
	if err := yaml.Unmarshal([]byte(manifest), &m); err != nil {
		return nil
	}
	var out []string
	for _, v := range m.Compose.Volumes {
		if v.Name != "" && (v.External == nil || v.External == false) {
			out = append(out, v.Name)
		}
	}
	return out
}
