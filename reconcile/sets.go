package reconcile

import (
	"sync"
	"sync/atomic"

	"github.com/flotilla-gitops/flotilla/application"
)

// generatedStacks remembers which stacks of applications that left their
// application set are to be removed rather than kept: the set said prune,
// or the application was a pull-request preview whose ref went away.
// Memory only: after a restart such a stack is an ordinary orphan, kept
// unless the controller runs with --prune.
type generatedStacks struct {
	mu    sync.Mutex
	prune map[string]bool // by stack
	// held stops every orphan removal while a set has never expanded: its
	// applications' stacks look orphaned only because the generator failed.
	held atomic.Bool
}

// HoldOrphanPruning makes SweepOrphans report instead of remove while hold
// is true. The controller's reload holds it while an application set could
// not be expanded at all, so a repository that does not answer at start
// never removes the stacks its set made before.
func (c *Controller) HoldOrphanPruning(hold bool) { c.generated.held.Store(hold) }

// noteGenerated records, after SetApplications, which removed applications'
// stacks are to be pruned, and forgets any stack an application declares
// again.
func (c *Controller) noteGenerated(removed []*appState, now []application.Application) {
	c.generated.mu.Lock()
	defer c.generated.mu.Unlock()
	if c.generated.prune == nil {
		c.generated.prune = map[string]bool{}
	}
	for _, old := range removed {
		if g := old.app.Generated; g != nil && g.Prune {
			c.generated.prune[old.app.Stack] = true
		}
	}
	for _, a := range now {
		delete(c.generated.prune, a.Stack)
	}
}

// pruneOrphan says whether the orphaned stack is removed (true) or only
// reported: never while pruning is held, always for a stack its set said
// to prune, otherwise as the controller's --prune says.
func (c *Controller) pruneOrphan(stack string, global bool) bool {
	if c.generated.held.Load() {
		return false
	}
	c.generated.mu.Lock()
	defer c.generated.mu.Unlock()
	return global || c.generated.prune[stack]
}
