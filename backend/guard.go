package backend

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// The guards decide what a stack may reach outside itself. They run in
// DeployStack's plan, on the converted manifest, before the first write;
// one refusal refuses the whole deploy. Every backend copy enforces them:
// one without WithAllowedReferences has the empty allowlist, so the
// default is the strictest setting and nothing the reconciler forgets to
// pass can loosen it.
//
// What a stack may use without an allow entry is what it declares: networks,
// configs, secrets and volumes under its own namespace ("<stack>_", a prefix
// that is never another stack's since stack names cannot contain "_"), and
// those it names itself with name: as long as the deploy creates them or
// they are already this application's. A self-named object that exists and
// belongs to someone else is refused, naming the owner, because the deploy
// would use it instead of creating one (see selfNamed).
//
// What a service asks of the node that runs it (capabilities, sysctls,
// host-mode ports, volume and network drivers, local volumes that mount
// node paths, security overrides, any spec field Flotilla does not know)
// is the node policy's, default-deny, in nodepolicy.go. Deliberately not
// guarded: ingress-mode published ports (the routing mesh, which every
// stack may use), resource limits and ulimits (they bound the task's own
// processes), placement, and log drivers. Swarm refuses privileged
// containers and devices by itself.

// reservedNamePrefix starts the names of the controller's own objects
// (release records, leader leases, its secrets and configs in the example
// deployment). No stack but the controller's own may declare or use one,
// whatever its allowlist says: a stack that created "flotilla-lease.<id>"
// first would keep every controller of that id from ever leading.
const reservedNamePrefix = "flotilla-"

// reservedLabelPrefix is the label namespace Flotilla's own bookkeeping
// lives in (see labels.Prefix).
const reservedLabelPrefix = labels.Prefix

// Docker socket paths. Binding either, or any directory above one, hands a
// task the daemon and with it every node; such paths need an allow entry
// naming them exactly (or, for a socket, its directory), so that a broad
// prefix like "/" or "/var" written for other reasons never includes it.
var dockerSockets = []string{"/var/run/docker.sock", "/run/docker.sock"}

// predefinedNetworks exist on every node without being declared. A stack
// attaching to one reaches outside itself like with any external network,
// and "host" removes network isolation altogether.
var predefinedNetworks = map[string]bool{"host": true, "bridge": true, "none": true, "ingress": true}

// WithAllowedReferences returns a copy of b that lets stacks reach what
// allow lists. Host paths are cleaned here, once. A backend that never had
// this called allows nothing outside each stack.
func (b *Backend) WithAllowedReferences(allow application.Allow) charts.Backend {
	c := b.clone()
	c.allow = application.Allow{
		Networks:  slices.Clone(allow.Networks),
		Configs:   slices.Clone(allow.Configs),
		Secrets:   slices.Clone(allow.Secrets),
		Volumes:   slices.Clone(allow.Volumes),
		HostPaths: make([]string, 0, len(allow.HostPaths)),

		HostPorts:       slices.Clone(allow.HostPorts),
		VolumeDrivers:   slices.Clone(allow.VolumeDrivers),
		NetworkDrivers:  slices.Clone(allow.NetworkDrivers),
		TemplateDrivers: slices.Clone(allow.TemplateDrivers),
	}
	for _, p := range allow.HostPaths {
		c.allow.HostPaths = append(c.allow.HostPaths, filepath.Clean(p))
	}
	for _, cp := range allow.Capabilities {
		c.allow.Capabilities = append(c.allow.Capabilities, CapabilityName(cp))
	}
	for _, s := range allow.Sysctls {
		c.allow.Sysctls = append(c.allow.Sysctls, SysctlName(s))
	}
	return c
}

// WithForbiddenSecrets returns a copy of b that refuses any stack declaring
// or mounting a config or secret named in names: the controller's own.
// Release records ("flotilla-release.*") are always forbidden, with or
// without this. No allow entry overrides either.
func (b *Backend) WithForbiddenSecrets(names map[string]struct{}) charts.Backend {
	c := b.clone()
	c.forbidden = maps.Clone(names)
	return c
}

// guardCheck is one deploy's view for the guards.
type guardCheck struct {
	stack     string
	owner     string // the request's owner stamp
	adopt     bool
	allow     application.Allow
	forbidden map[string]struct{}
	decl      *compose.Stack
	keys      manifestKeys
	existing  existingObjects
	// self is set for the controller's own stack, which may use the
	// controller's objects under the reserved prefix.
	self bool
	// ownsNamespace is set when a live service of the stack already
	// carries this application's owner stamp.
	ownsNamespace bool
	faults        []error
}

