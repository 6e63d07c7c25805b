package compose

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/moby/moby/client/pkg/versions"

	"github.com/flotilla-gitops/flotilla/rollout"
)

// Extension is the per-service compose key that says where a service sits
// in a sync (its wave, or the hook phase of a job) and how a new version of
// it meets traffic (its rollout). It is the one x- field a
// manifest keeps (every other is dropped, see stripExtras); convert never
// maps an extension into a spec, so it never reaches the swarm.
const Extension = "x-flotilla"

// HookPhase says when a hook job runs in a sync.
type HookPhase string

// The hook phases.
const (
	// PreSync runs to completion before any service of the sync is written.
	PreSync HookPhase = "PreSync"
	// PostSync runs once every wave is Healthy.
	PostSync HookPhase = "PostSync"
	// SyncFail runs when the sync failed.
	SyncFail HookPhase = "SyncFail"
)

// DeletePolicy says when a hook's job service is removed.
type DeletePolicy string

// The delete policies.
const (
	// BeforeHookCreation keeps a hook's job until the hook runs again (the
	// default): its tasks and logs stay readable in between.
	BeforeHookCreation DeletePolicy = "BeforeHookCreation"
	// HookSucceeded removes the job once the sync it succeeded in is
	// recorded.
	HookSucceeded DeletePolicy = "HookSucceeded"
	// HookFailed removes the job when it failed, after its logs were read.
	HookFailed DeletePolicy = "HookFailed"
)

// Order is one service's place in a sync.
type Order struct {
	// Wave orders ordinary services, lowest first; default 0. For a hook
	// it orders the hooks of its phase the same way.
	Wave int
	// Hook is set for a hook job, which belongs to no wave of services.
	Hook HookPhase
	// DeletePolicy is set for hooks only, BeforeHookCreation by default.
	DeletePolicy DeletePolicy
	// Rollout is set for a service released by canary or blue/green, with
	// its defaults applied; nil for an ordinary rolling update. A pointer
	// keeps Order comparable; compare two with Rollout.Value if needed.
	Rollout *rollout.Spec
}

// Ordering maps the unscoped names of a manifest's services that carry
// x-flotilla to their Order; a service it lacks is an ordinary service in
// wave 0.
type Ordering map[string]Order

// Of returns service's Order.
func (o Ordering) Of(service string) Order { return o[service] }

// Hooks returns the hooks of phase in the order they run: by wave, then
// by name.
func (o Ordering) Hooks(phase HookPhase) []string {
	var out []string
	for _, w := range o.HookWaves(phase) {
		out = append(out, w.Names...)
	}
	return out
}

// HookWave is the hooks of one phase that share a wave: they run together,
// and the next wave of the phase starts once every one of them succeeded.
type HookWave struct {
	Wave  int
	Names []string // sorted
}

// HookWaves groups the hooks of phase by wave, lowest first.
func (o Ordering) HookWaves(phase HookPhase) []HookWave {
	by := map[int][]string{}
	for name, ord := range o {
		if ord.Hook == phase {
			by[ord.Wave] = append(by[ord.Wave], name)
		}
	}
	var out []HookWave
	for _, n := range slices.Sorted(maps.Keys(by)) {
		slices.Sort(by[n])
		out = append(out, HookWave{Wave: n, Names: by[n]})
	}
	return out
}

// IsHook reports whether service is a hook job.
func (o Ordering) IsHook(service string) bool { return o[service].Hook != "" }

// HasHooks reports whether any service is a hook.
func (o Ordering) HasHooks() bool {
	for _, ord := range o {
		if ord.Hook != "" {
			return true
		}
	}
	return false
}

// Waves splits services (unscoped names, hooks excluded) into waves, lowest
// first; each wave's names are sorted. nums are the wave numbers.
func (o Ordering) Waves(services []string) (nums []int, waves [][]string) {
	by := map[int][]string{}
	for _, s := range services {
		if o.IsHook(s) {
			continue
		}
		w := o[s].Wave
		by[w] = append(by[w], s)
	}
	nums = slices.Sorted(maps.Keys(by))
	for _, n := range nums {
		slices.Sort(by[n])
		waves = append(waves, by[n])
	}
	return nums, waves
}

// maxWave bounds wave numbers so a typo is caught rather than honoured.
const maxWave = 1000

// errOrdering is wrapped by every refusal of an x-flotilla field.
var errOrdering = errors.New("invalid " + Extension)

