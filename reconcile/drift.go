package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/events"
)

// Swarm's update states that mean the service is in motion or was reverted.
const (
	updateUpdating          = "updating"
	updateRollbackStarted   = "rollback_started"
	updateRollbackCompleted = "rollback_completed"
	updateRollbackPaused    = "rollback_paused"
)

// detectDrift compares every declared service's live spec with what the
// manifest converts to (see compareServices for how each is judged) and
// records the result in the status. It runs only when the repository has not
// moved (the plan is unchanged): otherwise applying git is the answer
// anyway, and the reason to report is git.
//
// If the backend implements LiveDrift the comparison is made, otherwise the
// status says live drift is unavailable and nothing is guessed. Without
// NetworkNamer, network attachments alone go uncompared.
func (c *Controller) detectDrift(ctx context.Context, p *pass) error {
	p.status.Drift, p.status.RolledBack, p.status.Warnings = nil, nil, nil
	p.drifted, p.missing = nil, nil
	p.status.Warnings = append(p.status.Warnings, apiFieldWarnings(p)...)
	if p.action != charts.Unchanged {
		return nil
	}
	if c.steadyDrift(ctx, p) {
		c.publish(p)
		return nil
	}
	cmp, ok, err := readComparison(ctx, p, nil)
	if err != nil {
		return transient("drift", err)
	}
	if !ok {
		return nil
	}
	c.restoreNotKept(ctx, p)
	verdicts := compareServices(c.compareInput(p, cmp))
	c.rememberVerdicts(p, verdicts)
	c.noteComparison(ctx, p, cmp, verdicts)
	for _, v := range verdicts {
		if v.notSettling != "" {
			p.status.Warnings = append(p.status.Warnings, v.notSettling)
			p.log.Warn("service does not settle; compared anyway", "service", v.short)
		}
		p.status.Warnings = append(p.status.Warnings, v.notKeptNotes...)
		switch v.verdict {
		case verdictMissing:
			p.missing = append(p.missing, v.scoped)
			p.status.Drift = append(p.status.Drift, application.Drift{Service: v.short, Field: "service", Desired: "present", Live: "(none)"})
		case verdictRolledBack:
			p.status.RolledBack = append(p.status.RolledBack, v.short)
		case verdictDrifted:
			p.drifted = append(p.drifted, v.scoped)
			for _, ch := range v.changes {
				p.status.Drift = append(p.status.Drift, application.Drift{
					Service: v.short, Field: ch.Field, Desired: ch.Desired, Live: ch.Live, Masked: ch.Masked,
				})
			}
		case verdictUpdating, verdictSynced:
		}
	}
	if len(p.status.Drift) > 0 {
		p.status.Sync = application.OutOfSync
		p.status.SyncReason = application.ReasonDrift
		p.log.Warn("live drift detected", "services", len(p.drifted)+len(p.missing), "fields", len(p.status.Drift))
	}
	c.publish(p)
	return nil
}

// compareInput gathers what compareServices needs beyond the comparison:
// the controller's memory of this application and the task counts of the
// pass's observation.
func (c *Controller) compareInput(p *pass, cmp comparison) compareInput {
	in := compareInput{
		stack:      p.app.Stack,
		cmp:        cmp,
		rolledBack: c.rolledBackSet(p.app.Name, p.rendered.Manifest),
		tasks:      map[string]uint64{},
		now:        c.now(),
	}
	c.mu.Lock()
	if a, ok := c.apps[p.app.Name]; ok {
		in.mem = a.drift.clone()
	}
	c.mu.Unlock()
	if p.snapshot != nil && p.snapshot.err == nil {
		for _, s := range p.snapshot.stacks[p.app.Stack] {
			in.tasks[p.app.Stack+"_"+s.Name] = s.Desired
		}
	}
	return in
}