// ownSecretsFor is the forbidden set for a deploy of stack: the
// controller's own secrets and configs are refused to every stack but its
// own, which already mounts them, so that a controller running as a service
// can deploy (and upgrade) itself from git. Records stay refused to all.
func (b *Backend) ownSecretsFor(stack string) map[string]struct{} {
	if b.self.Stack != "" && stack == b.self.Stack {
		return nil
	}
	return b.forbidden
}

// guard checks what a deploy would write against b's allowlist, forbidden
// names, the ownership of the services already in the namespace and of the
// existing objects the stack names itself. It returns nil or errors.Join of
// *fault.Error, one per refusal.
func (b *Backend) guard(req charts.DeployRequest, decl *compose.Stack, live map[string]swarm.Service, existing existingObjects) error {
	g := &guardCheck{
		stack:     req.Stack,
		owner:     req.Labels[LabelOwner],
		adopt:     req.Adopt,
		allow:     b.allow,
		forbidden: b.ownSecretsFor(req.Stack),
		decl:      decl,
		keys:      readManifestKeys(req.Manifest, req.Stack),
		existing:  existing,
		self:      b.self.Stack != "" && req.Stack == b.self.Stack,
	}
	g.names()
	g.ownership(req, live)
	g.objects()
	g.nodeObjects()
	for _, name := range sortedKeys(decl.Services) {
		g.service(unscoped(req.Stack, name), decl.Services[name])
	}
	return errors.Join(g.faults...)
}

func (g *guardCheck) refuse(field, format string, args ...any) {
	g.faults = append(g.faults, &fault.Error{Field: field, Err: fmt.Errorf(format, args...)})
}

// names refuses every name Swarm itself would refuse, all before the first
// write: the daemon checks one object at a time, so a stack with one bad
// name would otherwise stop half created.
func (g *guardCheck) names() {
	for _, np := range g.decl.CheckNames() {
		field := "services." + unscoped(g.stack, np.Name)
		if np.Kind != "service" {
			field = g.keys.field(np.Kind+"s", np.Name)
		}
		g.faults = append(g.faults, &fault.Error{Field: field, Err: np.Err})
	}
}

// own reports whether name is scoped to the stack.
func (g *guardCheck) own(name string) bool {
	return strings.HasPrefix(name, g.stack+"_")
}

// isForbidden reports whether name is reserved for the controller: its
// own secrets and configs, its revision records, leader leases and not-kept
// memories, and, for every stack but the controller's own, anything under
// "flotilla-". Names under the stack's own prefix are the stack's, even for
// a stack whose name starts with "flotilla-".
func (g *guardCheck) isForbidden(name string) bool {
	if _, ok := g.forbidden[name]; ok {
		return true
	}
	if strings.HasPrefix(name, recordPrefix) || strings.HasPrefix(name, leasePrefix) || strings.HasPrefix(name, notKeptPrefix) {
		return true
	}
	return strings.HasPrefix(name, reservedNamePrefix) && !g.own(name) && !g.self
}

// ownership refuses a namespace holding services this deployer did not
// write: without an owner stamp (someone's `docker stack deploy`) unless
// the request adopts them, and with another owner's stamp always. A request
// without an owner stamp can only compare stamps, so it treats unstamped
// services as its own; the reconciler always stamps.
func (g *guardCheck) ownership(req charts.DeployRequest, live map[string]swarm.Service) {
	want := req.Labels[LabelOwner]
	var unowned []string
	others := map[string][]string{}
	for _, name := range sortedKeys(live) {
		owner := live[name].Spec.Labels[LabelOwner]
		switch {
		case owner == want:
			g.ownsNamespace = g.ownsNamespace || want != ""
		case owner == "":
			if !req.Adopt {
				unowned = append(unowned, name)
			}
		default:
			others[owner] = append(others[owner], name)
		}
	}
	if len(unowned) > 0 {
		g.refuse("stack", "namespace %q already holds services Flotilla did not deploy (%s); set adopt: true on the application to take them over",
			g.stack, strings.Join(unowned, ", "))
	}
	for _, owner := range sortedKeys(others) {
		g.refuse("stack", "namespace %q holds services owned by %s (%s); two applications cannot deploy one stack",
			g.stack, owner, strings.Join(others[owner], ", "))
	}
}

