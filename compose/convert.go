package compose

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/docker/cli/cli/compose/convert"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// defaultNetworkDriver is what `docker stack deploy` creates a network with
// when the compose file names no driver.
const defaultNetworkDriver = "overlay"

// Convert turns a manifest made by Render into the swarm objects it
// declares for stack, using docker/cli's own convert package so that a
// compose file means exactly what it means to `docker stack deploy`.
//
// Services reference configs and secrets by id. With r nil every reference
// gets an empty id: that is a conversion for declaration only, which works
// even when none of the objects exist any more (a stored revision whose
// configs a sweep has deleted). With r set, ids come from r, and a name r
// does not know is an error.
//
// Secrets come back with Data nil; the caller has the plaintext (from
// Render) and fills it in.
//
// A manifest is loaded and converted once per process (memo.conversions):
// later calls with the same text copy that result and fill in the ids r
// gives now, so they cost a copy, not a parse. The result is the caller's
// to change.
func Convert(ctx context.Context, manifest, stack string, r Resolver) (*Stack, error) {
	c, err := Prepare(ctx, manifest, stack)
	if err != nil {
		return nil, err
	}
	return c.Stack(ctx, r)
}

// Conversion is a manifest converted once for a stack. A caller that needs
// the same manifest's objects more than once (a deploy: for what it
// declares, then with the swarm's ids) takes them from one Conversion
// rather than converting the text each time. It never changes.
type Conversion struct {
	manifest string
	t        *convertTemplate
}

// Prepare converts manifest for stack, or finds the conversion the process
// already made of the same text (memo.conversions).
func Prepare(ctx context.Context, manifest, stack string) (*Conversion, error) {
	t, ok := memo.conversions.get(manifest)
	if !ok || t.stack.Namespace != stack {
		var err error
		if t, err = newConvertTemplate(ctx, manifest, stack); err != nil {
			return nil, err
		}
		memo.conversions.put(manifest, t)
	}
	return &Conversion{manifest: manifest, t: t}, nil
}

// Of reports whether c is manifest converted for stack; false for nil.
func (c *Conversion) Of(manifest, stack string) bool {
	return c != nil && c.t.stack.Namespace == stack && c.manifest == manifest
}

// Stack is what Convert(manifest, stack, r) gives for c's manifest and
// stack: a copy of the conversion, the caller's to change, with r's ids.
func (c *Conversion) Stack(ctx context.Context, r Resolver) (*Stack, error) {
	return c.t.instantiate(ctx, c.manifest, r)
}

// convertManifest is the conversion itself: the manifest is decoded and
// loaded by docker/cli's loader, and its services converted by docker/cli's
// convert, with references resolved through api.
func convertManifest(ctx context.Context, manifest, stack string, api func(convert.Namespace, *composetypes.Config) (*refClient, error)) (*Stack, *composetypes.Config, error) {
	m, cfg, err := decodeManifest(manifest)
	if err != nil {
		return nil, nil, err
	}
	if m.Stack != stack {
		return nil, nil, fmt.Errorf("manifest was rendered for stack %q, not %q: its object names are scoped to it", m.Stack, stack)
	}
	ns := convert.NewNamespace(stack)
	st := &Stack{
		Namespace: stack,
		Services:  map[string]swarm.ServiceSpec{},
		Configs:   map[string]swarm.ConfigSpec{},
		Secrets:   map[string]swarm.SecretSpec{},
	}

	st.Networks, st.ExternalNetworks = stackNetworks(ns, cfg.Networks, declaredNetworks(cfg.Services))

	if err := convertConfigs(ns, cfg, m, st); err != nil {
		return nil, nil, err
	}
	if err := convertSecrets(ns, cfg, m, st); err != nil {
		return nil, nil, err
	}
	for key, v := range cfg.Volumes {
		switch {
		case v.External.External:
			st.ExternalVolumes = append(st.ExternalVolumes, v.Name)
		case v.Name != "":
			st.Volumes = append(st.Volumes, v.Name)
		default:
			st.Volumes = append(st.Volumes, ns.Scope(key))
		}
	}
	st.Volumes = sortedUnique(st.Volumes)
	st.ExternalVolumes = sortedUnique(st.ExternalVolumes)

	client, err := api(ns, cfg)
	if err != nil {
		return nil, nil, err
	}
	services, err := convertServices(ctx, ns, cfg, client)
	if err != nil {
		return nil, nil, err
	}
	for _, spec := range services {
		st.Services[spec.Name] = spec
	}
	return st, cfg, nil
}

