package sweep

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// RunInput is what Run needs besides the backend. The fields mean what the
// Input fields of the same name mean.
type RunInput struct {
	Stack  string
	Owner  string
	Owners []string
	// Current is what the revision being applied declares (as
	// compose.Convert gives it); an empty Stack for an application that no
	// longer declares the stack at all. Nil deletes nothing.
	Current       *compose.Stack
	RetainRotated int
	PruneVolumes  bool
	// Failures is the previous Report's Failures.
	Failures map[string]int
	// DryRun decides and reports but deletes nothing, for diff and
	// sync --dry-run.
	DryRun bool
}

// Report says what one sweep did, or would have done.
type Report struct {
	Plan Plan
	// DryRun means nothing was deleted: Plan.Delete is what a sweep would
	// remove. DryRunCause is empty when the caller asked for a dry run and
	// names the missing capability when the backend forced one.
	DryRun      bool
	DryRunCause string
	// Degraded lists the parts of the sweep lost for lack of a capability,
	// in the words status shows.
	Degraded []string
	Removed  []Item
	Failed   []Failure
	// Deferred were not attempted because a service using them could not be
	// removed; they are not counted as failures.
	Deferred []Item
	// OwnStack is set when the backend refused a removal because the stack
	// is the controller's own. It is one flag however many refusals there
	// were, and a refusal is not a failure: retrying cannot change it.
	OwnStack bool
	Refused  []Item
	// Failures is what to pass as RunInput.Failures on the next pass:
	// consecutive failures per resource still to be deleted.
	Failures map[string]int
}

// Failure is one deletion that failed on this pass.
type Failure struct {
	Item
	Error string
	// Count is the consecutive failures of this resource, this one included.
	Count int
}

// Stuck reports whether the failure deserves to be reported loudly.
func (f Failure) Stuck() bool { return f.Count >= StuckAfter }

// Stuck lists the failures that reached StuckAfter.
func (r Report) Stuck() []Failure {
	var out []Failure
	for _, f := range r.Failed {
		if f.Stuck() {
			out = append(out, f)
		}
	}
	return out
}

// Messages renders the report as lines for status, events and diff output.
func (r Report) Messages() []string {
	var out []string
	out = append(out, r.Degraded...)
	if r.OwnStack {
		out = append(out, fmt.Sprintf("the controller's own stack is not swept: the backend refused to remove %d resource(s)", len(r.Refused)))
	}
	if r.DryRun {
		suffix := ""
		if r.DryRunCause != "" {
			suffix = ": " + r.DryRunCause
		}
		for _, it := range r.Plan.Delete {
			out = append(out, "would remove "+it.String()+suffix)
		}
	}
	for _, it := range r.Removed {
		out = append(out, "removed "+it.String())
	}
	for _, f := range r.Failed {
		if f.Stuck() {
			out = append(out, fmt.Sprintf("could not remove %s %d times in a row, retrying every pass: %s", f.Item, f.Count, f.Error))
		} else {
			out = append(out, fmt.Sprintf("could not remove %s, will retry: %s", f.Item, f.Error))
		}
	}
	for _, it := range r.Deferred {
		out = append(out, fmt.Sprintf("did not remove %s: %s", it, it.Reason))
	}
	for _, it := range r.Plan.Kept {
		out = append(out, fmt.Sprintf("kept %s: %s", it, it.Reason))
	}
	for _, it := range r.Plan.Unmanaged {
		out = append(out, fmt.Sprintf("unmanaged %s, not touched: %s", it, it.Reason))
	}
	for _, u := range r.Plan.Unproven {
		out = append(out, "could not check the claims of "+u)
	}
	return out
}