// objects checks the stack's top-level declarations. Service references to
// configs, secrets and volumes always name one of these (conversion refuses
// anything undeclared), so checking them here covers every mount.
func (g *guardCheck) objects() {
	d := g.decl
	for _, name := range sortedKeys(d.Configs) {
		field := g.keys.field("configs", name)
		g.declared("config", "configs", field, g.allow.Configs, name, g.existing.configs)
		g.reservedLabels(field+".labels", d.Configs[name].Labels)
	}
	for _, name := range d.ExternalConfigs {
		g.external("config", "configs", g.allow.Configs, name)
	}
	for _, name := range sortedKeys(d.Secrets) {
		field := g.keys.field("secrets", name)
		g.declared("secret", "secrets", field, g.allow.Secrets, name, g.existing.secrets)
		g.reservedLabels(field+".labels", d.Secrets[name].Labels)
	}
	for _, name := range d.ExternalSecrets {
		g.external("secret", "secrets", g.allow.Secrets, name)
	}
	for _, name := range d.Volumes {
		g.declared("volume", "volumes", g.keys.field("volumes", name), g.allow.Volumes, name, g.existing.volumes)
	}
	for _, name := range d.ExternalVolumes {
		g.external("volume", "volumes", g.allow.Volumes, name)
	}
	for _, name := range sortedKeys(d.Networks) {
		field := g.keys.field("networks", name)
		g.declared("network", "networks", field, g.allow.Networks, name, g.existing.networks)
		g.reservedLabels(field+".labels", d.Networks[name].Labels)
	}
	for _, name := range d.ExternalNetworks {
		// Whether it may be attached at all is the service check's.
		if g.isForbidden(name) {
			g.refuseReserved("network", g.keys.field("networks", name), name)
		}
	}
}

func (g *guardCheck) refuseReserved(kind, field, name string) {
	g.refuse(field, "%s %q is reserved for the Flotilla controller (names under %q: its revision records, leader leases, secrets and configs); no stack may declare or use it, whatever the allowlist says",
		kind, name, reservedNamePrefix)
}

// external checks an object the stack uses but does not declare.
func (g *guardCheck) external(kind, section string, allow []string, name string) {
	field := g.keys.field(section, name)
	switch {
	case g.isForbidden(name):
		g.refuseReserved(kind, field, name)
	case !slices.Contains(allow, name):
		g.refuse(field, "external %s %q is outside the stack; add it to allow.%s of the application to use it", kind, name, section)
	}
}

// declared checks an object the stack declares, which the deploy creates
// when it is absent and uses as it is when it exists. The namespace a name
// lies in decides what may already be there:
//   - under the stack's own prefix: nothing but this application's own
//     (see ownScoped), since another stack could once name its objects so;
//   - in another stack's namespace: refused, whoever holds it now, as the
//     deploy would squat the name that stack's next deploy finds there;
//   - in no stack's namespace: see selfNamed and selfNamedVolume.
//
// An allow entry naming the object lets the stack use it as it is.
func (g *guardCheck) declared(kind, section, field string, allow []string, name string, existing map[string]map[string]string) {
	ns, inNamespace := namespaceOf(name)
	switch {
	case g.isForbidden(name):
		g.refuseReserved(kind, field, name)
	case slices.Contains(allow, name):
	case g.own(name):
		if kind != "volume" { // no other stack can name a volume under this prefix: see selfNamedVolume
			g.ownScoped(kind, section, field, name, existing)
		}
	case inNamespace && ns != g.stack:
		g.refuse(field, "%s %q lies in the namespace of stack %q%s; a stack may name objects only under its own prefix %q or outside every stack's namespace: rename it, or add it to allow.%s of the application to share it on purpose",
			kind, name, ns, g.existing.ownersOf(ns, existing[name]), g.stack+"_", section)
	case kind == "volume":
		g.selfNamedVolume(field, name)
	default:
		g.selfNamed(kind, section, field, name, existing)
	}
}

// ownScoped decides on an existing object under the stack's own prefix. It
// is used only when it carries this application's owner stamp, or when it
// is what a `docker stack deploy` of this stack (or a Flotilla from before
// owner stamps on objects) left: this stack's namespace label, which
// conversion writes for the deploying stack and no repository can set for
// another, and no owner stamp, taken over with adopt or when the
// application already runs the stack.
func (g *guardCheck) ownScoped(kind, section, field, name string, existing map[string]map[string]string) {
	labels, found := existing[name]
	owner := labels[LabelOwner]
	switch {
	case !found, owner == g.owner:
	case owner != "":
		g.refuse(field, "%s %q is under this stack's prefix but already exists and belongs to %s; the deploy would use it as it is: remove it, or add it to allow.%s of the application to use it on purpose",
			kind, name, owner, section)
	case labels[LabelNamespace] == g.stack && (g.adopt || g.ownsNamespace):
	default:
		g.refuse(field, "%s %q is under this stack's prefix but already exists and was not created by this application (%s); the deploy would use it as it is: remove it, set adopt: true if a `docker stack deploy` of this stack made it, or add it to allow.%s of the application to use it on purpose",
			kind, name, describeCreator(labels), section)
	}
}

