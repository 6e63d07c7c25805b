package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/analysis"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/health"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// rollouts drives each canary or blue/green service of the render one step
// (rollout.Decide) by rewriting the manifest the pass deploys: the stable
// service keeps the definition the newest record gives it until the
// rollout promotes, and the extra colour runs the new one at the
// Decision's replicas with the rollout's State on its service labels. The
// rest of the pass then deploys, records, guards, sweeps and compares that
// manifest like any other, so a step is a release revision and the swarm
// is the record a restarted controller resumes from.
//
// A service is rolled out only when there is something to protect: a
// newest record that declares it and a stable service that runs. A first
// deploy goes as without the key.
func (c *Controller) rollouts(ctx context.Context, p *pass) error {
	p.status.Rollouts, p.liveRollouts, p.rolloutsRan = nil, nil, true
	if p.rendered == nil || p.asRecorded {
		// A record that holds colours and not what they were made
		// from is deployed as it is: the routes the router serves stay
		// as the last pass left them. Any other rollback, and the
		// passes that hold it, go through the rollouts like a commit.
		return nil
	}
	o, err := p.ordering()
	if err != nil {
		return stalled("rollout", err)
	}
	var services []string
	for name, ord := range o.order {
		if ord.Rollout != nil {
			services = append(services, name)
		}
	}
	slices.Sort(services)
	for _, svc := range services {
		if err := analysisGranted(&p.app.Allow, svc, *o.order.Of(svc).Rollout); err != nil {
			return stalled("rollout", err)
		}
	}
	if p.latest == nil {
		for _, svc := range services {
			p.stableRoute(svc, *o.order.Of(svc).Rollout)
		}
	}
	if p.latest == nil || len(services) == 0 {
		p.routesKnown = true
		return nil
	}
	live, err := c.rolloutRead(ctx, p)
	if err != nil {
		// Nothing is decided on a read that cannot be trusted; the
		// render is not deployed either, since it would put the new
		// definition on the stable service.
		return transient("rollout", fmt.Errorf("read the stack's services for its rollouts: %w", err))
	}
	now := c.now()
	var colours []compose.Colour
	for _, svc := range services {
		spec := *o.order.Of(svc).Rollout
		colour, rs, next, ok, err := c.rolloutOf(ctx, p, svc, spec, live, now)
		if err != nil {
			return stalled("rollout", err)
		}
		if !ok {
			p.stableRoute(svc, spec)
			continue
		}
		p.status.Rollouts = append(p.status.Rollouts, rs)
		colours = append(colours, colour)
		if !next.IsZero() && (p.rolloutNext.IsZero() || next.Before(p.rolloutNext)) {
			p.rolloutNext = next
		}
	}
	p.routesKnown = true
	if len(colours) == 0 {
		return nil
	}
	manifest, err := compose.WithColours(p.rendered.Manifest, colours)
	if err != nil {
		return stalled("rollout", err)
	}
	cv, err := p.convert(ctx, manifest)
	if err != nil {
		return stalled("rollout", err)
	}
	// The render is shared with the render cache: the pass gets a copy.
	r := *p.rendered
	r.Manifest = manifest
	p.uncoloured = p.rendered.Manifest
	p.rendered, p.ord = &r, nil
	p.use(cv)
	p.action = charts.Plan(manifest, p.owner, p.latest)
	return nil
}

// rolloutRead returns the stack's services by unscoped name, from the
// batch's read of the swarm when there is one.
func (c *Controller) rolloutRead(ctx context.Context, p *pass) (map[string]charts.ServiceState, error) {
	var states []charts.ServiceState
	if s := p.snapshot; s != nil && s.err == nil {
		if st, ok := s.stacks[p.app.Stack]; ok {
			states = st
		}
	}
	if states == nil {
		st, trusted, err := capability.ReadStack(ctx, p.base, p.app.Stack)
		if err != nil {
			return nil, err
		}
		if !trusted {
			return nil, fmt.Errorf("the backend's read of stack %s cannot be trusted", p.app.Stack)
		}
		states = st
	}
	out := make(map[string]charts.ServiceState, len(states))
	for _, s := range states {
		out[s.Name] = s
	}
	return out, nil
}