// readOrdering reads and checks every service's x-flotilla field. A bad one
// is a fault naming the file and field.
func (p *project) readOrdering(cfg *composetypes.Config) (Ordering, error) {
	ord := Ordering{}
	for _, svc := range cfg.Services {
		raw, ok := svc.Extras[Extension]
		if !ok {
			continue
		}
		field := "services." + svc.Name + "." + Extension
		o, sub, err := parseOrder(raw, svc.Deploy.Mode)
		if err != nil {
			if sub != "" {
				field += "." + sub
			}
			return nil, p.fault(field, err)
		}
		ord[svc.Name] = o
	}
	return ord, nil
}

// checkColours refuses a rollout whose extra colour (web-canary,
// web-preview) could not be created: the stack declares a service of that
// name, or the name with the stack's prefix is one Swarm refuses.
func (p *project) checkColours(stack string, cfg *composetypes.Config, ord Ordering) error {
	declared := map[string]bool{}
	for _, svc := range cfg.Services {
		declared[svc.Name] = true
	}
	for _, svc := range cfg.Services {
		o := ord[svc.Name]
		if o.Rollout == nil {
			continue
		}
		field := "services." + svc.Name + "." + Extension + ".rollout"
		colour := rollout.ColourName(svc.Name, o.Rollout.Strategy)
		if declared[colour] {
			return p.fault(field, fmt.Errorf("%w: the stack declares a service %s, the name the rollout of %s gives its extra colour", errOrdering, colour, svc.Name))
		}
		if err := CheckName("service", stack+"_"+colour); err != nil {
			return p.fault(field, fmt.Errorf("%w: the rollout's extra colour: %w", errOrdering, err))
		}
	}
	return nil
}

// parseOrder checks one x-flotilla value; sub names the key at fault.
func parseOrder(raw any, mode string) (Order, string, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return Order{}, "", fmt.Errorf("%w: want a mapping with wave, hook, deletePolicy or rollout, not %T", errOrdering, raw)
	}
	var o Order
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "wave":
			n, ok := asInt(v)
			if !ok || n < -maxWave || n > maxWave {
				return Order{}, k, fmt.Errorf("%w: wave must be a whole number from %d to %d, not %v", errOrdering, -maxWave, maxWave, v)
			}
			o.Wave = n
		case "hook":
			s, _ := v.(string)
			switch HookPhase(s) {
			case PreSync, PostSync, SyncFail:
				o.Hook = HookPhase(s)
			default:
				return Order{}, k, fmt.Errorf("%w: hook must be PreSync, PostSync or SyncFail, not %v", errOrdering, v)
			}
		case "deletePolicy":
			s, _ := v.(string)
			switch DeletePolicy(s) {
			case BeforeHookCreation, HookSucceeded, HookFailed:
				o.DeletePolicy = DeletePolicy(s)
			default:
				return Order{}, k, fmt.Errorf("%w: deletePolicy must be BeforeHookCreation, HookSucceeded or HookFailed, not %v", errOrdering, v)
			}
		case "rollout":
			spec, err := rollout.Parse(v)
			if err != nil {
				sub := k
				var fe *rollout.FieldError
				if errors.As(err, &fe) && fe.Field != "" {
					sub += "." + fe.Field
					err = fe.Err
				}
				return Order{}, sub, fmt.Errorf("%w: %w", errOrdering, err)
			}
			o.Rollout = &spec
		case "env":
			// Environment values from a secret store: read by envRefs.
		default:
			return Order{}, k, fmt.Errorf("%w: unknown key %q (known: wave, hook, deletePolicy, rollout, env)", errOrdering, k)
		}
	}
	switch {
	case o.Hook == "" && o.DeletePolicy != "":
		return Order{}, "deletePolicy", fmt.Errorf("%w: deletePolicy applies to hooks only; this service has no hook", errOrdering)
	case o.Hook != "" && mode != "replicated-job":
		return Order{}, "hook", fmt.Errorf("%w: a hook must be a job: set deploy.mode to replicated-job (it is %q)", errOrdering, cmp(mode, "replicated"))
	case o.Rollout != nil && o.Hook != "":
		return Order{}, "rollout", fmt.Errorf("%w: a hook job runs to completion and takes no traffic; it cannot have a rollout", errOrdering)
	case o.Rollout != nil && mode != "" && mode != "replicated":
		return Order{}, "rollout", fmt.Errorf("%w: a rollout needs deploy.mode replicated (it is %q): a global service runs one task per node and a job takes no traffic, so neither can be split between two colours", errOrdering, mode)
	case o.Hook != "" && o.DeletePolicy == "":
		o.DeletePolicy = BeforeHookCreation
	}
	return o, "", nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		if n > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	}
	return 0, false
}

// minOrderingVersion is the first compose schema that allows extension
// fields on services.
const minOrderingVersion = "3.7"