// selfNamed decides on an object the stack declares under a name of its own
// choosing. The deploy creates it when it is absent, and uses it as it is
// when it exists; so it may exist only as this application's (its owner
// stamp, which every object a deploy creates carries, see ownerStamped), or as what an
// adopted `docker stack deploy` of this same stack left.
func (g *guardCheck) selfNamed(kind, section, field, name string, existing map[string]map[string]string) {
	labels, found := existing[name]
	owner := labels[LabelOwner]
	switch {
	case !found, owner == g.owner:
	case owner != "":
		g.refuse(field, "%s %q already exists and belongs to %s; a stack may name an object only if it creates it or already owns it: rename it, or add it to allow.%s of the application to use the existing one",
			kind, name, owner, section)
	case g.adopt && labels[LabelNamespace] == g.stack:
	default:
		g.refuse(field, "%s %q already exists and was not created by this application (%s); rename it, or add it to allow.%s of the application to use the existing one",
			kind, name, describeCreator(labels), section)
	}
}

// selfNamedVolume is selfNamed for a volume outside every stack's
// namespace. A node creates a volume when a task first mounts it, with the
// mount's labels and no owner stamp, and a listing shows only the volumes
// of the node the controller talks to: an absent name there says nothing
// about the others, where another stack may already hold it (or plant one,
// with driver options of its own, for this stack to mount). So the name
// must be this application's by evidence: the allowlist (checked before),
// one of this application's release records declaring it under this name,
// or a volume on this node made by this stack's tasks (the namespace label
// conversion writes for the mounting stack). A copy on this node made for
// another stack is refused even then.
func (g *guardCheck) selfNamedVolume(field, name string) {
	labels, found := g.existing.volumes[name]
	switch {
	case found && labels[LabelNamespace] == g.stack:
	case found:
		g.refuse(field, "volume %q already exists on this node and was not created for this stack (%s); rename it, or add it to allow.volumes of the application to use the existing one",
			name, describeCreator(labels))
	case g.existing.recordedVolumes[name]:
	default:
		g.refuse(field, "volume %q is outside the stack's namespace and no release of this application declared it: each node creates such a volume on first use, so nothing proves the name is not another stack's on some node; name it under the stack (drop name:, or start it with %q), or add it to allow.volumes of the application",
			name, g.stack+"_")
	}
}

func describeCreator(labels map[string]string) string {
	if ns := labels[LabelNamespace]; ns != "" {
		return "it belongs to stack " + strconv.Quote(ns)
	}
	return "it belongs to no stack"
}

// isColour reports whether the unscoped service is the extra colour of a
// rollout of another service of the stack (web-canary beside web).
func (g *guardCheck) isColour(name string) bool {
	for _, suffix := range []string{rollout.CanarySuffix, rollout.PreviewSuffix} {
		if base, ok := strings.CutSuffix(name, suffix); ok && base != "" {
			if _, declared := g.decl.Services[g.stack+"_"+base]; declared {
				return true
			}
		}
	}
	return false
}

func (g *guardCheck) reservedLabels(field string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if strings.HasPrefix(k, reservedLabelPrefix) {
			g.refuse(field, "label %q is reserved for Flotilla's own bookkeeping", k)
		}
	}
}

// service checks one service's labels, network attachments and mounts.
func (g *guardCheck) service(name string, spec swarm.ServiceSpec) {
	p := "services." + name
	stackLabels := spec.Labels
	if g.isColour(name) {
		// The pass records a rollout's state on its extra colour, a
		// name compose refuses to let a stack declare for itself.
		stackLabels = maps.Clone(stackLabels)
		maps.DeleteFunc(stackLabels, func(k, _ string) bool { return strings.HasPrefix(k, rollout.LabelPrefix) })
	}
	g.reservedLabels(p+".deploy.labels", stackLabels)
	g.nodePolicy(p, spec)

	for _, n := range spec.TaskTemplate.Networks {
		t := n.Target
		_, declared := g.decl.Networks[t]
		switch {
		case declared: // scoped, or self-named and checked in objects
		case slices.Contains(g.allow.Networks, t):
		case predefinedNetworks[t]:
			g.refuse(p+".networks", "network %q is predefined on every node and outside the stack; add it to allow.networks of the application to attach to it", t)
		default:
			g.refuse(p+".networks", "network %q is outside the stack; add it to allow.networks of the application to attach to it", t)
		}
	}

	cs := spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return
	}
	for i, m := range cs.Mounts {
		field := p + ".volumes[" + strconv.Itoa(i) + "]"
		switch m.Type {
		case mount.TypeBind, mount.TypeNamedPipe:
			g.hostPath(field, "bind mount of", m.Source)
		case mount.TypeVolume:
			g.volumeDevice(field, m)
			if m.VolumeOptions != nil {
				g.reservedLabels(field+".labels", m.VolumeOptions.Labels)
			}
		case mount.TypeTmpfs:
		default:
			g.refuse(field, "mount type %q is not supported for stacks Flotilla deploys", m.Type)
		}
	}
}