// Run sweeps one stack: it reads what the swarm holds and what the stack's
// records declared, decides, and removes what the plan allows in its order.
//
// Each capability it lacks costs its part and is named in Report.Degraded:
// without ResourceLister only services are swept; without LiveDrift only
// services are too, because no spec says what else is still in use; without
// DeclaredLister the history is converted with LiveDrift.DesiredServices, so
// a record that mounted something since deleted fails and proves nothing;
// without OwnerStamps what a deploy stopped before its record created is
// reported as unmanaged rather than swept; without ResourceRemover the plan is reported as a dry run.
//
// A failed read returns an error and deletes nothing. A failed deletion does
// not: it is reported, counted in Report.Failures and retried next pass.
func Run(ctx context.Context, b charts.Backend, in RunInput) (Report, error) {
	rep := Report{Failures: maps.Clone(in.Failures)}
	if rep.Failures == nil {
		rep.Failures = map[string]int{}
	}
	// The three reads are independent: made at once, the sweep after a
	// deploy waits for the slowest, not for their sum. Reading them in any
	// order decides the same: an object made between two of them is in the
	// live read without a claim in the history, or in neither, and is left
	// alone either way.
	var (
		live             Live
		history          []Claim
		vols             map[string]string
		liveDeg, histDeg []string
	)
	vs, sweepsVolumes := capability.As[capability.VolumeSweeper](b)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		live, liveDeg, err = readLiveOwned(gctx, b, in.Stack)
		return err
	})
	g.Go(func() (err error) {
		history, histDeg, err = readHistory(gctx, b, in.Stack)
		return err
	})
	if sweepsVolumes {
		g.Go(func() (err error) {
			vols, err = vs.LiveVolumes(gctx, in.Stack)
			return err
		})
	}
	err := g.Wait()
	rep.Degraded = append(append(rep.Degraded, liveDeg...), histDeg...)
	if err != nil {
		return rep, fmt.Errorf("sweep %s: %w", in.Stack, err)
	}
	coverSwarm := false
	var nodes []string
	if sweepsVolumes {
		live.Volumes = vols
		// A manager lists its own node's volumes only: the listing is the
		// whole swarm's when the swarm is that one node, and that is known
		// only if b implements SwarmSizer. With no volume listed or ever
		// declared, no decision reads the node count, so the node listing
		// (the slowest read of a sweep here, about 20 ms) is skipped.
		if sz, ok := capability.As[capability.SwarmSizer](b); ok && !volumeFree(vols, history) {
			n, err := sz.SwarmNodes(ctx)
			if err == nil && n == 1 {
				coverSwarm = true
			}
			// The names only make the report say where to remove what is
			// kept; a swarm of one node needs none, and a failed read
			// leaves the report saying "each node".
			if nn, ok := capability.As[capability.SwarmNodeNamer](b); ok && err == nil && n > 1 {
				if names, err := nn.SwarmNodeNames(ctx); err == nil {
					nodes = names
				}
			}
		} else if in.PruneVolumes {
			rep.Degraded = append(rep.Degraded, (&capability.ErrUnavailable{Feature: "volume removal", Capability: "SwarmSizer"}).Error())
		}
	} else if in.PruneVolumes {
		rep.Degraded = append(rep.Degraded, (&capability.ErrUnavailable{Feature: "volume sweep", Capability: "VolumeSweeper"}).Error())
	}

	rep.Plan = Decide(Input{
		Stack:         in.Stack,
		Owner:         in.Owner,
		Owners:        in.Owners,
		Current:       in.Current,
		History:       history,
		Live:          live,
		RetainRotated: in.RetainRotated,
		PruneVolumes:  in.PruneVolumes,
		Failures:      in.Failures,

		VolumesCoverSwarm: coverSwarm,
		Nodes:             nodes,
	})

	rm, ok := capability.As[capability.ResourceRemover](b)
	if !ok {
		lost := &capability.ErrUnavailable{Feature: "removal", Capability: "ResourceRemover"}
		rep.Degraded = append(rep.Degraded, lost.Error())
		rep.DryRun, rep.DryRunCause = true, "backend lacks ResourceRemover"
	}
	if in.DryRun {
		rep.DryRun, rep.DryRunCause = true, ""
	}
	if rep.DryRun {
		return rep, nil
	}
	return rep, remove(ctx, b, rm, live.ServiceRefs, &rep)
}

