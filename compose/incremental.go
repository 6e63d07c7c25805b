package compose

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/cli/cli/compose/convert"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/moby/moby/api/types/swarm"
)

// A render of a changed stack costs what changed: docker/cli's loader and
// convert still decide what every service means, but a service whose own
// YAML and whose surroundings (every top-level section, the interpolation
// variables, the working directory) read the same as in the previous
// render of the same application is not loaded, encoded or converted
// again. Only the services that changed go through the loader and convert,
// in a project made of them and every top-level section, which is all a
// service's meaning can depend on: the loader reads each service on its
// own, and convert resolves a service against the top-level networks,
// volumes, configs and secrets only. YAML anchors and merge keys are
// resolved by the parse, before anything is split.
//
// Anything off the common path — several merged files, decrypted input,
// an error anywhere — is rendered whole, so errors are always the ones
// the whole project gives.

// incrementalMin is the smallest stack rendered incrementally: below it a
// whole render is cheap and keeping the pieces is not worth the memory.
const incrementalMin = 64

// incMode says whether a render may reuse the pieces of an earlier one.
type incMode int

const (
	incAuto incMode = iota // for stacks of incrementalMin services or more
	incOff
	incOn // whatever the size, for tests
)

// incState is what one successful render of an application left for the
// next: its services' pieces, keyed by what they were made from. Once
// stored it is never changed.
type incState struct {
	shared   [sha256.Size]byte    // digest of everything but the services
	top      *composetypes.Config // the loaded top-level sections, no services
	services map[string]*incService
}

// incService is one service's pieces. An entry of a stored incState is
// shared with later states and never changed; a render fills in only the
// entries it made itself.
type incService struct {
	key [sha256.Size]byte          // its YAML and the shared digest
	cfg composetypes.ServiceConfig // as the loader gave it, before render
	// fragment is the service's lines in the manifest, "" until written.
	fragment string
	// spec is its conversion with placeholder ids, made against the
	// manifest without services whose digest is skeleton.
	spec     *swarm.ServiceSpec
	skeleton [sha256.Size]byte
	// nets are the networks the service attaches to, as
	// declaredNetworks counts them.
	nets []string
}

// incRun is one incremental render in progress.
type incRun struct {
	scope string
	next  *incState
	order []string // service names in manifest order, once encoded
	// before and after are the manifest around the services mapping.
	before, after string
	tmpl          *convertTemplate
	// loaded and converted count the services this render ran the
	// loader and convert on.
	loaded, converted int
	// owned are the entries this render made or copied, the only ones it
	// may change.
	owned map[string]bool
}

// loadIncremental is load for a render that may reuse the services of the
// previous render under scope. It sets p.inc when it did.
func (p *project) loadIncremental(scope string, mode incMode) (*composetypes.Config, error) {
	if mode == incOff || len(p.files) != 1 || len(p.sops.cipher) > 0 {
		return p.load()
	}
	f := p.files[0]
	services, ok := f.dict["services"].(map[string]any)
	if !ok || (mode == incAuto && len(services) < incrementalMin) {
		return p.load()
	}
	for _, v := range services {
		if _, ok := v.(map[string]any); !ok {
			return p.load()
		}
	}
	shared := p.sharedDigest(f)
	prev := memo.pieces.get(scope)
	if prev != nil && prev.shared != shared {
		prev = nil
	}
	next := &incState{shared: shared, services: make(map[string]*incService, len(services))}
	missing := map[string]any{}
	for name, v := range services {
		var k [sha256.Size]byte
		if sum, ok := f.sums[name]; ok {
			k = serviceKey(shared, name, textSum(sum))
		} else {
			k = serviceKey(shared, name, v)
		}
		if prev != nil {
			if e, ok := prev.services[name]; ok && e.key == k {
				next.services[name] = e
				continue
			}
		}
		missing[name] = v
		next.services[name] = &incService{key: k}
	}
	if prev != nil {
		next.top = prev.top
	}
	if len(missing) > 0 || next.top == nil {
		mini := maps.Clone(f.dict)
		mini["services"] = missing
		cfg, err := load(p.details([]composeFile{{rel: f.rel, src: f.src, dict: mini}}), loadOptions{})
		if err != nil {
			// The whole project names the error as it always has.
			return p.load()
		}
		for _, s := range cfg.Services {
			if _, ok := missing[s.Name]; !ok {
				return p.load()
			}
			next.services[s.Name].cfg = s
		}
		cfg.Services = nil
		next.top = cfg
	}
	top := next.top
	cfg := &composetypes.Config{
		Filename: top.Filename,
		Version:  top.Version,
		Networks: maps.Clone(top.Networks),
		Volumes:  maps.Clone(top.Volumes),
		Secrets:  maps.Clone(top.Secrets),
		Configs:  maps.Clone(top.Configs),
		Extras:   maps.Clone(top.Extras),
		Services: make(composetypes.Services, 0, len(services)),
	}
	for _, name := range sortedKeys(next.services) {
		s := next.services[name].cfg
		// The only field a render changes in place (sealEnv).
		s.Environment = maps.Clone(s.Environment)
		cfg.Services = append(cfg.Services, s)
	}
	p.inc = &incRun{scope: scope, next: next, owned: map[string]bool{}, loaded: len(missing)}
	for name := range missing {
		p.inc.owned[name] = true
	}
	return cfg, nil
}