// rememberVerdicts keeps what the next pass needs from this one: services
// rolled back under this manifest, when each moving service started moving
// (forgotten once it rests), and the not-kept fields that still apply (one
// whose desired or live value changed is forgotten, so it is compared, and
// healed, like any other field again).
func (c *Controller) rememberVerdicts(p *pass, verdicts []serviceVerdict) {
	for _, v := range verdicts {
		if v.verdict == verdictRolledBack {
			c.markRolledBack(p.app.Name, p.rendered.Manifest, v.scoped)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[p.app.Name]
	if !ok {
		return
	}
	m := &a.drift
	if m.motionSince == nil {
		m.motionSince = map[string]time.Time{}
	}
	for _, v := range verdicts {
		if v.inMotionSince.IsZero() {
			delete(m.motionSince, v.scoped)
		} else {
			m.motionSince[v.scoped] = v.inMotionSince
		}
		if v.verdict != verdictSynced && v.verdict != verdictDrifted {
			continue // not compared: what it remembers still stands
		}
		kept := m.notKept[v.scoped]
		for field := range kept {
			if !slices.ContainsFunc(v.notKept, func(ch drift.Change) bool { return ch.Field == field }) {
				delete(kept, field)
			}
		}
		if len(kept) == 0 {
			delete(m.notKept, v.scoped)
		}
	}
}

// apiFieldWarnings names the fields of the manifest the daemon's API version
// cannot carry, which a deploy drops before writing: the repository asks for
// them, and the swarm will not have them. Nothing without an APIVersioner.
func apiFieldWarnings(p *pass) []string {
	av, ok := capability.As[capability.APIVersioner](p.backend)
	if !ok || p.declared == nil {
		return nil
	}
	return p.declared.UnsupportedFields(av.APIVersion())
}

// checkWritesKept reads back the services a write of this pass just made
// and compares them with the manifest. A field that still differs is one
// the daemon did not keep (a field its API version does not know, say):
// writing it again would change nothing but the service's version, every
// pass, forever. It is remembered with the value written and the value kept,
// reported, and left alone until either changes. A read that fails only
// loses this check; the write itself succeeded. Another writer landing
// between the write and the read would look the same; a service whose write
// lost a compare-and-swap in this pass is therefore not judged, and the
// memory lets go as soon as that field's live value moves again.
//
// The read and the comparison run beside the pass's next steps (the sweep
// and the confirmation read the swarm too, and need nothing from it);
// joinReadBacks applies what they found before the pass reports.
func (c *Controller) checkWritesKept(ctx context.Context, p *pass, res *charts.DeployResult) {
	if res == nil || len(res.Created)+len(res.Updated) == 0 {
		return
	}
	// Fresh network names: the batch's listing predates networks this
	// write may have created. The deploy's own resolution of them answers
	// when it covers every attachment read back, as it does unless a
	// service attaches to a node-local network or to one attached behind
	// the controller's back; only then is every network listed.
	q := *p
	q.snapshot = nil
	rb := &readBack{written: slices.Concat(res.Created, res.Updated), done: make(chan struct{})}
	if av, ok := capability.As[capability.APIVersioner](p.backend); ok {
		rb.version = av.APIVersion()
	}
	go func() {
		defer close(rb.done)
		rb.read(ctx, &q, res.Networks)
	}()
	p.readBacks = append(p.readBacks, rb)
}

// readBack is one check of checkWritesKept: the services a write made, by
// short name, and, once done is closed, the fields of each that read back
// otherwise (changes), or the read's error.
type readBack struct {
	written []string
	version string
	done    chan struct{}
	changes map[string][]drift.Change
	err     error
	skipped bool // the backend cannot read live specs
}

// read compares the written services as the swarm now holds them with
// what q's manifest converts to. It touches nothing but rb.
func (rb *readBack) read(ctx context.Context, q *pass, known map[string]string) {
	cmp, ok, err := readComparison(ctx, q, known)
	if err != nil || !ok {
		rb.err, rb.skipped = err, !ok && err == nil
		return
	}
	rb.changes = map[string][]drift.Change{}
	for _, short := range rb.written {
		scoped := q.app.Stack + "_" + short
		d, dok := cmp.desired.Services[scoped]
		l, lok := cmp.live[scoped]
		if !dok || !lok {
			continue
		}
		for _, ch := range drift.Diff(d, l.Spec, cmp.options(scoped)) {
			if !ch.Masked { // a masked rendering cannot tell two values apart
				rb.changes[short] = append(rb.changes[short], ch)
			}
		}
	}
}

// joinReadBacks waits for the pass's read-backs and applies what each
// found: the report, and the memory of fields not kept.
func (c *Controller) joinReadBacks(ctx context.Context, p *pass) {
	for _, rb := range p.readBacks {
		<-rb.done
		c.applyReadBack(ctx, p, rb)
	}
	p.readBacks = nil
}

func (c *Controller) applyReadBack(ctx context.Context, p *pass, rb *readBack) {
	if rb.skipped {
		return
	}
	if rb.err != nil {
		p.log.Warn("could not read back the services just written; a field the daemon drops would go unnoticed", "error", rb.err)
		return
	}
	found := map[string]map[string]capability.NotKeptField{}
	for _, short := range rb.written {
		if slices.Contains(p.status.OutOfBand, short) {
			// Another writer was seen on it during this pass: what
			// reads back may be its write, not what the daemon kept.
			continue
		}
		scoped := p.app.Stack + "_" + short
		for _, ch := range rb.changes[short] {
			if found[scoped] == nil {
				found[scoped] = map[string]capability.NotKeptField{}
			}
			found[scoped][ch.Field] = capability.NotKeptField{Desired: keptSum(ch.Desired), Live: keptSum(ch.Live), APIVersion: rb.version}
			p.status.Warnings = append(p.status.Warnings, notKeptMessage(short, ch, rb.version))
			p.log.Warn("a field written was not kept by the daemon; it will not be rewritten until the repository changes it",
				"service", short, "field", ch.Field, "api", rb.version)
		}
	}
	// What an earlier controller remembered for services not written now
	// must survive this pass's store.
	c.restoreNotKept(ctx, p)
	if stored, changed := c.keepNotKept(p, rb.written, found); changed {
		c.storeNotKept(ctx, p, stored)
	}
}

// comparison is the two sides of a live drift comparison, read once.
type comparison struct {
	desired      *compose.Stack
	live         map[string]swarm.Service
	networkNames map[string]string // nil: attachments are not compared
	// sealed names, per scoped service, the env variables whose desired
	// values were sealed in the manifest: decrypted, so never shown.
	sealed map[string]map[string]bool
}

// options are the drift options for one scoped service.
func (c comparison) options(scoped string) drift.Options {
	return drift.Options{NetworkNames: c.networkNames, MaskEnv: c.sealed[scoped]}
}

// unseal puts the plaintext of the pass's sealed values into the desired
// specs, so they compare with the live ones (which hold the plaintext), and
// remembers which variables they were, so every rendering masks them.
func (c *comparison) unseal(sealed map[string]string) error {
	for name, spec := range c.desired.Services {
		if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
			if keys := compose.SealedEnv(cs.Env); keys != nil {
				if c.sealed == nil {
					c.sealed = map[string]map[string]bool{}
				}
				c.sealed[name] = keys
			}
		}
	}
	if err := compose.Unseal(c.desired, sealed); err != nil {
		return fmt.Errorf("sealed values: %w", err)
	}
	return nil
}

// readComparison reads what the pass's manifest converts to against today's
// swarm and what the swarm holds. If the backend implements LiveDrift both
// halves are read (ok is true); otherwise there is nothing to compare.
// Live services and network names come from the batch's snapshot when there
// is one, so one listing of each serves every application of the batch.
// known, if not nil, names networks by id as a deploy of this pass
// resolved them; it stands in for the listing when it names every network
// the live services attach to.
func readComparison(ctx context.Context, p *pass, known map[string]string) (comparison, bool, error) {
	ld, ok := capability.As[capability.LiveDrift](p.backend)
	if !ok {
		return comparison{}, false, nil
	}
	// Hook jobs are compared with nothing: they are never drift.
	manifest, err := p.serviceManifest()
	if err != nil {
		return comparison{}, false, err
	}
	desired, err := ld.DesiredServices(ctx, manifest, p.app.Stack)
	if err != nil {
		// Converting against today's swarm fails when a config or secret
		// the manifest mounts is gone (the stack was removed by hand): that
		// is drift to report and heal, not a reason to fail every pass. If
		// the backend implements DeclaredLister the manifest is converted by
		// name instead; drift.Diff compares references by name, so the
		// missing ids never count as differences.
		dl, ok := capability.As[capability.DeclaredLister](p.backend)
		if !ok {
			return comparison{}, false, fmt.Errorf("convert for drift: %w", err)
		}
		if desired, err = dl.DeclaredResources(ctx, manifest, p.app.Stack); err != nil {
			return comparison{}, false, fmt.Errorf("convert for drift: %w", err)
		}
	}
	live, ok := p.snapshot.liveServices(ctx, p.backend, p.app.Stack)
	if !ok {
		if live, err = ld.LiveServices(ctx, p.app.Stack); err != nil {
			return comparison{}, false, fmt.Errorf("read live services: %w", err)
		}
	}
	snap := p.snapshot
	if snap == nil {
		snap = &snapshot{}
	}
	names := known
	if names == nil || !attachedWithin(live, known) {
		if names, err = snap.networkNames(ctx, p.backend); err != nil {
			return comparison{}, false, fmt.Errorf("read networks: %w", err)
		}
	}
	cmp := comparison{desired: desired, live: live, networkNames: names}
	if err := cmp.unseal(p.rendered.Sealed); err != nil {
		return comparison{}, false, err
	}
	return cmp, true, nil
}

// correct puts drifted services back to the manifest when selfHeal is on or
// an explicit sync asked for it. Without either, drift is only reported.
func (c *Controller) correct(ctx context.Context, p *pass) error {
	c.checkWritesKept(ctx, p, p.deployed)
	if len(p.drifted)+len(p.missing) == 0 {
		return nil
	}
	a := p.app.SyncPolicy.Automated
	if p.request == nil && (a == nil || !a.SelfHeal) {
		return nil
	}
	heal := slices.Concat(p.drifted)
	manifest, err := p.serviceManifest()
	if err != nil {
		return stalled("correct", err)
	}
	res, err := p.backend.DeployStack(ctx, charts.DeployRequest{
		Stack:    p.app.Stack,
		Manifest: manifest,
		Secrets:  p.rendered.Secrets,
		Sealed:   p.rendered.Sealed,
		Labels:   p.deployLabels(p.latestRevision()),
		Heal:     heal,
		Adopt:    p.app.Adopt,
		// The render's conversion, when the manifest is the rendered one
		// (no hook jobs taken out).
		Conversion: p.conversion,
	})
	if err != nil {
		return transient("correct", fmt.Errorf("correct drift: %w", err))
	}
	p.healed = &res
	c.checkWritesKept(ctx, p, &res)
	p.log.Info("corrected live drift", "services", len(heal)+len(p.missing), "writes", res.Writes)
	c.emit(p, events.DriftCorrected, "", fmt.Sprintf("%d service(s) put back to the repository's spec", len(heal)+len(p.missing)), nil)
	p.status.Corrected, p.status.Drift = p.status.Drift, nil
	p.status.Sync = application.Synced
	p.status.SyncReason = application.ReasonNone
	return nil
}

func updateState(s swarm.Service) string {
	if s.UpdateStatus == nil {
		return ""
	}
	return string(s.UpdateStatus.State)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rolledBackSet returns the services seen rolled back under this manifest;
// a new manifest (git changed) clears them.
func (c *Controller) rolledBackSet(app, manifest string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[app]
	if !ok || a.rolledBackManifest != manifest {
		return nil
	}
	return a.rolledBack
}

func (c *Controller) markRolledBack(app, manifest, service string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[app]
	if !ok {
		return
	}
	if a.rolledBackManifest != manifest {
		a.rolledBackManifest, a.rolledBack = manifest, map[string]bool{}
	}
	a.rolledBack[service] = true
}

// outOfBand returns the notifier a pass hands its backend: a lost
// compare-and-swap is recorded against the application, naming the service.
func (c *Controller) outOfBand(p *pass) func(service string) {
	return func(service string) {
		short := strings.TrimPrefix(service, p.app.Stack+"_")
		if !slices.Contains(p.status.OutOfBand, short) {
			p.status.OutOfBand = append(p.status.OutOfBand, short)
		}
		p.log.Warn("another writer changed a service while it was being written; retried from a fresh read",
			"service", short)
		c.emit(p, events.OutOfBandChange, short, "another writer changed the service during a write; retried from a fresh read", nil)
	}
}

// attachedWithin reports whether every network the live services attach to
// is named in names.
func attachedWithin(live map[string]swarm.Service, names map[string]string) bool {
	for _, s := range live {
		for _, n := range s.Spec.TaskTemplate.Networks {
			if _, ok := names[n.Target]; !ok {
				return false
			}
		}
	}
	return true
}