// rolloutOf decides svc's rollout. ok is false when svc is deployed as
// without a rollout (nothing to protect yet, or nothing ever rolled out
// and nothing to roll out).
func (c *Controller) rolloutOf(ctx context.Context, p *pass, svc string, spec rollout.Spec, live map[string]charts.ServiceState, now time.Time) (compose.Colour, application.RolloutStatus, time.Time, bool, error) {
	name := rollout.ColourName(svc, spec.Strategy)
	newDigest, _, err := compose.ServiceDigest(p.rendered.Manifest, svc)
	if err != nil {
		return compose.Colour{}, application.RolloutStatus{}, time.Time{}, false, fmt.Errorf("rollout of %s: %w", svc, err)
	}
	oldDigest, recorded, err := compose.ServiceDigest(p.latest.Manifest, svc)
	if err != nil {
		return compose.Colour{}, application.RolloutStatus{}, time.Time{}, false, fmt.Errorf("rollout of %s: the newest record: %w", svc, err)
	}
	stable, running := live[svc]
	if !recorded || !running {
		return compose.Colour{}, application.RolloutStatus{}, time.Time{}, false, nil
	}
	extra, hasExtra := live[name]
	revision := rolloutRevision(newDigest, spec)
	in := rollout.Input{
		Now:            now,
		Revision:       revision,
		StableRevision: rolloutRevision(oldDigest, spec),
		Replicas:       p.declaredReplicas(svc),
		StableReady:    settled(stable),
		Command:        c.takeRolloutCommand(p.app.Name, svc),
	}
	if in.Command != rollout.NoCommand {
		if p.takenCmds == nil {
			p.takenCmds = map[string]rollout.Command{}
		}
		p.takenCmds[svc] = in.Command
	}
	in.StableReady = in.StableReady && in.StableRevision == revision
	var st rollout.State
	var stErr error
	if hasExtra {
		st, stErr = rollout.StateFromLabels(extra.Labels)
		in.ColourReady = settled(extra) && extra.Desired > 0 && extra.Labels[rollout.LabelPrefix+"revision"] == revision
		in.ColourReplicas = int(extra.Desired)
	}
	var d rollout.Decision
	var verdictOf analysis.Judgement
	switch {
	case stErr != nil && in.Command == rollout.CommandRetry:
		// An operator's retry is the way out of a record that cannot be
		// read: the rollout starts again from nothing.
		in.Command, in.ColourReady = rollout.NoCommand, false
		d = rollout.Decide(spec, rollout.State{}, in)
	case stErr != nil:
		d = rollout.Decision{State: st, Weights: rollout.Weights{Stable: 100}, Action: rollout.ActionHold, Err: stErr,
			Reason: "rollout held with all traffic on stable: " + stErr.Error() + "; `flotilla app rollout retry` starts it again"}
	default:
		if p.request == nil || !p.request.DryRun {
			// A dry run deploys nothing: it must not use up the
			// interval a real pass would count.
			in.Verdict, verdictOf = c.verdict(ctx, p.app.Name, svc, spec, st, revision, now)
		}
		d = rollout.Decide(spec, st, in)
		if d.Err == nil && !d.State.StepStarted.IsZero() && !d.State.StepStarted.Equal(st.StepStarted) && (p.request == nil || !p.request.DryRun) {
			// This decision makes a step's traffic flow: its first
			// interval starts now, so its first verdict is due one
			// interval from now, not one from the next pass.
			c.analysis.Begin(ctx, analysis.Target{App: p.app.Name, Service: svc, Spec: spec, State: d.State}, now)
		}
	}
	if d.Err == nil && d.State.Phase == "" && !hasExtra {
		// Never rolled out and nothing to roll out: no extra colour.
		return compose.Colour{}, application.RolloutStatus{}, time.Time{}, false, nil
	}
	colour := compose.Colour{Service: svc, Name: name, Replicas: d.Replicas, Labels: d.State.Labels()}
	if spec.Strategy == rollout.Canary && spec.Router.Provider == rollout.NoRouter {
		// No router: the canary's share comes from answering to the
		// service's name beside it.
		colour.Alias = svc
	}
	switch {
	case d.Err != nil:
		// All traffic on stable: the extra colour at zero, its record
		// kept as it was, the stable service as recorded.
		colour.Replicas = 0
		if hasExtra {
			colour.Labels = recordedLabels(extra.Labels)
		}
		colour.StableFrom = p.latest.Manifest
	case d.State.Phase != rollout.Promoting && d.State.Phase != rollout.Completed,
		d.State.Revision != revision:
		// The stable service keeps what it runs: the decision is not
		// yet about the new revision (a colour still draining an older
		// one holds it back), or the rollout has not promoted it.
		colour.StableFrom = p.latest.Manifest
	}
	if d.Err == nil && d.State.Revision != revision && colour.Replicas > 0 {
		// The colour drains a replaced revision's traffic: it keeps the
		// definition it was deployed with until it stops, and the new
		// one starts after (rollout.Superseded).
		if _, kept, err := compose.ServiceDigest(p.latest.Manifest, name); err == nil && kept {
			colour.ColourFrom = p.latest.Manifest
		}
	}
	rs := application.RolloutStatus{
		Service: svc, Colour: name, Strategy: string(spec.Strategy), Revision: d.State.Revision,
		Phase: string(d.State.Phase), Step: d.State.Step, Weight: d.Weights.Canary, Replicas: colour.Replicas,
		Paused: d.State.Paused, Verdict: string(d.State.Verdict), Metric: d.State.Metric, Values: d.State.Values,
		Reason: d.Reason, NextCheck: d.NextCheck,
	}
	for _, s := range spec.Steps {
		rs.Steps = append(rs.Steps, s.Weight)
	}
	if d.Err != nil {
		rs.Error = d.Err.Error()
		rs.Weight = 0
	}
	if verdictOf.Result == rollout.Inconclusive {
		// Decide only says it waits for a pass; this says why none came.
		rs.Reason += fmt.Sprintf("; the last analysis proved nothing (%s: %s)", verdictOf.Metric, verdictOf.Values)
	}
	route := RolloutRoute{App: p.app.Name, Stack: p.app.Stack, Service: svc,
		Stable: p.app.Stack + "_" + svc, Colour: p.app.Stack + "_" + name, Strategy: spec.Strategy, Router: spec.Router, Weights: d.Weights}
	if d.Err != nil {
		route.Weights = rollout.Weights{Stable: 100}
	}
	p.routes = append(p.routes, route)
	// What runs now: the recorded weight, served while this decision is
	// not deployed.
	route.Weights = rollout.Weights{Stable: 100}
	if hasExtra && stErr == nil {
		route.Weights = rollout.Weights{Stable: 100 - st.Weight, Canary: st.Weight}
	}
	p.liveRoutes = append(p.liveRoutes, route)
	p.liveRollouts = append(p.liveRollouts, liveRollout(rs, extra, hasExtra, st, stErr))
	if d.Err == nil && d.Action != rollout.ActionHold {
		p.rolloutSteps = append(p.rolloutSteps, rolloutStep{service: svc, d: d})
	}
	p.log.Debug("rollout decided", "service", svc, "revision", revision, "action", string(d.Action),
		"phase", string(d.State.Phase), "step", d.State.Step, "weight", d.Weights.Canary, "replicas", colour.Replicas, "reason", d.Reason)
	return colour, rs, d.NextCheck, true, nil
}

