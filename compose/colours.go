package compose

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
	"gopkg.in/yaml.v3"
)

// Colour is how one service under a canary or blue/green rollout appears
// in the manifest a pass deploys: the stable service keeps the definition
// it runs until the rollout promotes, and an extra service beside it runs
// the new one at the rollout's replica count.
type Colour struct {
	// Service is the declared (unscoped) service.
	Service string
	// Name is the extra colour's unscoped name.
	Name string
	// StableFrom is a manifest whose definition of Service the stable
	// service keeps; empty to keep the manifest's own (the new one).
	StableFrom string
	// ColourFrom is a manifest whose definition of Name the extra colour
	// keeps (the record it was deployed with), so that a colour draining
	// the traffic of a replaced revision keeps running that revision;
	// empty to give it the manifest's definition of Service (the new one).
	ColourFrom string
	// Replicas is the extra colour's replica count.
	Replicas int
	// Alias, when set, is a name the extra colour also answers to on each
	// of its networks: the service's own, for a canary with no router.
	Alias string
	// Labels are added to the extra colour's service labels (deploy
	// labels): per-deploy metadata stays off the task template, so writing
	// it never restarts a task.
	Labels map[string]string
}

// WithColours returns manifest with each Colour's extra service added and
// its stable service set as the Colour says. The extra service is the
// manifest's definition of Service with no x-flotilla field (it belongs to
// no wave and carries no rollout of its own). Networks, volumes, configs
// and secrets that a kept stable definition uses and manifest no longer
// declares are copied from StableFrom, so the old definition still deploys.
// Same input, same text: the result is compared with release records.
func WithColours(manifest string, colours []Colour) (string, error) {
	m, cfg, err := decodeManifest(manifest)
	if err != nil {
		return "", err
	}
	out := &manifestOut{Kind: manifestKind, Stack: m.Stack, Compose: cfg, Configs: m.Configs, Secrets: m.Secrets}
	for _, c := range colours {
		i := slices.IndexFunc(cfg.Services, func(s composetypes.ServiceConfig) bool { return s.Name == c.Service })
		if i < 0 {
			return "", fmt.Errorf("colours: no service %s", c.Service)
		}
		if slices.ContainsFunc(cfg.Services, func(s composetypes.ServiceConfig) bool { return s.Name == c.Name }) {
			return "", fmt.Errorf("colours: service %s already declared", c.Name)
		}
		extra := cloneService(cfg.Services[i])
		if c.ColourFrom != "" {
			// The recorded colour is already a colour: no ports, its
			// alias, if any, given when it was made.
			kept, err := keepDefinition(out, c.Name, c.ColourFrom)
			if err != nil {
				return "", err
			}
			extra = cloneService(kept)
		} else if c.Alias != "" {
			extra.Networks = aliased(extra.Networks, c.Alias)
		}
		extra.Name = c.Name
		extra.Extras = nil
		// Published ports belong to the stable service (two services
		// cannot publish one port); the colour is reached through the
		// router, or, without one, through Alias.
		extra.Ports = nil
		n := uint64(max(c.Replicas, 0))
		extra.Deploy.Replicas = &n
		labels := maps.Clone(extra.Deploy.Labels)
		if labels == nil {
			labels = composetypes.Labels{}
		}
		maps.Copy(labels, c.Labels)
		extra.Deploy.Labels = labels
		if c.StableFrom != "" {
			if err := keepStable(out, i, c.Service, c.StableFrom); err != nil {
				return "", err
			}
		}
		cfg.Services = append(cfg.Services, extra)
	}
	slices.SortFunc(cfg.Services, func(a, b composetypes.ServiceConfig) int { return strings.Compare(a.Name, b.Name) })
	return encodeManifest(out)
}

// keepStable sets service i of out to service's definition in from,
// keeping out's x-flotilla field, and copies what it uses that out lacks.
func keepStable(out *manifestOut, i int, service, from string) error {
	old, err := keepDefinition(out, service, from)
	if err != nil {
		return err
	}
	old.Extras = out.Compose.Services[i].Extras
	out.Compose.Services[i] = old
	return nil
}