// stackNetworks are the networks a stack creates and the external ones it
// uses, given every network its services attach to.
func stackNetworks(ns convert.Namespace, networks map[string]composetypes.NetworkConfig, declared map[string]struct{}) (map[string]client.NetworkCreateOptions, []string) {
	nets, external := convert.Networks(ns, networks, declared)
	for name, opts := range nets {
		if opts.Driver == "" {
			opts.Driver = defaultNetworkDriver
		}
		nets[name] = opts
	}
	return nets, sortedUnique(external)
}

// declaredNetworks is every network a service attaches to, "default" for a
// service that names none — the set `docker stack deploy` creates.
func declaredNetworks(services []composetypes.ServiceConfig) map[string]struct{} {
	out := map[string]struct{}{}
	for _, s := range services {
		if len(s.Networks) == 0 {
			out["default"] = struct{}{}
		}
		for name := range s.Networks {
			out[name] = struct{}{}
		}
	}
	return out
}

// convertConfigs builds the specs convert.Configs would, with the data from
// the manifest instead of from a file on disk.
func convertConfigs(ns convert.Namespace, cfg *composetypes.Config, m *manifestIn, st *Stack) error {
	for _, key := range sortedKeys(cfg.Configs) {
		c := cfg.Configs[key]
		if c.External.External {
			st.ExternalConfigs = append(st.ExternalConfigs, c.Name)
			continue
		}
		mc, ok := m.Configs[c.Name]
		if !ok {
			return fmt.Errorf("manifest has no data for config %q (%s)", c.Name, key)
		}
		data, err := mc.bytes()
		if err != nil {
			return fmt.Errorf("manifest data of config %q: %w", c.Name, err)
		}
		spec := swarm.ConfigSpec{
			Annotations: swarm.Annotations{Name: c.Name, Labels: convert.AddStackLabel(ns, maps.Clone(c.Labels))},
			Data:        data,
		}
		if c.TemplateDriver != "" {
			spec.Templating = &swarm.Driver{Name: c.TemplateDriver}
		}
		st.Configs[c.Name] = spec
	}
	st.ExternalConfigs = sortedUnique(st.ExternalConfigs)
	return nil
}

// convertSecrets builds the specs convert.Secrets would, without data.
func convertSecrets(ns convert.Namespace, cfg *composetypes.Config, m *manifestIn, st *Stack) error {
	for _, key := range sortedKeys(cfg.Secrets) {
		s := cfg.Secrets[key]
		if s.External.External {
			st.ExternalSecrets = append(st.ExternalSecrets, s.Name)
			continue
		}
		name := s.Name
		if s.Driver != "" && name == "" {
			name = ns.Scope(key)
		}
		if s.Driver == "" {
			if _, ok := m.Secrets[name]; !ok {
				return fmt.Errorf("manifest does not declare secret %q (%s)", name, key)
			}
		}
		spec := swarm.SecretSpec{
			Annotations: swarm.Annotations{Name: name, Labels: convert.AddStackLabel(ns, maps.Clone(s.Labels))},
		}
		if s.Driver != "" {
			spec.Driver = &swarm.Driver{Name: s.Driver, Options: s.DriverOpts}
		}
		if s.TemplateDriver != "" {
			spec.Templating = &swarm.Driver{Name: s.TemplateDriver}
		}
		st.Secrets[name] = spec
	}
	st.ExternalSecrets = sortedUnique(st.ExternalSecrets)
	return nil
}

// convertServices runs convert.Services against the reference client. That
// client answers only the three calls conversion is known to make; any
// other would reach the nil client it embeds and panic, which is turned
// into an error here rather than taking the controller down.
func convertServices(ctx context.Context, ns convert.Namespace, cfg *composetypes.Config, api *refClient) (specs map[string]swarm.ServiceSpec, err error) {
	defer func() {
		if r := recover(); r != nil {
			specs, err = nil, fmt.Errorf("convert services: unexpected call needing a docker daemon: %v", r)
		}
	}()
	specs, err = convert.Services(ctx, ns, cfg, api)
	if err != nil {
		return nil, fmt.Errorf("convert services: %w", err)
	}
	return specs, nil
}

