package reconcile

import (
	"context"
	"slices"
	"sync"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/compose"
)

// steadyMark is what the last comparison of one render with the swarm saw,
// kept when every declared service was in sync and at rest. The live side
// is marked by each service's id and version, which Swarm moves on every
// write to the service by anyone, and by the names of the networks it is
// attached to; a pass that finds the same marks and the same API version
// would compare the same two specs again and conclude the same: it skips
// the conversion and the field-by-field comparison. Any write behind the
// controller's back moves a version, and the next pass compares in full.
type steadyMark struct {
	mu    sync.Mutex
	valid bool
	live  map[string]liveMark // scoped name → mark, every service of the stack
	// nets names each network the stack's services are attached to, by id
	// ("" for an id the swarm did not list): a network removed or
	// recreated under the same name changes what an attachment compares
	// as without moving the service's version. Networks no service of the
	// stack uses do not count.
	nets map[string]string
	api  string

	// declared is declaredOf for this render, kept because a steady pass
	// would otherwise sort and walk every declared service again to judge
	// health; declFor and declStack say which conversion and stack it was
	// made from.
	declared  []expected
	declFor   *compose.Stack
	declStack string
}

// liveMark identifies one state of one live service.
type liveMark struct {
	id      string
	version uint64
	update  swarm.UpdateState
}

// markOf marks s; ok is false when it carries no version (a backend that
// does not report one), which no mark can then vouch for.
func markOf(s swarm.Service) (liveMark, bool) {
	m := liveMark{id: s.ID, version: s.Version.Index}
	if s.UpdateStatus != nil {
		m.update = s.UpdateStatus.State
	}
	return m, s.Version.Index != 0
}

// sameMarks reports whether live is, service by service, what m marked.
// It allocates nothing: it runs on every steady pass.
func (m *steadyMark) sameMarks(live map[string]swarm.Service, nets map[string]string) bool {
	if len(live) != len(m.live) {
		return false
	}
	for name, s := range live {
		mk, ok := markOf(s)
		if !ok || m.live[name] != mk {
			return false
		}
	}
	for id, name := range m.nets {
		if nets[id] != name {
			return false
		}
	}
	return true
}

// mark records live and the names of the networks it is attached to; ok is
// false when some service carries no version.
func (m *steadyMark) mark(live map[string]swarm.Service, nets map[string]string) bool {
	m.live = make(map[string]liveMark, len(live))
	m.nets = map[string]string{}
	for name, s := range live {
		mk, ok := markOf(s)
		if !ok {
			return false
		}
		m.live[name] = mk
		for _, n := range s.Spec.TaskTemplate.Networks {
			m.nets[n.Target] = nets[n.Target]
		}
	}
	return true
}

// steadyInputs are the parts of a pass a steady mark is checked against,
// read from the batch's snapshot only, so checking costs no request. ok is
// false when the pass has no batched read to check with.
func steadyInputs(ctx context.Context, p *pass) (live map[string]swarm.Service, nets map[string]string, api string, ok bool) {
	if p.snapshot == nil {
		return nil, nil, "", false
	}
	live, ok = p.snapshot.liveServices(ctx, p.backend, p.app.Stack)
	if !ok {
		return nil, nil, "", false
	}
	nets, err := p.snapshot.networkNames(ctx, p.backend)
	if err != nil {
		return nil, nil, "", false
	}
	if av, ok := capability.As[capability.APIVersioner](p.backend); ok {
		api = av.APIVersion()
	}
	return live, nets, api, true
}

// steadyDrift reports whether the pass's render was last compared with the
// swarm in exactly the state the batch now reads, and found in sync: the
// comparison would find no drift again. Only a render the cache keeps has
// a mark; the controller's memory of the application (motion, fields not
// kept, rollbacks) must be empty, since each of those changes a verdict
// with time or by itself.
func (c *Controller) steadyDrift(ctx context.Context, p *pass) bool {
	m := c.renders.steadyOf(p.app.Name, p.rendered)
	if m == nil {
		return false
	}
	live, nets, api, ok := steadyInputs(ctx, p)
	if !ok {
		return false
	}
	if !c.driftMemoryEmpty(p) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.valid && m.api == api && m.sameMarks(live, nets)
}

// noteComparison keeps a steady mark for the pass's render when cmp, read
// in the state steadyInputs gives, found every declared service in sync and
// at rest, and forgets it otherwise.
func (c *Controller) noteComparison(ctx context.Context, p *pass, cmp comparison, verdicts []serviceVerdict) {
	m := c.renders.steadyOf(p.app.Name, p.rendered)
	if m == nil {
		return
	}
	clean := len(verdicts) == len(cmp.desired.Services)
	for _, v := range verdicts {
		if v.verdict != verdictSynced || len(v.changes)+len(v.notKept) > 0 || v.notSettling != "" || !v.inMotionSince.IsZero() {
			clean = false
		}
	}
	live, nets, api, ok := steadyInputs(ctx, p)
	empty := c.driftMemoryEmpty(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.valid = false
	if !clean || !ok || !empty || !m.mark(cmp.live, cmp.networkNames) {
		m.live, m.nets = nil, nil
		return
	}
	// The comparison must have seen what the mark will be checked against:
	// the batch's live services and network names.
	m.valid = m.sameMarks(live, nets)
	m.api = api
}

// driftMemoryEmpty reports whether the controller remembers nothing about
// the application's services that a comparison would read.
func (c *Controller) driftMemoryEmpty(p *pass) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[p.app.Name]
	if !ok {
		return false
	}
	return len(a.drift.motionSince) == 0 && len(a.drift.notKept) == 0 && (a.rolledBackManifest != p.rendered.Manifest || len(a.rolledBack) == 0)
}

// declaredOnce is declaredOf, computed once per render the cache keeps and
// per conversion of it: the list depends only on the manifest and the stack
// name. The slice is shared between passes, so it is clipped: a caller that
// appends gets its own copy.
func (c *Controller) declaredOnce(p *pass) []expected {
	m := c.renders.steadyOf(p.app.Name, p.rendered)
	if m == nil || p.declared == nil {
		return declaredOf(p)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.declFor != p.declared || m.declStack != p.app.Stack {
		m.declared, m.declFor, m.declStack = slices.Clip(declaredOf(p)), p.declared, p.app.Stack
	}
	return m.declared
}
