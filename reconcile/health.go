package reconcile

import (
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/health"
	"github.com/flotilla-gitops/flotilla/source"
)

// applyHealth judges every service the manifest declares against a swarm
// read and writes the rollup into the pass's status. A failed read is
// Unknown; so is a read a backend without StackServicesReader could not vouch
// for. Neither is ever published as Missing.
func (c *Controller) applyHealth(p *pass, snap *snapshot) {
	if snap.err != nil {
		r := health.Unknown(source.Sanitize(snap.err))
		p.status.Health, p.status.HealthMessage, p.status.Services = r.Health, r.Message, nil
		return
	}
	states, read := snap.stacks[p.app.Stack]
	if !read {
		r := health.Unknown(nil)
		r.Message = "the swarm answered with no services for this stack and the backend cannot tell an empty stack from a failed read"
		p.status.Health, p.status.HealthMessage, p.status.Services = r.Health, r.Message, nil
		return
	}
	results := c.serviceResults(p, states)
	rolled := health.Stack(results)
	p.status.Health, p.status.HealthMessage = rolled.Health, rolled.Message
	p.status.Services = p.status.Services[:0:0]
	for _, n := range sortedKeys(results) {
		r := results[n]
		p.status.Services = append(p.status.Services, application.ServiceStatus{
			Name: n, Health: r.Health, Running: int(r.Running), Desired: int(r.Desired), Message: r.Message,
		})
	}
}

// serviceResults judges every service the manifest declares against one
// read of its stack; a declared service the read lacks is Missing.
func (c *Controller) serviceResults(p *pass, states []charts.ServiceState) map[string]health.Result {
	byName := make(map[string]charts.ServiceState, len(states))
	for _, s := range states {
		byName[s.Name] = s
	}
	now := c.now()
	results := map[string]health.Result{}
	for _, scoped := range declaredServices(p) {
		name := strings.TrimPrefix(scoped, p.app.Stack+"_")
		if s, ok := byName[name]; ok {
			results[name] = health.Service(s, now, health.Options{})
		} else {
			results[name] = health.Missing(declaredReplicas(p, scoped))
		}
	}
	return results
}

// declaredServices lists the scoped names of the services the pass's
// manifest declares, sorted.
func declaredServices(p *pass) []string {
	if p.declared == nil {
		return nil
	}
	return sortedKeys(p.declared.Services)
}

func declaredReplicas(p *pass, scoped string) uint64 {
	spec := p.declared.Services[scoped]
	if r := spec.Mode.Replicated; r != nil && r.Replicas != nil {
		return *r.Replicas
	}
	return 1
}