// hostPath refuses a node path no allow.hostPaths entry covers.
func (g *guardCheck) hostPath(field, what, p string) {
	if !filepath.IsAbs(p) {
		g.refuse(field, "%s %q: a host path must be absolute", what, p)
		return
	}
	if hostPathAllowed(g.allow.HostPaths, p) {
		return
	}
	clean := filepath.Clean(p)
	if exposesDockerSocket(clean) {
		g.refuse(field, "%s %q would expose the Docker socket; only an allow.hostPaths entry naming exactly %q%s permits it",
			what, p, clean, socketDirHint(clean))
		return
	}
	g.refuse(field, "%s host path %q is not allowed; add it, or a directory above it, to allow.hostPaths of the application", what, p)
}

func socketDirHint(p string) string {
	if slices.Contains(dockerSockets, p) {
		return " (or " + strconv.Quote(filepath.Dir(p)) + ")"
	}
	return ""
}

// hostPathAllowed reports whether an allow entry covers the node path p.
// Entries are prefixes, compared after cleaning both sides and only on path
// component boundaries: "/srv/data" covers "/srv/data/x" but not
// "/srv/database". The comparison is lexical: symlinks are resolved by the
// node that runs the task, which the controller cannot see, so an allowed
// directory is trusted not to link out of itself (a repository cannot
// create host files, the operator can).
//
// A path that exposes the Docker socket (a socket, or a directory above
// one, "/" included) is covered only by an entry equal to it, or, for a
// socket, by its own directory: a broad prefix never hands out the daemon.
func hostPathAllowed(allowed []string, p string) bool {
	p = filepath.Clean(p)
	socket := exposesDockerSocket(p)
	for _, a := range allowed {
		a = filepath.Clean(a)
		switch {
		case a == p:
			return true
		case socket:
			if slices.Contains(dockerSockets, p) && a == filepath.Dir(p) {
				return true
			}
		case within(a, p):
			return true
		}
	}
	return false
}

// exposesDockerSocket reports whether binding the clean path p makes a
// Docker socket reachable: p is a socket or one of its ancestors.
func exposesDockerSocket(p string) bool {
	for _, s := range dockerSockets {
		if within(p, s) {
			return true
		}
	}
	return false
}

// within reports whether the clean path p is dir or below it.
func within(dir, p string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// manifestKeys maps swarm names back to the compose keys they were
// declared under, so a refusal can name configs.app_conf rather than a
// content-hashed name. It reads only the names in the manifest's compose
// section; a manifest it cannot read leaves fields at the section level.
type manifestKeys map[string]map[string]string // section -> name -> key

func readManifestKeys(manifest, stack string) manifestKeys {
	type named map[string]struct {
		Name string `yaml:"name"`
	}
	var m struct {
		Compose struct {
			Configs  named `yaml:"configs"`
			Secrets  named `yaml:"secrets"`
			Volumes  named `yaml:"volumes"`
			Networks named `yaml:"networks"`
		} `yaml:"compose"`
	}
	out := manifestKeys{}
	if err := yaml.Unmarshal([]byte(manifest), &m); err != nil {
		return out
	}
	for section, objs := range map[string]named{
		"configs": m.Compose.Configs, "secrets": m.Compose.Secrets,
		"volumes": m.Compose.Volumes, "networks": m.Compose.Networks,
	} {
		out[section] = map[string]string{}
		for key, obj := range objs {
			name := obj.Name
			if name == "" {
				name = stack + "_" + key
			}
			out[section][name] = key
		}
	}
	return out
}

// field is "section.key" for a declared name, or the section alone.
func (k manifestKeys) field(section, name string) string {
	if key, ok := k[section][name]; ok {
		return section + "." + key
	}
	return section
}