// remove deletes the plan's items in order and records each outcome. A
// network, config or secret used by a service that could not be removed is
// not tried: the daemon would refuse it, and counting that refusal would
// blame the wrong resource.
func remove(ctx context.Context, b charts.Backend, rm capability.ResourceRemover, refs map[string][]string, rep *Report) error {
	next := map[string]int{}
	failedServices := map[string]bool{}
	for i, it := range rep.Plan.Delete {
		if err := ctx.Err(); err != nil {
			for _, rest := range rep.Plan.Delete[i:] {
				if rest.Failures > 0 {
					next[rest.Key()] = rest.Failures
				}
			}
			rep.Failures = next
			return err
		}
		if blockers := usedByAny(refs[it.Key()], failedServices); len(blockers) > 0 {
			it.Reason = "service " + strings.Join(blockers, ", ") + " that uses it could not be removed"
			rep.Deferred = append(rep.Deferred, it)
			if it.Failures > 0 {
				next[it.Key()] = it.Failures
			}
			continue
		}
		err := removeOne(ctx, b, rm, it)
		switch {
		case err == nil:
			rep.Removed = append(rep.Removed, it)
		case errors.Is(err, capability.ErrOwnStack):
			rep.OwnStack = true
			rep.Refused = append(rep.Refused, it)
			if it.Kind == KindService {
				failedServices[it.Name] = true
			}
		default:
			f := Failure{Item: it, Error: err.Error(), Count: it.Failures + 1}
			rep.Failed = append(rep.Failed, f)
			next[it.Key()] = f.Count
			if it.Kind == KindService {
				failedServices[it.Name] = true
			}
		}
	}
	rep.Failures = next
	return nil
}

func usedByAny(users []string, services map[string]bool) []string {
	var out []string
	for _, u := range users {
		if services[u] {
			out = append(out, u)
		}
	}
	return out
}

func removeOne(ctx context.Context, b charts.Backend, rm capability.ResourceRemover, it Item) error {
	switch it.Kind {
	case KindService:
		return rm.RemoveService(ctx, it.ID)
	case KindNetwork:
		return rm.RemoveNetwork(ctx, it.ID)
	case KindConfig:
		return rm.RemoveConfig(ctx, it.ID)
	case KindSecret:
		return rm.RemoveSecret(ctx, it.ID)
	case KindVolume:
		if vs, ok := capability.As[capability.VolumeSweeper](b); ok {
			return vs.RemoveVolume(ctx, it.Name)
		}
		return fmt.Errorf("remove volume %s: %w", it.Name, errors.ErrUnsupported)
	}
	return fmt.Errorf("remove %s: unknown kind", it)
}

// ownerKeys keys owner stamps the way Live.Owners is keyed.
func ownerKeys(o capability.Owners) map[string]string {
	out := map[string]string{}
	for k, m := range map[Kind]map[string]string{KindService: o.Services, KindNetwork: o.Networks, KindConfig: o.Configs, KindSecret: o.Secrets} {
		for name, owner := range m {
			out[Key(k, name)] = owner
		}
	}
	return out
}

// readLiveOwned reads the stack's resources and their owner stamps. If b
// implements LiveResources that is one listing of each kind; otherwise
// readLive and, if b implements OwnerStamps, LiveOwners read them, each
// listing of its own.
func readLiveOwned(ctx context.Context, b charts.Backend, stack string) (Live, []string, error) {
	if lr, ok := capability.As[capability.LiveResources](b); ok {
		r, err := lr.LiveResources(ctx, stack)
		if err != nil {
			return Live{}, nil, err
		}
		l := Live{Networks: r.Networks, Configs: r.Configs, Secrets: r.Secrets, Services: make(map[string]string, len(r.Services))}
		for name, s := range r.Services {
			l.Services[name] = s.ID
		}
		l.ServiceRefs, l.RefsKnown = RefsOf(r.Services, l.Networks), true
		l.Owners = ownerKeys(r.Owners)
		return l, nil, nil
	}
	l, degraded, err := readLive(ctx, b, stack)
	if err != nil {
		return l, degraded, err
	}
	if os, ok := capability.As[capability.OwnerStamps](b); ok {
		stamps, err := os.LiveOwners(ctx, stack)
		if err != nil {
			return l, degraded, err
		}
		l.Owners = ownerKeys(stamps)
	} else {
		lost := &capability.ErrUnavailable{Feature: "proof from owner stamps (what a deploy stopped before its record created)", Capability: "OwnerStamps"}
		degraded = append(degraded, lost.Error())
	}
	return l, degraded, nil
}

