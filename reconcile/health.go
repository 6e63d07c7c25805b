package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/health"
	"github.com/flotilla-gitops/flotilla/redact"
)

// applyHealth judges every service the manifest declares against a swarm
// read and writes the rollup into the pass's status. A failed read is
// Unknown; so is a read a backend without StackServicesReader could not vouch
// for. Neither is ever published as Missing.
func (c *Controller) applyHealth(p *pass, snap *snapshot) {
	p.observed, p.readErr = true, snap.err
	c.judgeHealth(p, snap, c.declaredOnce(p))
}

// judgeHealth is applyHealth against an explicit list of expected services.
func (c *Controller) judgeHealth(p *pass, snap *snapshot, want []expected) {
	if snap.err != nil {
		// The time is in the message: a pass held up after this (a later
		// step waiting on the same daemon) publishes it before LastPass.
		p.status.Health = application.HealthUnknown
		p.status.HealthMessage = fmt.Sprintf("the swarm could not be read at %s: %v",
			c.now().UTC().Format(time.RFC3339), redact.Error(snap.err))
		p.status.Services = nil
		p.judged = nil
		return
	}
	states, read := snap.stacks[p.app.Stack]
	if !read {
		r := health.Unknown(nil)
		r.Message = "the swarm answered with no services for this stack and the backend cannot tell an empty stack from a failed read"
		p.status.Health, p.status.HealthMessage, p.status.Services = r.Health, r.Message, nil
		p.judged = nil
		return
	}
	p.judged = states
	c.judgeHooks(p, states)
	byName := indexStates(states)
	results := c.resultsIndexed(states, byName, want)
	idleColours(p, results)
	names := sortedKeys(results)
	parts := make([]health.Result, len(names))
	for i, n := range names {
		parts[i] = results[n]
	}
	rolled := health.StackSorted(names, parts)
	p.status.Health, p.status.HealthMessage = rolled.Health, rolled.Message
	rolloutHealth(p)
	strayColours(p, states, results)
	p.status.Services = p.status.Services[:0:0]
	if len(names) > 0 {
		p.status.Services = make([]application.ServiceStatus, 0, len(names))
	}
	for i, n := range names {
		r := parts[i]
		var s charts.ServiceState
		if j, ok := byName[n]; ok {
			s = states[j]
		}
		p.status.Services = append(p.status.Services, application.ServiceStatus{
			Name: n, Health: r.Health, Running: int(r.Running), Desired: int(r.Desired), Message: r.Message,
			Tasks: taskStatuses(s.Tasks), Networks: s.Networks, Configs: s.Configs, Secrets: s.Secrets, Volumes: s.Volumes,
		})
	}
}

// expected is one service a health judgement looks for: its name without
// the stack prefix and how many replicas it should have when absent.
type expected struct {
	name    string
	desired uint64
}

// serviceResults judges every service the manifest declares against one
// read of its stack; a declared service the read lacks is Missing.
func (c *Controller) serviceResults(p *pass, states []charts.ServiceState) map[string]health.Result {
	return c.resultsFor(states, declaredOf(p))
}

// resultsFor judges every expected service against one read of its stack;
// an expected service the read lacks is Missing.
func (c *Controller) resultsFor(states []charts.ServiceState, want []expected) map[string]health.Result {
	return c.resultsIndexed(states, indexStates(states), want)
}

// indexStates maps each service's name to its position in states (the last
// one wins, as a map of copies would); positions, not copies, since a
// steady pass builds this for every service of the stack.
func indexStates(states []charts.ServiceState) map[string]int {
	byName := make(map[string]int, len(states))
	for i, s := range states {
		byName[s.Name] = i
	}
	return byName
}

// resultsIndexed is resultsFor with states already indexed by name.
func (c *Controller) resultsIndexed(states []charts.ServiceState, byName map[string]int, want []expected) map[string]health.Result {
	now := c.now()
	results := make(map[string]health.Result, len(want))
	for _, e := range want {
		if i, ok := byName[e.name]; ok {
			results[e.name] = health.Service(states[i], now, health.Options{})
		} else {
			results[e.name] = health.Missing(e.desired)
		}
	}
	return results
}