// keepOrdering puts each service's checked x-flotilla back, in one spelling,
// after stripExtras dropped every extension: two files that mean the same
// order give the same manifest. The version is raised where the schema of
// the one the file named would refuse the field.
func keepOrdering(cfg *composetypes.Config, ord Ordering) {
	if len(ord) == 0 {
		return
	}
	for i := range cfg.Services {
		o, ok := ord[cfg.Services[i].Name]
		if !ok {
			continue
		}
		v := map[string]any{}
		if o.Wave != 0 {
			v["wave"] = o.Wave
		}
		if o.Hook != "" {
			v["hook"] = string(o.Hook)
			v["deletePolicy"] = string(o.DeletePolicy)
		}
		if o.Rollout != nil {
			v["rollout"] = o.Rollout.Value()
		}
		if len(v) > 0 {
			cfg.Services[i].Extras = map[string]any{Extension: v}
		}
	}
	if versions.LessThan(cfg.Version, minOrderingVersion) {
		cfg.Version = minOrderingVersion
	}
}

// ReadOrdering returns the order a manifest gives its services. A manifest
// without any x-flotilla field costs no parse.
func ReadOrdering(manifest string) (Ordering, error) {
	if !strings.Contains(manifest, Extension) {
		return Ordering{}, nil
	}
	_, cfg, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	ord := Ordering{}
	for _, svc := range cfg.Services {
		raw, ok := svc.Extras[Extension]
		if !ok {
			continue
		}
		o, sub, err := parseOrder(raw, svc.Deploy.Mode)
		if err != nil {
			return nil, fmt.Errorf("manifest: services.%s.%s.%s: %w", svc.Name, Extension, sub, err)
		}
		ord[svc.Name] = o
	}
	return ord, nil
}

// Subset returns a manifest that declares only the named services (unscoped)
// and the networks, configs, secrets and volumes they use, with x-flotilla
// removed. It is what one wave, or one hook, deploys: everything else in the
// stack is left as it is, since a deploy never removes anything.
//
// A hook job with no restart policy of its own gets condition none: a hook
// that failed must stay failed for the sync to see it, not be restarted by
// Swarm forever.
func Subset(manifest string, services []string) (string, error) {
	m, cfg, err := decodeManifest(manifest)
	if err != nil {
		return "", err
	}
	want := map[string]bool{}
	for _, s := range services {
		want[s] = true
	}
	nets, cfgs, secs, vols := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	kept := cfg.Services[:0]
	for _, svc := range cfg.Services {
		if !want[svc.Name] {
			continue
		}
		delete(want, svc.Name)
		if raw, ok := svc.Extras[Extension]; ok {
			if o, _, err := parseOrder(raw, svc.Deploy.Mode); err == nil && o.Hook != "" && svc.Deploy.RestartPolicy == nil {
				svc.Deploy.RestartPolicy = &composetypes.RestartPolicy{Condition: "none"}
			}
		}
		svc.Extras = nil
		if len(svc.Networks) == 0 {
			nets["default"] = true
		}
		for n := range svc.Networks {
			nets[n] = true
		}
		for _, c := range svc.Configs {
			cfgs[c.Source] = true
		}
		for _, s := range svc.Secrets {
			secs[s.Source] = true
		}
		for _, v := range svc.Volumes {
			if v.Type == "volume" && v.Source != "" {
				vols[v.Source] = true
			}
		}
		kept = append(kept, svc)
	}
	if len(want) > 0 {
		return "", fmt.Errorf("manifest subset: no service %s", strings.Join(slices.Sorted(maps.Keys(want)), ", "))
	}
	cfg.Services = kept
	maps.DeleteFunc(cfg.Networks, func(k string, _ composetypes.NetworkConfig) bool { return !nets[k] })
	maps.DeleteFunc(cfg.Volumes, func(k string, _ composetypes.VolumeConfig) bool { return !vols[k] })
	out := &manifestOut{Kind: manifestKind, Stack: m.Stack, Compose: cfg,
		Configs: map[string]manifestConfig{}, Secrets: map[string]manifestSecret{}}
	maps.DeleteFunc(cfg.Configs, func(k string, _ composetypes.ConfigObjConfig) bool { return !cfgs[k] })
	for _, c := range cfg.Configs {
		if mc, ok := m.Configs[c.Name]; ok && !c.External.External {
			out.Configs[c.Name] = mc
		}
	}
	maps.DeleteFunc(cfg.Secrets, func(k string, _ composetypes.SecretConfig) bool { return !secs[k] })
	for _, s := range cfg.Secrets {
		if ms, ok := m.Secrets[s.Name]; ok && !s.External.External {
			out.Secrets[s.Name] = ms
		}
	}
	return encodeManifest(out)
}