// readLive lists the stack's resources. If b implements LiveDrift, services
// come with their specs and so with what they use; otherwise only their
// names and ids are known (from ReadStack), and nothing they might use is
// deleted. If b implements ResourceLister, networks, configs and secrets are
// listed; otherwise they are left out and so neither deleted nor reported.
func readLive(ctx context.Context, b charts.Backend, stack string) (Live, []string, error) {
	var l Live
	var degraded []string
	lister, hasLister := capability.As[capability.ResourceLister](b)
	if hasLister {
		var err error
		if l.Networks, err = lister.LiveNetworks(ctx, stack); err != nil {
			return l, degraded, err
		}
		if l.Configs, err = lister.LiveConfigs(ctx, stack); err != nil {
			return l, degraded, err
		}
		if l.Secrets, err = lister.LiveSecrets(ctx, stack); err != nil {
			return l, degraded, err
		}
	} else {
		lost := &capability.ErrUnavailable{Feature: "sweep of networks, configs and secrets", Capability: "ResourceLister"}
		degraded = append(degraded, lost.Error())
	}

	if ld, ok := capability.As[capability.LiveDrift](b); ok {
		services, err := ld.LiveServices(ctx, stack)
		if err != nil {
			return l, degraded, err
		}
		l.Services = make(map[string]string, len(services))
		for name, s := range services {
			l.Services[name] = s.ID
		}
		l.ServiceRefs, l.RefsKnown = RefsOf(services, l.Networks), true
		return l, degraded, nil
	}
	states, _, err := capability.ReadStack(ctx, b, stack)
	if err != nil {
		return l, degraded, err
	}
	l.Services = make(map[string]string, len(states))
	for _, s := range states {
		l.Services[stack+"_"+s.Name] = s.ID
	}
	if hasLister {
		lost := &capability.ErrUnavailable{Feature: "sweep of networks, configs and secrets", Capability: "LiveDrift"}
		degraded = append(degraded, lost.Error())
	}
	return l, degraded, nil
}

// volumeFree says that neither the node's listing nor any record of the
// stack has a named volume, so the sweep has no volume to decide on.
func volumeFree(live map[string]string, history []Claim) bool {
	if len(live) > 0 {
		return false
	}
	for _, c := range history {
		if c.Declared == nil && c.Err != nil {
			return false // what it declared is unknown
		}
		if c.Declared != nil && len(c.Declared.Volumes) > 0 {
			return false
		}
	}
	return true
}

// readHistory turns the stack's release records into claims, newest first.
// If b implements DeclaredLister each record is converted by name alone;
// otherwise LiveDrift.DesiredServices is tried, which fails for a record
// that mounted something since deleted, and with neither no record proves
// anything. A record that does not convert becomes a claim with Err set.
func readHistory(ctx context.Context, b charts.Backend, stack string) ([]Claim, []string, error) {
	releases, err := b.Releases(ctx, stack)
	if err != nil {
		return nil, nil, fmt.Errorf("read release records: %w", err)
	}
	var degraded []string
	var convert func(ctx context.Context, manifest, stack string) (*compose.Stack, error)
	if dl, ok := capability.As[capability.DeclaredLister](b); ok {
		convert = dl.DeclaredResources
	} else {
		lost := &capability.ErrUnavailable{Feature: "proof from revisions whose configs or secrets are gone", Capability: "DeclaredLister"}
		degraded = append(degraded, lost.Error())
		if ld, ok := capability.As[capability.LiveDrift](b); ok {
			convert = ld.DesiredServices
		} else {
			convert = func(context.Context, string, string) (*compose.Stack, error) {
				return nil, &capability.ErrUnavailable{Feature: "conversion of stored revisions", Capability: "DeclaredLister or LiveDrift"}
			}
		}
	}
	claims := make([]Claim, 0, len(releases))
	for _, r := range releases {
		c := Claim{Revision: r.Revision, Owner: r.Owner}
		c.Declared, c.Err = convert(ctx, r.Manifest, stack)
		if c.Err != nil {
			c.Declared = nil
		}
		claims = append(claims, c)
	}
	return claims, degraded, nil
}