// healthAfterEarlyFailure gives a pass that failed before it observed the
// swarm (at fetch, render or plan) a judgement of its own instead of keeping
// the previous pass's, which would show a daemon that stopped answering as
// still healthy. The batch's read, or a read of this stack alone outside a
// batch, is judged against the manifest when the pass rendered one, and
// otherwise against the services the previous status listed. A read that
// failed, or nothing to judge against, is Unknown with the reason.
func (c *Controller) healthAfterEarlyFailure(ctx context.Context, p *pass, prev application.Status, cause error) {
	snap := p.snapshot
	if snap == nil {
		rctx, cancel := context.WithTimeout(ctx, c.opts.SwarmReadTimeout)
		var s map[string][]charts.ServiceState
		err := fmt.Errorf("destination %q: %w", destination(p.app), ErrNoSwarm)
		if p.base != nil {
			s, err = capability.ReadStacks(rctx, p.base, []string{p.app.Stack})
		}
		cancel()
		snap = &snapshot{stacks: s, err: err}
	}
	want := declaredOf(p)
	if p.declared == nil {
		for _, s := range prev.Services {
			want = append(want, expected{name: s.Name, desired: uint64(max(s.Desired, 0))})
		}
	}
	if snap.err == nil && p.declared == nil && len(want) == 0 {
		r := health.Unknown(redact.Error(fmt.Errorf("no manifest to judge the swarm against: %w", cause)))
		p.status.Health, p.status.HealthMessage, p.status.Services = r.Health, r.Message, nil
		return
	}
	c.judgeHealth(p, snap, want)
}

// healthAfterFailedComparison says Unknown for the health of a pass whose
// live comparison could not read the swarm: the batch's read it was judged
// from predates that failure, and publishing it would show a daemon that has
// since stopped answering as healthy until the pass after next.
func (c *Controller) healthAfterFailedComparison(p *pass, err error) {
	var pe *passError
	if !errors.As(err, &pe) || pe.step != "drift" {
		return
	}
	p.status.Health = application.HealthUnknown
	p.status.HealthMessage = fmt.Sprintf("the swarm could not be read at %s: %v",
		c.now().UTC().Format(time.RFC3339), redact.Error(pe.err))
	p.status.Services = nil
}

// syncAfterFailure says Unknown for a sync the failed pass could not
// establish: it failed before comparing anything, or its live comparison
// failed where git alone said Synced. OutOfSync by git stands: that needs no
// swarm.
func syncAfterFailure(p *pass, err error) {
	var pe *passError
	driftFailed := errors.As(err, &pe) && pe.step == "drift"
	if !p.observed || p.rendered == nil || (driftFailed && p.status.Sync == application.Synced) {
		p.status.Sync = application.SyncUnknown
		p.status.SyncReason = application.ReasonNone
	}
}

// syncAfterObserve says Unknown where observe said Synced from git alone
// while the swarm could not be read: what runs was not compared. A live
// comparison that finds drift later still says OutOfSync; OutOfSync by git
// needs no swarm and stands.
func (c *Controller) syncAfterObserve(p *pass) {
	if p.readErr != nil && p.status.Sync == application.Synced {
		p.status.Sync = application.SyncUnknown
		p.status.SyncReason = application.ReasonNone
		c.publish(p)
	}
}

// declaredOf lists the services the pass's manifest declares, sorted, with
// their declared replicas.
func declaredOf(p *pass) []expected {
	if p.declared == nil {
		return nil
	}
	out := make([]expected, 0, len(p.declared.Services))
	for _, scoped := range sortedKeys(p.declared.Services) {
		name := strings.TrimPrefix(scoped, p.app.Stack+"_")
		if p.isHook(name) {
			continue // a hook job's outcome is its sync's, not the stack's health
		}
		out = append(out, expected{name: name, desired: declaredReplicas(p, scoped)})
	}
	return out
}

func declaredReplicas(p *pass, scoped string) uint64 {
	spec := p.declared.Services[scoped]
	if r := spec.Mode.Replicated; r != nil && r.Replicas != nil {
		return *r.Replicas
	}
	return 1
}

// taskStatuses is what the status shows of a service's tasks; their words
// are sanitised like every other message the status carries.
func taskStatuses(ts []charts.TaskState) []application.TaskStatus {
	if len(ts) == 0 {
		return nil
	}
	out := make([]application.TaskStatus, 0, len(ts))
	for _, t := range ts {
		out = append(out, application.TaskStatus{ID: t.ID, Slot: t.Slot, Node: t.NodeID, State: t.State,
			DesiredState: t.DesiredState, Health: t.Health, Error: redact.Text(t.Err),
			Message: redact.Text(t.Message), Since: t.Timestamp,
			NodeName: t.NodeName, NodeLost: t.NodeLost, Restarts: t.Restarts, RestartsFull: t.RestartsFull})
	}
	return out
}
