package reconcile

import (
	"context"
	"errors"
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
	// Destination is the swarm the stack is on.
	Destination string `json:"destination,omitempty"`
	// Owner is the stamp of the stack's newest record: the application
	// that deployed it.
	Owner string `json:"owner"`
	// Set is the application set the stack is removed for, when it is
	// removed because that set prunes.
	Set   string                   `json:"set,omitempty"`
	Sweep *application.SweepStatus `json:"sweep,omitempty"`
	Error string                   `json:"error,omitempty"`
}

// SweepOrphans finds, on every swarm, the stacks whose newest release record
// this controller's id stamped, for an application that no longer declares
// it there, and sweeps each as a stack that declares nothing: with
// Options.PruneOrphans everything a record proves it created is removed,
// otherwise the removals are only reported. The swarm's records are the
// evidence, so this works the same after a restart. A stack another
// application of this file now uses on that swarm (a rename) is not an
// orphan; another controller's stacks are never looked at. A stack whose
// owning application now deploys the same stack to another destination is
// only reported: two destinations may be one swarm reached two ways, and
// then it is not an orphan at all.
//
// Each swarm is looked at on its own: one that cannot be read is named in
// the error and costs the others nothing. If a swarm's backend implements
// capability.ReleaseLister its orphans are found; otherwise none can be,
// and the error says so.
func (c *Controller) SweepOrphans(ctx context.Context) ([]Orphan, error) {
	declared := map[relKey]bool{}
	elsewhere := map[string]string{} // "app/stack" -> destination
	c.mu.Lock()
	for _, a := range c.apps {
		declared[relKey{destination(a.app), a.app.Stack}] = true
		elsewhere[a.app.Name+"/"+a.app.Stack] = destination(a.app)
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
	var errs []error
	for _, dest := range sortedKeys(c.backends) {
		found, err := c.sweepOrphansOn(ctx, dest, declared, elsewhere, prune)
		out = append(out, found...)
		if err != nil {
			if len(c.backends) > 1 {
				err = fmt.Errorf("swarm %s: %w", dest, err)
			}
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	c.orphans = slices.Clone(out)
	c.mu.Unlock()
	return out, errors.Join(errs...)
}

func (c *Controller) sweepOrphansOn(ctx context.Context, dest string, declared map[relKey]bool, elsewhere map[string]string, prune bool) ([]Orphan, error) {
	b := c.backends[dest]
	rl, ok := capability.As[capability.ReleaseLister](b)
	if !ok {
		return nil, &capability.ErrUnavailable{Feature: "pruning stacks of removed applications", Capability: "ReleaseLister"}
	}
	owners, err := rl.ReleaseOwners(ctx)
	if err != nil {
		return nil, fmt.Errorf("find stacks of removed applications: %w", err)
	}
	var out []Orphan
	for _, stack := range sortedKeys(owners) {
		owner := owners[stack]
		id, app, ok := splitOwner(owner)
		if !ok || id != c.opts.ControllerID || declared[relKey{dest, stack}] {
			continue
		}
		o := Orphan{Stack: stack, Destination: dest, Owner: owner}
		log := c.log.With("stack", stack, "owner", owner, "swarm", dest)
		moved, isMoved := elsewhere[app+"/"+stack]
		key := dest + "/" + stack
		c.mu.Lock()
		failures := c.orphanFailures[key]
		c.mu.Unlock()
		remove, set, setErr := c.pruneOrphan(ctx, b, stack, owner, app, prune)
		if remove && !isMoved {
			o.Set = set
		}
		if setErr != nil {
			log.Warn("could not read the stack's newest record to tell whether an application set made it; keeping it this time", "error", setErr)
		}
		rep, err := sweep.Run(ctx, b, sweep.RunInput{
			Stack:    stack,
			Owner:    owner,
			Current:  &compose.Stack{Namespace: stack},
			Failures: failures,
			DryRun:   !remove || isMoved,
		})
		switch {
		case err != nil:
			o.Error = err.Error()
			log.Error("could not sweep the stack of a removed application", "error", err)
		default:
			o.Sweep = sweepStatus(rep)
			c.mu.Lock()
			c.orphanFailures[key] = rep.Failures
			c.mu.Unlock()
			switch {
			case isMoved:
				o.Error = fmt.Sprintf("application %s now deploys stack %s to swarm %s; it is kept here, since the two may be one swarm (remove it by hand if not)", app, stack, moved)
				log.Warn("application moved to another swarm; its stack here is kept", "destination", moved)
			case rep.DryRun:
				log.Warn("application removed from the applications file; its stack stays (run with --prune to remove it)",
					"pending", strings.Join(o.Sweep.Pending, ", "))
			case len(rep.Removed) > 0 && set != "":
				log.Info("removed the stack of an application its application set no longer generates", "set", set, "removed", len(rep.Removed))
			case len(rep.Removed) > 0:
				log.Info("removed the stack of an application no longer in the applications file", "removed", len(rep.Removed))
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// Orphans returns what the last SweepOrphans found.
func (c *Controller) Orphans() []Orphan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.orphans)
}
