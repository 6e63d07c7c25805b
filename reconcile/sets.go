package reconcile

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// generatedStacks knows which stacks of applications that left their
// application set are to be removed rather than kept: the set says prune,
// or the application was a pull-request preview whose ref went away.
//
// Two sources say a stack came from a set: memory (the application was
// loaded, then left the set while this controller ran) and the stack's
// newest release record (charts.Release.Set), which is what a restarted
// controller has. Either way the set's policy is read from the file loaded
// now, not from when the stack was deployed: an operator who turns prune
// off expects that to protect every stack of the set at once, restart or
// not; a set deleted from the file prunes nothing.
type generatedStacks struct {
	mu    sync.Mutex
	prune map[string]string // stack -> the set it left
	// sets are the application sets of the loaded file, each with whether
	// it prunes (see SetApplicationSets); nil until told, and then the
	// policy an application carried when it left its set decides.
	sets map[string]bool
	// held stops every orphan removal while a set has never expanded: its
	// applications' stacks look orphaned only because the generator failed.
	held atomic.Bool
}

// HoldOrphanPruning makes SweepOrphans report instead of remove while hold
// is true. The controller's reload holds it while an application set could
// not be expanded at all, so a repository that does not answer at start
// never removes the stacks its set made before.
func (c *Controller) HoldOrphanPruning(hold bool) { c.generated.held.Store(hold) }

// SetApplicationSets tells the controller the application sets of the file
// whose applications it runs, by name, each with whether it removes the
// stacks of the applications it stops generating (appset.Prunes). Call it
// with every file handed over, before SetApplications. A stack whose
// newest record says one of these sets made it, for an application no
// longer loaded, is then removed when that set prunes, also after a
// restart; one from a set not named here is an ordinary orphan.
func (c *Controller) SetApplicationSets(prune map[string]bool) {
	c.generated.mu.Lock()
	defer c.generated.mu.Unlock()
	c.generated.sets = make(map[string]bool, len(prune))
	for name, p := range prune {
		c.generated.sets[name] = p
	}
}

// setPrunes says whether the named set prunes now. Locked by the caller.
func (g *generatedStacks) setPrunes(set string, fallback bool) bool {
	if g.sets == nil {
		return fallback
	}
	return g.sets[set]
}

// anyPrunes says whether some loaded set prunes. Locked by the caller.
func (g *generatedStacks) anyPrunes() bool {
	for _, p := range g.sets {
		if p {
			return true
		}
	}
	return false
}

// noteGenerated records, after SetApplications, which removed applications'
// stacks are to be pruned, and forgets any stack an application declares
// again.
func (c *Controller) noteGenerated(removed []*appState, now []application.Application) {
	c.generated.mu.Lock()
	defer c.generated.mu.Unlock()
	if c.generated.prune == nil {
		c.generated.prune = map[string]string{}
	}
	for _, old := range removed {
		if g := old.app.Generated; g != nil && c.generated.setPrunes(g.Set, g.Prune) {
			c.generated.prune[old.app.Stack] = g.Set
		}
	}
	for _, a := range now {
		delete(c.generated.prune, a.Stack)
	}
}

// setRef is what a release record says about the set that generated a,
// nil for an application of the file itself.
func setRef(a application.Application) *charts.SetRef {
	g := a.Generated
	if g == nil {
		return nil
	}
	return &charts.SetRef{Name: g.Set, Prune: g.Prune, Preview: g.Preview}
}

// pruneOrphan says whether the orphaned stack, deployed for app and stamped
// owner, is removed (true) or only reported, and names the set when it is
// removed for one: never while pruning is held; always with the
// controller's --prune (global); otherwise when the set it came from
// prunes now. Memory answers for an application that left its set while
// this controller ran; the stack's newest record answers after a restart,
// and only for an application no longer loaded under any stack, as memory
// does. A record that cannot be read keeps the stack this time.
func (c *Controller) pruneOrphan(ctx context.Context, b charts.Backend, stack, owner, app string, global bool) (bool, string, error) {
	if c.generated.held.Load() {
		return false, "", nil
	}
	if global {
		return true, "", nil
	}
	c.generated.mu.Lock()
	set, remembered := c.generated.prune[stack]
	if remembered && c.generated.setPrunes(set, true) {
		c.generated.mu.Unlock()
		return true, set, nil
	}
	look := c.generated.anyPrunes()
	c.generated.mu.Unlock()
	if !look {
		return false, "", nil
	}
	c.mu.Lock()
	_, loaded := c.apps[app]
	c.mu.Unlock()
	if loaded {
		return false, "", nil
	}
	rec, err := capability.LatestRelease(ctx, b, stack, nil)
	if err != nil || rec == nil || rec.Set == nil || rec.Owner != owner {
		return false, "", err
	}
	c.generated.mu.Lock()
	defer c.generated.mu.Unlock()
	if c.generated.held.Load() || !c.generated.setPrunes(rec.Set.Name, false) {
		return false, "", nil
	}
	return true, rec.Set.Name, nil
}