// sharedDigest digests what every service of f can depend on besides its
// own YAML: every top-level key but services, the interpolation
// variables and the directory relative paths resolve against.
func (p *project) sharedDigest(f composeFile) [sha256.Size]byte {
	h := sha256.New()
	writeString(h, loaderRoot)
	writeString(h, p.work)
	writeString(h, f.rel)
	writeCanonical(h, len(p.env))
	for _, k := range sortedKeys(p.env) {
		writeString(h, k)
		writeString(h, p.env[k])
	}
	top := maps.Clone(f.dict)
	delete(top, "services")
	writeCanonical(h, top)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// textSum stands, in a service's key, for the parsed value of the text
// whose digest it holds: that value is what the text parses to, and a
// parsed value never writes a textSum.
type textSum [sha256.Size]byte

func serviceKey(shared [sha256.Size]byte, name string, v any) [sha256.Size]byte {
	h := sha256.New()
	h.Write(shared[:])
	writeString(h, name)
	writeCanonical(h, v)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// writeCanonical writes a parsed YAML value so that two values write the
// same bytes only when they are the same value of the same types: map
// keys sorted, every value tagged with its type and strings with their
// length.
func writeCanonical(h hash.Hash, v any) {
	var b [9]byte
	tagged := func(tag byte, n uint64) {
		b[0] = tag
		binary.LittleEndian.PutUint64(b[1:], n)
		h.Write(b[:])
	}
	switch v := v.(type) {
	case nil:
		h.Write([]byte{'n'})
	case textSum:
		h.Write([]byte{'T'})
		h.Write(v[:])
	case string:
		tagged('s', uint64(len(v)))
		h.Write([]byte(v))
	case bool:
		if v {
			h.Write([]byte{'t'})
		} else {
			h.Write([]byte{'f'})
		}
	case int:
		tagged('i', uint64(v))
	case int64:
		tagged('I', uint64(v))
	case uint64:
		tagged('u', v)
	case float64:
		tagged('d', math.Float64bits(v))
	case []any:
		tagged('l', uint64(len(v)))
		for _, e := range v {
			writeCanonical(h, e)
		}
	case map[string]any:
		tagged('m', uint64(len(v)))
		for _, k := range sortedKeys(v) {
			writeString(h, k)
			writeCanonical(h, v[k])
		}
	default:
		writeString(h, fmt.Sprintf("%T\x00%#v", v, v))
	}
}

func writeString(h hash.Hash, s string) { writeCanonical(h, s) }

// encode writes the manifest m. An incremental render writes the services
// it did not encode before on their own and puts every service's lines
// between the rest of the manifest, written without services: yaml.v3
// writes a mapping entry the same way whatever surrounds it at the same
// depth.
func (p *project) encode(m *manifestOut) (string, error) {
	if p.inc == nil {
		return encodeManifest(m)
	}
	text, ok, err := p.inc.encode(m)
	if err != nil || !ok {
		p.inc = nil
		return encodeManifest(m)
	}
	return text, nil
}

const servicesKey = "\n  services:\n"

func (r *incRun) encode(m *manifestOut) (string, bool, error) {
	cfg := m.Compose
	skel := *cfg
	skel.Services = composetypes.Services{}
	mo := *m
	mo.Compose = &skel
	text, err := encodeManifest(&mo)
	if err != nil {
		return "", false, err
	}
	const empty = "\n  services: {}\n"
	i := strings.Index(text, empty)
	if i < 0 || strings.Count(text, empty) != 1 {
		return "", false, nil
	}
	r.before, r.after = text[:i+1], text[i+len(empty):]

	// The order yaml.v3 gives the services' keys.
	index := make(map[string]int, len(cfg.Services))
	for i, s := range cfg.Services {
		index[s.Name] = i
	}
	keys, err := encodeManifest(&manifestOut{Kind: manifestKind, Stack: m.Stack, Compose: &composetypes.Config{Extras: map[string]any{"order": index}}})
	if err != nil {
		return "", false, err
	}
	_, keys, _ = strings.Cut(keys, "\n  order:\n")
	r.order = r.order[:0]
	seen := make([]bool, len(cfg.Services))
	for line := range strings.Lines(keys) {
		j := strings.LastIndex(line, ": ")
		n, err := strconv.Atoi(strings.TrimSpace(line[j+2:]))
		if j < 0 || err != nil || n < 0 || n >= len(seen) || seen[n] {
			return "", false, nil
		}
		seen[n] = true
		r.order = append(r.order, cfg.Services[n].Name)
	}
	if len(r.order) != len(cfg.Services) {
		return "", false, nil
	}

	var b strings.Builder
	size := len(text) + len(servicesKey)
	for _, s := range cfg.Services {
		e := r.next.services[s.Name]
		if e.fragment == "" {
			e = r.own(s.Name)
			frag, ok, err := encodeService(m.Stack, cfg.Version, s)
			if err != nil || !ok {
				return "", false, err
			}
			e.fragment = frag
		}
		size += len(e.fragment)
	}
	b.Grow(size)
	b.WriteString(r.before)
	b.WriteString(servicesKey[1:])
	for _, name := range r.order {
		b.WriteString(r.next.services[name].fragment)
	}
	b.WriteString(r.after)
	return b.String(), true, nil
}

// reused reports whether name is a service a stored render loaded and
// checked exactly as this one would; false for any without r.
func (r *incRun) reused(name string) bool {
	return r != nil && !r.owned[name]
}

// own returns name's entry for this render to change, a copy when it
// belongs to a stored state.
func (r *incRun) own(name string) *incService {
	e := r.next.services[name]
	if !r.owned[name] {
		cp := *e
		e = &cp
		r.next.services[name] = e
		r.owned[name] = true
	}
	return e
}

// encodeService writes one service as the manifest holds it: its key line
// and everything under it.
func encodeService(stack, version string, s composetypes.ServiceConfig) (string, bool, error) {
	text, err := encodeManifest(&manifestOut{Kind: manifestKind, Stack: stack,
		Compose: &composetypes.Config{Version: version, Services: composetypes.Services{s}}})
	if err != nil {
		return "", false, err
	}
	i := strings.Index(text, servicesKey)
	if i < 0 || strings.Count(text, servicesKey) != 1 {
		return "", false, nil
	}
	frag := text[i+len(servicesKey):]
	if !strings.HasPrefix(frag, "    ") || !strings.HasSuffix(frag, "\n") {
		return "", false, nil
	}
	return frag, true, nil
}

// template converts the manifest just encoded, running docker/cli's
// convert only on the services without a conversion made against the same
// top-level sections. ok is false when anything failed: the whole manifest
// is then converted as usual, which gives its error.
func (r *incRun) template(ctx context.Context, stack string) (*convertTemplate, bool) {
	skeleton := r.before + servicesKey[1:len(servicesKey)-1] + " {}\n" + r.after
	sum := sha256.Sum256([]byte(skeleton))
	var b strings.Builder
	b.WriteString(r.before)
	b.WriteString(servicesKey[1:])
	var missing []string
	for _, name := range r.order {
		e := r.next.services[name]
		if e.spec != nil && e.skeleton == sum {
			continue
		}
		e = r.own(name)
		e.spec = nil
		missing = append(missing, name)
		b.WriteString(e.fragment)
	}
	b.WriteString(r.after)
	mini := b.String()
	if len(missing) == 0 {
		mini = skeleton
	}
	t := &convertTemplate{}
	st, cfg, err := convertManifest(ctx, mini, stack, func(ns convert.Namespace, cfg *composetypes.Config) (*refClient, error) {
		t.configNames, t.secretNames = referenceNames(ns, cfg)
		return &refClient{placeholders: true}, nil
	})
	if err != nil || len(cfg.Services) != len(missing) {
		return nil, false
	}
	ns := convert.NewNamespace(stack)
	for _, s := range cfg.Services {
		e := r.next.services[s.Name]
		spec, ok := st.Services[ns.Scope(s.Name)]
		if e == nil || e.spec != nil || !ok {
			return nil, false
		}
		e.spec, e.skeleton = &spec, sum
		e.nets = sortedKeys(declaredNetworks([]composetypes.ServiceConfig{s}))
	}
	declared := map[string]struct{}{}
	for _, name := range r.order {
		e := r.next.services[name]
		st.Services[ns.Scope(name)] = *e.spec
		for _, n := range e.nets {
			declared[n] = struct{}{}
		}
	}
	st.Networks, st.ExternalNetworks = stackNetworks(ns, cfg.Networks, declared)
	t.stack = st
	r.tmpl, r.converted = t, len(missing)
	return t, true
}

// incMemo keeps one state per scope, dropping arbitrary ones to make room.
type incMemo struct {
	mu         sync.Mutex
	maxBytes   int
	maxEntries int
	bytes      int
	m          map[string]incEntry
}

type incEntry struct {
	state *incState
	size  int
}

func (c *incMemo) get(scope string) *incState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[scope].state
}

// store keeps p's state when the render is complete and read nothing
// decrypted; size is its manifest's length.
func (c *incMemo) store(p *project, size int) {
	r := p.inc
	if r == nil || r.tmpl == nil || len(p.sops.cipher) > 0 || p.usedRefs || size > c.maxBytes {
		return
	}
	for _, e := range r.next.services {
		if e.fragment == "" || e.spec == nil {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]incEntry{}
	}
	if old, ok := c.m[r.scope]; ok {
		c.bytes -= old.size
		delete(c.m, r.scope)
	}
	for k, old := range c.m {
		if c.bytes+size <= c.maxBytes && len(c.m) < c.maxEntries {
			break
		}
		delete(c.m, k)
		c.bytes -= old.size
	}
	c.m[r.scope] = incEntry{state: r.next, size: size}
	c.bytes += size
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }
