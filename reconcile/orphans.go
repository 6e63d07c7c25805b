package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/sweep"
)

// Orphan is a stack this controller deployed for an application that is no
// longer in its applications file.
type Orphan struct {
	Stack string `json:"stack"`
	// Owner is the stamp of the stack's newest record: the application
	// that deployed it.
	Owner string                   `json:"owner"`
	Sweep *application.SweepStatus `json:"sweep,omitempty"`
	Error string                   `json:"error,omitempty"`
}

// SweepOrphans finds the stacks whose newest release record this
// controller's id stamped, for an application that no longer declares it,
// and sweeps each as a stack that declares nothing: with Options.PruneOrphans
// everything a record proves it created is removed, otherwise the removals
// are only reported. The swarm's records are the evidence, so this works
// the same after a restart. A stack another application of this file now
// uses (a rename) is not an orphan; another controller's stacks are never
// looked at.
//
// If the backend implements capability.ReleaseLister orphans are found;
// otherwise none can be, and the error says so.
func (c *Controller) SweepOrphans(ctx context.Context) ([]Orphan, error) {
	rl, ok := capability.As[capability.ReleaseLister](c.opts.Backend)
	if !ok {
		return nil, &capability.ErrUnavailable{Feature: "pruning stacks of removed applications", Capability: "ReleaseLister"}
	}
	owners, err := rl.ReleaseOwners(ctx)
	if err != nil {
		return nil, fmt.Errorf("find stacks of removed applications: %w", err)
	}
	declared := map[string]bool{}
	c.mu.Lock()
	for _, a := range c.apps {
		declared[a.app.Stack] = true
	}
	c.mu.Unlock()
	// An applications file that lists nothing is far more often a mistake
	// (an empty or truncated file) than a wish to remove every stack, so
	// orphans are then only reported.
	prune := c.opts.PruneOrphans && len(declared) > 0
	if c.opts.PruneOrphans && !prune {
		c.log.Warn("the applications file lists no applications; not pruning any stack of this controller (remove applications one at a time, or the stacks by hand)")
	}

	var out []Orphan
	for _, stack := range sortedKeys(owners) {
		owner := owners[stack]
		id, _, ok := splitOwner(owner)
		if !ok || id != c.opts.ControllerID || declared[stack] {
			continue
		}
		o := Orphan{Stack: stack, Owner: owner}
		c.mu.Lock()
		failures := c.orphanFailures[stack]
		c.mu.Unlock()
		rep, err := sweep.Run(ctx, c.opts.Backend, sweep.RunInput{
			Stack:    stack,
			Owner:    owner,
			Current:  &compose.Stack{Namespace: stack},
			Failures: failures,
			DryRun:   !c.pruneOrphan(stack, prune),
		})
		log := c.log.With("stack", stack, "owner", owner)
		if err != nil {
			o.Error = err.Error()
			log.Error("could not sweep the stack of a removed application", "error", err)
		} else {
			o.Sweep = sweepStatus(rep)
			c.mu.Lock()
			c.orphanFailures[stack] = rep.Failures
			c.mu.Unlock()
			if rep.DryRun {
				log.Warn("application removed from the applications file; its stack stays (run with --prune to remove it)",
					"pending", strings.Join(o.Sweep.Pending, ", "))
			} else if len(rep.Removed) > 0 {
				log.Info("removed the stack of an application no longer in the applications file", "removed", len(rep.Removed))
			}
		}
		out = append(out, o)
	}
	c.mu.Lock()
	c.orphans = slices.Clone(out)
	c.mu.Unlock()
	return out, nil
}

// Orphans returns what the last SweepOrphans found.
func (c *Controller) Orphans() []Orphan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.orphans)
}