// refClient is the client.APIClient convert.Services is given. Conversion
// uses a client only to turn config and secret names into ids and to ask
// its API version; refClient answers those from a Resolver (or with empty
// ids) so conversion never touches a daemon. The embedded interface is nil
// on purpose: see convertServices.
type refClient struct {
	client.APIClient
	configs map[string]string // nil: declaration only, every id empty
	secrets map[string]string
	// placeholders answers every name with placeholderID(name) instead,
	// for a conversion the memo keeps (see newConvertTemplate).
	placeholders bool
}

var _ client.APIClient = (*refClient)(nil)

// newRefClient resolves, once, the ids of every config and secret cfg
// declares, so that the per-service lookups convert makes cost nothing.
func newRefClient(ctx context.Context, ns convert.Namespace, cfg *composetypes.Config, r Resolver) (*refClient, error) {
	c := &refClient{}
	if r == nil {
		return c, nil
	}
	configNames, secretNames := referenceNames(ns, cfg)
	var err error
	c.configs, c.secrets, err = resolveIDs(ctx, r, configNames, secretNames)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// referenceNames are the names, sorted and unique, of every config and
// secret cfg declares, as services reference them.
func referenceNames(ns convert.Namespace, cfg *composetypes.Config) (configs, secrets []string) {
	for key, v := range cfg.Configs {
		configs = append(configs, objectName(ns, key, composetypes.FileObjectConfig(v)))
	}
	for key, v := range cfg.Secrets {
		secrets = append(secrets, objectName(ns, key, composetypes.FileObjectConfig(v)))
	}
	return sortedUnique(configs), sortedUnique(secrets)
}

// resolveIDs asks r, once each, for the ids of the named configs and
// secrets; the maps are never nil.
func resolveIDs(ctx context.Context, r Resolver, configNames, secretNames []string) (configs, secrets map[string]string, err error) {
	configs, secrets = map[string]string{}, map[string]string{}
	if len(configNames) > 0 {
		ids, err := r.ConfigIDs(ctx, configNames)
		if err != nil {
			return nil, nil, fmt.Errorf("resolve config ids: %w", err)
		}
		maps.Copy(configs, ids)
	}
	if len(secretNames) > 0 {
		ids, err := r.SecretIDs(ctx, secretNames)
		if err != nil {
			return nil, nil, fmt.Errorf("resolve secret ids: %w", err)
		}
		maps.Copy(secrets, ids)
	}
	return configs, secrets, nil
}

// objectName is the swarm name a service reference to key uses: the one in
// the manifest, which Render always sets for what the stack creates, or
// the scoped key for a driver-backed secret.
func objectName(ns convert.Namespace, key string, obj composetypes.FileObjectConfig) string {
	if obj.Name != "" {
		return obj.Name
	}
	return ns.Scope(key)
}

func (c *refClient) ConfigList(_ context.Context, opts client.ConfigListOptions) (client.ConfigListResult, error) {
	var out client.ConfigListResult
	for _, name := range filterValues(opts.Filters, "name") {
		id, ok := c.configs[name]
		if c.placeholders {
			id, ok = placeholderID(name), true
		}
		if !ok && c.configs != nil {
			return client.ConfigListResult{}, fmt.Errorf("config %q not found", name)
		}
		out.Items = append(out.Items, swarm.Config{ID: id, Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name}}})
	}
	return out, nil
}

func (c *refClient) SecretList(_ context.Context, opts client.SecretListOptions) (client.SecretListResult, error) {
	var out client.SecretListResult
	for _, name := range filterValues(opts.Filters, "name") {
		id, ok := c.secrets[name]
		if c.placeholders {
			id, ok = placeholderID(name), true
		}
		if !ok && c.secrets != nil {
			return client.SecretListResult{}, fmt.Errorf("secret %q not found", name)
		}
		out.Items = append(out.Items, swarm.Secret{ID: id, Spec: swarm.SecretSpec{Annotations: swarm.Annotations{Name: name}}})
	}
	return out, nil
}

// filterValues are the values of one filter term, sorted so that a lookup
// answers in the same order every time (client.Filters is a map).
func filterValues(f client.Filters, term string) []string {
	return slices.Sorted(maps.Keys(f[term]))
}

func sortedUnique(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