// liveRollout is decided, the status of a rollout after its decision, as
// the swarm records it before that decision is deployed: the extra
// colour's recorded state and replicas, or no phase when there is no extra
// colour yet. A record that cannot be read shows as decided: the decision
// then only holds it.
func liveRollout(decided application.RolloutStatus, extra charts.ServiceState, hasExtra bool, st rollout.State, stErr error) application.RolloutStatus {
	if stErr != nil {
		return decided
	}
	live := application.RolloutStatus{Service: decided.Service, Colour: decided.Colour, Strategy: decided.Strategy, Steps: decided.Steps,
		Reason: "not deployed yet: " + decided.Reason}
	if hasExtra {
		live.Revision, live.Phase, live.Step, live.Weight, live.Paused = st.Revision, string(st.Phase), st.Step, st.Weight, st.Paused
		live.Verdict, live.Metric, live.Values = string(st.Verdict), st.Metric, st.Values
		live.Replicas = int(extra.Desired)
	}
	return live
}

// verdict is the analysis's verdict on the step st serves, when an
// interval of it has just ended (see analysis.Runner). A recorded state of
// another revision is about to be restarted by Decide: nothing of it is
// measured, and what was kept of it is dropped.
func (c *Controller) verdict(ctx context.Context, app, svc string, spec rollout.Spec, st rollout.State, revision string, now time.Time) (rollout.Verdict, analysis.Judgement) {
	if st.Revision != revision {
		st = rollout.State{}
	}
	return c.analysis.Verdict(ctx, analysis.Target{App: app, Service: svc, Spec: spec, State: st}, now)
}