// keepDefinition returns service's definition in the manifest from, with
// the networks, volumes, configs and secrets it uses that out does not
// declare copied into out, so that the old definition still deploys.
func keepDefinition(out *manifestOut, service, from string) (composetypes.ServiceConfig, error) {
	fm, fcfg, err := decodeManifest(from)
	if err != nil {
		return composetypes.ServiceConfig{}, fmt.Errorf("colours: kept definition of %s: %w", service, err)
	}
	j := slices.IndexFunc(fcfg.Services, func(s composetypes.ServiceConfig) bool { return s.Name == service })
	if j < 0 {
		return composetypes.ServiceConfig{}, fmt.Errorf("colours: the recorded manifest has no service %s", service)
	}
	cfg := out.Compose
	old := fcfg.Services[j]
	old.Configs, old.Secrets = slices.Clone(old.Configs), slices.Clone(old.Secrets)
	for n := range old.Networks {
		if _, ok := cfg.Networks[n]; !ok {
			if v, ok := fcfg.Networks[n]; ok {
				cfg.Networks = setKey(cfg.Networks, n, v)
			}
		}
	}
	for _, v := range old.Volumes {
		if v.Type != "volume" || v.Source == "" {
			continue
		}
		if _, ok := cfg.Volumes[v.Source]; !ok {
			if d, ok := fcfg.Volumes[v.Source]; ok {
				cfg.Volumes = setKey(cfg.Volumes, v.Source, d)
			}
		}
	}
	for k, r := range old.Configs {
		d, ok := fcfg.Configs[r.Source]
		if !ok {
			continue
		}
		key, add := stableKey(cfg.Configs, r.Source, d.Name, func(c composetypes.ConfigObjConfig) string { return c.Name })
		old.Configs[k] = keptReference(r, key)
		if add {
			cfg.Configs = setKey(cfg.Configs, key, d)
			if mc, ok := fm.Configs[d.Name]; ok {
				out.Configs = setKey(out.Configs, d.Name, mc)
			}
		}
	}
	for k, r := range old.Secrets {
		d, ok := fcfg.Secrets[r.Source]
		if !ok {
			continue
		}
		key, add := stableKey(cfg.Secrets, r.Source, d.Name, func(c composetypes.SecretConfig) string { return c.Name })
		old.Secrets[k] = keptReference(r, key)
		if add {
			cfg.Secrets = setKey(cfg.Secrets, key, d)
			if ms, ok := fm.Secrets[d.Name]; ok {
				out.Secrets = setKey(out.Secrets, d.Name, ms)
			}
		}
	}
	return old, nil
}

// stableKey is the key under which the stable definition's config or
// secret named name (compose key key in its own manifest) is declared:
// key itself when the new manifest lacks it or declares the same object
// under it, else the object's own content-hashed name, since both colours
// then use different content under one compose key. add reports that it
// must be declared.
func stableKey[V any](decl map[string]V, key, name string, nameOf func(V) string) (string, bool) {
	d, ok := decl[key]
	switch {
	case !ok:
		return key, true
	case nameOf(d) == name:
		return key, false
	}
	_, have := decl[name]
	return name, !have
}

// keptReference is r declared under key. A reference without a target is
// mounted at its compose key (a secret at /run/secrets/<key>), so when the
// key changes the old key becomes the target: the
// kept definition's tasks find the file where they always did, and their
// task template, hence the service, is not rewritten.
func keptReference[R composetypes.ServiceSecretConfig | composetypes.ServiceConfigObjConfig](r R, key string) R {
	f := composetypes.FileReferenceConfig(r)
	if key != f.Source && f.Target == "" {
		f.Target = f.Source
	}
	f.Source = key
	return R(f)
}

func setKey[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

// aliased gives the colour the declared service's name on each of its
// networks (the stack's default one when it names none), so a client that
// asks for the service by name can reach either colour.
func aliased(nets map[string]*composetypes.ServiceNetworkConfig, alias string) map[string]*composetypes.ServiceNetworkConfig {
	out := make(map[string]*composetypes.ServiceNetworkConfig, max(len(nets), 1))
	if len(nets) == 0 {
		out["default"] = &composetypes.ServiceNetworkConfig{Aliases: []string{alias}}
		return out
	}
	for name, n := range nets {
		var c composetypes.ServiceNetworkConfig
		if n != nil {
			c = *n
		}
		c.Aliases = append(slices.Clone(c.Aliases), alias)
		out[name] = &c
	}
	return out
}

// cloneService copies what WithColours changes of a service (its deploy
// labels and replicas) apart from the original.
func cloneService(s composetypes.ServiceConfig) composetypes.ServiceConfig {
	s.Deploy.Labels = maps.Clone(s.Deploy.Labels)
	return s
}

// ServiceDigest identifies service's definition in manifest: the service
// without its x-flotilla field, and the content of the configs and
// secrets it uses (their digests, for secrets), so a change of content
// under a fixed name changes it too. ok is false when manifest does not
// declare service.
func ServiceDigest(manifest, service string) (digest string, ok bool, err error) {
	m, cfg, err := decodeManifest(manifest)
	if err != nil {
		return "", false, err
	}
	i := slices.IndexFunc(cfg.Services, func(s composetypes.ServiceConfig) bool { return s.Name == service })
	if i < 0 {
		return "", false, nil
	}
	svc := cfg.Services[i]
	svc.Extras = nil
	doc := map[string]any{"service": svc}
	// References are named by the object they declare, not by the
	// compose key, which WithColours may have to change.
	cfgs, secs := map[string]any{}, map[string]any{}
	svc.Configs, svc.Secrets = slices.Clone(svc.Configs), slices.Clone(svc.Secrets)
	for k, r := range svc.Configs {
		if d, ok := cfg.Configs[r.Source]; ok {
			svc.Configs[k].Source = d.Name
			cfgs[d.Name] = map[string]any{"decl": d, "content": m.Configs[d.Name]}
		}
	}
	for k, r := range svc.Secrets {
		if d, ok := cfg.Secrets[r.Source]; ok {
			svc.Secrets[k].Source = d.Name
			secs[d.Name] = map[string]any{"decl": d, "content": m.Secrets[d.Name]}
		}
	}
	doc["service"] = svc
	doc["configs"], doc["secrets"] = cfgs, secs
	b, err := yaml.Marshal(doc)
	if err != nil {
		return "", false, fmt.Errorf("digest of service %s: %w", service, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true, nil
}
