package reconcile

import (
	"context"
	"fmt"
	"time"
)

// The pass is this table, run top to bottom by runSteps below it; each
// step's properties are on its row. Where each step's function lives is
// in docs/design.md.

// step is one stage of a pass. The first step that fails ends the pass.
type step struct {
	name string
	run  func(c *Controller, ctx context.Context, p *pass) error
	// offSwarm: the step reads nothing of the swarm's (a chart's render,
	// which does, waits by itself), so it runs while the batch's read is
	// still on its way.
	offSwarm bool
	// writes: the step writes to the swarm. A stopping controller lets it
	// finish rather than cut a deploy, heal or sweep in half; the pass then
	// ends at the next step boundary.
	writes bool
	// then, when set, runs once the step has succeeded, before the next.
	then func(c *Controller, p *pass)
}

// steps is the pass, in order. Each does one thing; see its function's doc.
var steps = []step{
	{name: "fetch", run: (*Controller).fetch, offSwarm: true},
	{name: "render", run: (*Controller).render, offSwarm: true},
	{name: "plan", run: (*Controller).plan},
	{name: "rollout", run: (*Controller).rollouts},
	{name: "observe", run: (*Controller).observe, then: (*Controller).syncAfterObserve},
	{name: "drift", run: (*Controller).detectDrift},
	{name: "gate", run: (*Controller).gate},
	{name: "presync", run: syncStep((*Controller).preSync)},
	{name: "waves", run: syncStep((*Controller).applyWaves)},
	{name: "postsync", run: syncStep((*Controller).postSync)},
	{name: "apply", run: syncStep((*Controller).apply), writes: true},
	{name: "correct", run: (*Controller).correct, writes: true},
	{name: "wait", run: syncStep((*Controller).wait)},
	{name: "sweep", run: (*Controller).sweepStep, writes: true},
	{name: "hooks", run: (*Controller).cleanHooks},
	{name: "confirm", run: (*Controller).confirm},
	{name: "rollback", run: (*Controller).autoRollback},
}

// runSteps runs the table in order until a step fails or the controller
// stops; a stop is seen only between steps.
func (c *Controller) runSteps(ctx context.Context, p *pass) error {
	for _, s := range steps {
		if ctx.Err() != nil {
			return transient(s.name, fmt.Errorf("controller stopping before %s: %w", s.name, context.Cause(ctx)))
		}
		sctx := ctx
		if s.writes {
			sctx = context.WithoutCancel(ctx)
		}
		if !s.offSwarm {
			p.awaitSnapshot()
		}
		began := time.Now()
		err := s.run(c, sctx, p)
		c.opts.Metrics.ObserveStep(s.name, time.Since(began))
		if err != nil {
			return err
		}
		if s.then != nil {
			s.then(c, p)
		}
	}
	return nil
}