// RolloutRoute is what a router needs to split one service's traffic
// between its two colours.
type RolloutRoute struct {
	App, Stack, Service string
	// Stable and Colour are the scoped swarm service names.
	Stable, Colour string
	Strategy       rollout.Strategy
	Router         rollout.Router
	Weights        rollout.Weights
}

// stableRoute is the route of a service under a rollout with no extra
// colour: all its traffic on the stable service.
func (p *pass) stableRoute(svc string, spec rollout.Spec) {
	r := RolloutRoute{App: p.app.Name, Stack: p.app.Stack, Service: svc, Stable: p.app.Stack + "_" + svc,
		Strategy: spec.Strategy, Router: spec.Router, Weights: rollout.Weights{Stable: 100}}
	p.routes = append(p.routes, r)
	p.liveRoutes = append(p.liveRoutes, r)
}

// RolloutRoutes returns the traffic split of every service under a
// rollout, by application then service: what the swarm runs as of each
// application's newest pass (the decision it deployed, or the recorded
// split when it deployed nothing). complete is false until every
// application has had a pass that worked its routes out: a router that
// is handed the routes before then would drop those of the others. It is
// what the router's configuration is built from.
func (c *Controller) RolloutRoutes() (routes []RolloutRoute, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	complete = true
	for _, a := range c.apps {
		routes = append(routes, a.routes...)
		complete = complete && a.routesKnown
	}
	slices.SortFunc(routes, func(a, b RolloutRoute) int {
		if c := strings.Compare(a.App, b.App); c != 0 {
			return c
		}
		return strings.Compare(a.Service, b.Service)
	})
	return routes, complete
}

// keepRoutes stores the routes of a pass that worked them out: the
// decided ones when it deployed, the recorded ones otherwise.
func (c *Controller) keepRoutes(p *pass) {
	if !p.routesKnown {
		return
	}
	routes := p.liveRoutes
	if p.deployed != nil {
		routes = p.routes
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.apps[p.app.Name]; ok {
		a.routes, a.routesKnown = routes, true
	}
}

// ForgetRoutes drops every application's routes, so RolloutRoutes answers
// incomplete until each has had a pass again, and makes every application
// due, so that pass comes as soon as passes run rather than at its
// interval. A controller calls it when it stops running passes for a while
// (it lost the leader lease): another controller may move a rollout on
// meanwhile, and routes kept from before would hand the router weights
// nobody runs any more, even once this controller leads again.
func (c *Controller) ForgetRoutes() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.apps {
		a.routes, a.routesKnown = nil, false
		a.next = time.Time{}
	}
}

// ForgetRolloutCommands drops every operator's command no pass has taken
// and returns how many there were. A controller calls it when it stops
// running passes (it lost the leader lease): the leader that follows never
// had them, and an operator told so sends them there again, so a command
// kept here would be deployed, stale, whenever this controller led again.
// Call it only once no pass runs.
func (c *Controller) ForgetRolloutCommands() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.apps {
		n += len(a.rolloutCmds) + len(a.takenCmds)
		a.rolloutCmds, a.takenCmds = nil, nil
	}
	return n
}

// rolloutStep is a decision that changed something, reported once the
// pass recorded the manifest that carries it.
type rolloutStep struct {
	service string
	d       rollout.Decision
}

