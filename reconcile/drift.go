package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/swarm"

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

// detectDrift compares every settled service's live spec with what the
// manifest converts to. It runs only when the repository has not moved
// (the plan is unchanged): otherwise applying git is the answer anyway, and
// the reason to report is git.
//
// If the backend implements LiveDrift the comparison is made, otherwise the
// status says live drift is unavailable and nothing is guessed. Without
// NetworkNamer, network attachments alone go uncompared.
func (c *Controller) detectDrift(ctx context.Context, p *pass) error {
	p.status.Drift, p.status.RolledBack = nil, nil
	p.drifted, p.missing = nil, nil
	if p.action != charts.Unchanged {
		return nil
	}
	cmp, ok, err := readComparison(ctx, p)
	if err != nil {
		return transient("drift", err)
	}
	if !ok {
		return nil
	}
	desired, live := cmp.desired, cmp.live
	rolledBack := c.rolledBackSet(p.app.Name, p.rendered.Manifest)
	for _, scoped := range sortedKeys(desired.Services) {
		short := strings.TrimPrefix(scoped, p.app.Stack+"_")
		l, ok := live[scoped]
		if !ok {
			p.missing = append(p.missing, scoped)
			p.status.Drift = append(p.status.Drift, application.Drift{Service: short, Field: "service", Desired: "present", Live: "(none)"})
			continue
		}
		if st := updateState(l); st == updateUpdating || st == updateRollbackStarted {
			continue // in motion: judged by health, compared once settled
		} else if st == updateRollbackCompleted || st == updateRollbackPaused || rolledBack[scoped] {
			// Swarm reverted an update it could not complete. The live
			// spec is the previous one on purpose; pushing the failing
			// spec again would fail again. It waits for git to change.
			p.status.RolledBack = append(p.status.RolledBack, short)
			c.markRolledBack(p.app.Name, p.rendered.Manifest, scoped)
			continue
		}
		changes := drift.Diff(desired.Services[scoped], l.Spec, cmp.options(scoped))
		if len(changes) == 0 {
			continue
		}
		p.drifted = append(p.drifted, scoped)
		for _, ch := range changes {
			p.status.Drift = append(p.status.Drift, application.Drift{
				Service: short, Field: ch.Field, Desired: ch.Desired, Live: ch.Live, Masked: ch.Masked,
			})
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
// Network names come from the batch's snapshot when there is one, so one
// listing serves every application of the batch.
func readComparison(ctx context.Context, p *pass) (comparison, bool, error) {
	ld, ok := capability.As[capability.LiveDrift](p.backend)
	if !ok {
		return comparison{}, false, nil
	}
	desired, err := ld.DesiredServices(ctx, p.rendered.Manifest, p.app.Stack)
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
		if desired, err = dl.DeclaredResources(ctx, p.rendered.Manifest, p.app.Stack); err != nil {
			return comparison{}, false, fmt.Errorf("convert for drift: %w", err)
		}
	}
	live, err := ld.LiveServices(ctx, p.app.Stack)
	if err != nil {
		return comparison{}, false, fmt.Errorf("read live services: %w", err)
	}
	snap := p.snapshot
	if snap == nil {
		snap = &snapshot{}
	}
	names, err := snap.networkNames(ctx, p.backend)
	if err != nil {
		return comparison{}, false, fmt.Errorf("read networks: %w", err)
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
	if len(p.drifted)+len(p.missing) == 0 {
		return nil
	}
	a := p.app.SyncPolicy.Automated
	if p.request == nil && (a == nil || !a.SelfHeal) {
		return nil
	}
	heal := slices.Concat(p.drifted)
	res, err := p.backend.DeployStack(ctx, charts.DeployRequest{
		Stack:    p.app.Stack,
		Manifest: p.rendered.Manifest,
		Secrets:  p.rendered.Secrets,
		Sealed:   p.rendered.Sealed,
		Labels:   p.deployLabels(p.latestRevision()),
		Heal:     heal,
		Adopt:    p.app.Adopt,
	})
	if err != nil {
		return transient("correct", fmt.Errorf("correct drift: %w", err))
	}
	p.healed = &res
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
