package reconcile

import (
	"fmt"
	"slices"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// Publisher receives the controller's events; *events.Broker is one.
// Publish must not block.
type Publisher interface {
	Publish(events.Event) events.Event
}

// emit publishes one event about the pass's application, if anyone listens.
func (c *Controller) emit(p *pass, typ events.Type, service, message string, data map[string]any) {
	if c.opts.Events == nil {
		return
	}
	rev := ""
	if p.rev != nil {
		rev = p.rev.Commit
	}
	c.opts.Events.Publish(events.Event{
		Type: typ, App: p.app.Name, Stack: p.app.Stack, Swarm: destination(p.app), Service: service,
		Revision: rev, Message: message, Data: data,
	})
}

// reportChanges publishes what changed between the previous status and this
// one: health of the application and of each service, and drift appearing.
// Comparing with the previous status is what keeps a steady state silent.
func (c *Controller) reportChanges(p *pass, prev application.Status) {
	st := p.status
	c.opts.Metrics.SetStatus(st)
	c.opts.Metrics.SetDriftFields(st.Name, len(st.Drift))
	if c.opts.Events == nil {
		return
	}
	if st.Health != prev.Health {
		c.emit(p, events.HealthChanged, "", fmt.Sprintf("%s → %s: %s", orUnknown(prev.Health), st.Health, st.HealthMessage), nil)
	}
	prevSvc := map[string]application.ServiceStatus{}
	for _, s := range prev.Services {
		prevSvc[s.Name] = s
	}
	for _, s := range st.Services {
		if old, ok := prevSvc[s.Name]; ok && old.Health == s.Health && old.Running == s.Running && old.Desired == s.Desired {
			continue
		}
		ev := events.Progress(p.app.Name, p.app.Stack, s.Name, s.Running, s.Desired, "", s.Message)
		ev.Swarm = destination(p.app)
		c.opts.Events.Publish(ev)
	}
	if len(st.Drift) > 0 && !sameDrift(prev.Drift, st.Drift) {
		c.emit(p, events.DriftDetected, "", fmt.Sprintf("%d field(s) drifted", len(st.Drift)), map[string]any{"fields": len(st.Drift)})
	}
}

func orUnknown(h application.Health) application.Health {
	if h == "" {
		return application.HealthUnknown
	}
	return h
}

func sameDrift(a, b []application.Drift) bool {
	return slices.Equal(a, b)
}

// observeOutcome records a finished pass in the metrics.
func (c *Controller) observeOutcome(p *pass, err error, gated bool, took time.Duration) {
	outcome := metrics.Succeeded
	switch {
	case err != nil:
		outcome = metrics.Failed
	case gated:
		outcome = metrics.Gated
	}
	c.opts.Metrics.ObserveReconcile(p.app.Name, outcome, took)
	if p.deployed != nil {
		c.opts.Metrics.SwarmWrites(destination(p.app), metrics.WriteService, len(p.deployed.Created)+len(p.deployed.Updated))
	}
	if p.healed != nil {
		c.opts.Metrics.SwarmWrites(destination(p.app), metrics.WriteService, len(p.healed.Updated)+len(p.healed.Created))
	}
}