// reportRolloutSteps publishes an event and counts a metric for each step
// this pass deployed.
func (c *Controller) reportRolloutSteps(p *pass) {
	for _, s := range p.rolloutSteps {
		st := s.d.State
		data := map[string]any{"action": string(s.d.Action), "phase": string(st.Phase), "step": st.Step, "weight": s.d.Weights.Canary}
		if st.Metric != "" || st.Values != "" {
			data["metric"], data["values"] = st.Metric, st.Values
		}
		c.emit(p, events.RolloutStep, s.service, s.d.Reason, data)
		c.opts.Metrics.ObserveRolloutStep(p.app.Name, s.service, string(s.d.Action))
		p.log.Info("rollout step deployed", "service", s.service, "action", string(s.d.Action), "phase", string(st.Phase),
			"step", st.Step, "weight", s.d.Weights.Canary, "reason", s.d.Reason)
	}
	p.rolloutSteps = nil
}

// rolloutHealth makes an application with an aborted rollout, or one that
// could not be decided, Degraded: a person has to look (promote, retry,
// or a new commit).
//
// An automatic rollback does not act on it (see autoRollback): the record
// before an abort is a step of the same rollout, with traffic on the
// colour the abort just took it from.
func rolloutHealth(p *pass) {
	p.degradedByRollout = false
	for _, r := range p.status.Rollouts {
		var msg string
		switch {
		case r.Error != "":
			msg = fmt.Sprintf("rollout of %s held with all traffic on stable: %s", r.Service, r.Error)
		case r.Phase == string(rollout.Aborted):
			msg = fmt.Sprintf("rollout of %s aborted at step %d: %s", r.Service, r.Step, r.Reason)
			if r.Metric != "" {
				msg += fmt.Sprintf(" (%s %s)", r.Metric, r.Values)
			}
		default:
			continue
		}
		if p.status.Health != application.Degraded {
			p.status.Health, p.status.HealthMessage = application.Degraded, msg
			p.degradedByRollout = true
		} else {
			p.status.HealthMessage += "; " + msg
		}
	}
}

// strayColours makes an application Degraded while, with prune off, an
// extra colour neither the manifest nor the newest record declares (its service's rollout key
// was dropped, or the service removed) still runs tasks: without a router
// it answers to the service's name beside the stable service, so its
// version would otherwise serve traffic with only the sweep's pending list
// to say so. With prune on the sweep removes it in the same pass. Like an
// abort, it is not rolled back automatically: a person has to look.
func strayColours(p *pass, states []charts.ServiceState, declared map[string]health.Result) {
	if pruneEnabled(p) {
		return
	}
	for _, s := range states {
		phase, ok := s.Labels[rollout.LabelPrefix+"phase"]
		if _, isDeclared := declared[s.Name]; isDeclared || !ok || s.Desired == 0 {
			continue
		}
		if deployed(p, s.Name) {
			// A manual application's commit not synced yet: the
			// swarm still runs the record that declares it.
			continue
		}
		msg := fmt.Sprintf("%s, the extra colour of a rollout the manifest no longer declares, still runs %d task(s) of its own version (%s at weight %s%%); prune is off, so remove it or run `flotilla app sync --prune`",
			s.Name, s.Desired, phase, s.Labels[rollout.LabelPrefix+"weight"])
		if p.status.Health != application.Degraded {
			p.status.Health, p.status.HealthMessage = application.Degraded, msg
			p.degradedByRollout = true
		} else {
			p.status.HealthMessage += "; " + msg
		}
	}
}

// deployed reports whether the newest release record (the one this pass
// wrote, or the one before it) declares svc.
func deployed(p *pass, svc string) bool {
	rec := p.recorded
	if rec == nil {
		rec = p.latest
	}
	if rec == nil {
		return false
	}
	_, ok, err := compose.ServiceDigest(rec.Manifest, svc)
	return err == nil && ok
}

// idleColours judges an extra colour the rollout scaled to zero (between
// rollouts, or after an abort) Healthy rather than Suspended: it is
// meant to run nothing, and an application would otherwise stay Suspended
// after every rollout. An abort is reported by rolloutHealth.
func idleColours(p *pass, results map[string]health.Result) {
	for _, r := range p.status.Rollouts {
		res, ok := results[r.Colour]
		if ok && r.Replicas == 0 && res.Health == application.Suspended {
			res.Health, res.Message = application.Healthy, "idle rollout colour: scaled to 0 replicas between rollouts"
			results[r.Colour] = res
		}
	}
}

// recordedLabels are the rollout labels of a colour as they are.
func recordedLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if len(k) > len(rollout.LabelPrefix) && k[:len(rollout.LabelPrefix)] == rollout.LabelPrefix {
			out[k] = v
		}
	}
	return out
}

// settled reports whether a service runs every task it wants with no
// update under way.
func settled(s charts.ServiceState) bool {
	switch s.UpdateState {
	case "", "completed":
	default:
		return false
	}
	return s.Running >= s.Desired
}

// rolloutRevision names a service definition under a rollout spec: a
// commit that only edits the steps starts the rollout again rather than
// meeting a recorded step the spec no longer has.
func rolloutRevision(digest string, spec rollout.Spec) string {
	b, _ := json.Marshal(spec.Value()) // maps of plain values: cannot fail
	h := sha256.New()
	h.Write([]byte(digest))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// declaredReplicas is svc's replica count in the render, 1 when unset.
func (p *pass) declaredReplicas(svc string) int {
	if p.declared != nil {
		if spec, ok := p.declared.Services[p.app.Stack+"_"+svc]; ok && spec.Mode.Replicated != nil && spec.Mode.Replicated.Replicas != nil {
			return max(int(*spec.Mode.Replicated.Replicas), 1)
		}
	}
	return 1
}

// RolloutCommand gives the rollout of app's service an operator's command
// (promote, abort, pause, resume, retry) and asks for a pass. The command
// is taken by the next pass that decides that rollout, once.
func (c *Controller) RolloutCommand(app, service string, cmd rollout.Command) error {
	switch cmd {
	case rollout.CommandPromote, rollout.CommandAbort, rollout.CommandPause, rollout.CommandResume, rollout.CommandRetry:
	default:
		return fmt.Errorf("rollout command %q: not one of promote, abort, pause, resume, retry", cmd)
	}
	c.mu.Lock()
	a, ok := c.apps[app]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("application %q: %w", app, ErrNotFound)
	}
	if a.rolloutCmds == nil {
		a.rolloutCmds = map[string]rollout.Command{}
	}
	a.rolloutCmds[service] = cmd
	c.mu.Unlock()
	return c.Refresh(app)
}

// returnRolloutCommands gives back the commands a pass took and did not
// deploy (it failed, or was a manual application's pass with no sync), so
// the next pass decides with them, unless a newer command for the same
// service arrived meanwhile.
func (c *Controller) returnRolloutCommands(p *pass) {
	if len(p.takenCmds) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[p.app.Name]
	if !ok {
		return
	}
	if a.rolloutCmds == nil {
		a.rolloutCmds = map[string]rollout.Command{}
	}
	for svc, cmd := range p.takenCmds {
		if _, newer := a.rolloutCmds[svc]; !newer {
			a.rolloutCmds[svc] = cmd
		}
	}
}

// takeRolloutCommand returns and forgets the command waiting for app's
// service, if any.
func (c *Controller) takeRolloutCommand(app, service string) rollout.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[app]
	if !ok {
		return rollout.NoCommand
	}
	cmd, ok := a.rolloutCmds[service]
	if !ok {
		return rollout.NoCommand
	}
	delete(a.rolloutCmds, service)
	if a.takenCmds == nil {
		a.takenCmds = map[string]rollout.Command{}
	}
	a.takenCmds[service] = cmd
	return cmd
}

// published is a's status as the API and the console show it: the last
// pass's, with each rollout's command that no pass has published the
// outcome of yet (waiting, or taken by the pass running now) as Pending.
// Called with c.mu held.
func (a *appState) published() application.Status {
	st := a.status
	if len(a.rolloutCmds)+len(a.takenCmds) == 0 || len(st.Rollouts) == 0 {
		return st
	}
	st.Rollouts = slices.Clone(st.Rollouts)
	for i := range st.Rollouts {
		svc := st.Rollouts[i].Service
		cmd, ok := a.rolloutCmds[svc]
		if !ok {
			cmd = a.takenCmds[svc]
		}
		st.Rollouts[i].Pending = string(cmd)
	}
	return st
}
