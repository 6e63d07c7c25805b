package compose

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client/pkg/versions"
)

// MinAPIVersion is the oldest engine API Flotilla deploys through (Docker
// 20.10). A check that knows no daemon checks against it.
const MinAPIVersion = "1.41"

// apiField is one service option that a compose file can set and that only
// engine APIs from since on carry. An older daemon decodes the spec without
// it, so the service it stores lacks the field: written anyway, every
// comparison of desired and live would differ on it forever.
type apiField struct {
	since string
	field string // as the compose file spells it
	set   func(*swarm.ServiceSpec) bool
	drop  func(*swarm.ServiceSpec) // nil: cannot be dropped, the daemon refuses the service
}

var apiFields = []apiField{
	{since: "1.40", field: "sysctls",
		set:  func(s *swarm.ServiceSpec) bool { return cs(s) != nil && len(cs(s).Sysctls) > 0 },
		drop: func(s *swarm.ServiceSpec) { ownCS(s).Sysctls = nil }},
	{since: "1.40", field: "deploy.placement.max_replicas_per_node",
		set: func(s *swarm.ServiceSpec) bool {
			return s.TaskTemplate.Placement != nil && s.TaskTemplate.Placement.MaxReplicas != 0
		},
		drop: func(s *swarm.ServiceSpec) {
			p := *s.TaskTemplate.Placement
			p.MaxReplicas = 0
			s.TaskTemplate.Placement = &p
		}},
	{since: "1.40", field: "credential_spec.config",
		set: func(s *swarm.ServiceSpec) bool {
			return cs(s) != nil && cs(s).Privileges != nil && cs(s).Privileges.CredentialSpec != nil && cs(s).Privileges.CredentialSpec.Config != ""
		},
		drop: func(s *swarm.ServiceSpec) {
			c := ownCS(s)
			p := *c.Privileges
			cred := *p.CredentialSpec
			cred.Config = ""
			p.CredentialSpec = &cred
			c.Privileges = &p
		}},
	{since: "1.41", field: "cap_add",
		set:  func(s *swarm.ServiceSpec) bool { return cs(s) != nil && len(cs(s).CapabilityAdd) > 0 },
		drop: func(s *swarm.ServiceSpec) { ownCS(s).CapabilityAdd = nil }},
	{since: "1.41", field: "cap_drop",
		set:  func(s *swarm.ServiceSpec) bool { return cs(s) != nil && len(cs(s).CapabilityDrop) > 0 },
		drop: func(s *swarm.ServiceSpec) { ownCS(s).CapabilityDrop = nil }},
	{since: "1.41", field: "ulimits",
		set:  func(s *swarm.ServiceSpec) bool { return cs(s) != nil && len(cs(s).Ulimits) > 0 },
		drop: func(s *swarm.ServiceSpec) { ownCS(s).Ulimits = nil }},
	{since: "1.41", field: "deploy.resources.limits.pids",
		set: func(s *swarm.ServiceSpec) bool {
			r := s.TaskTemplate.Resources
			return r != nil && r.Limits != nil && r.Limits.Pids != 0
		},
		drop: func(s *swarm.ServiceSpec) {
			r := *s.TaskTemplate.Resources
			l := *r.Limits
			l.Pids = 0
			r.Limits = &l
			s.TaskTemplate.Resources = &r
		}},
	{since: "1.41", field: "deploy.mode (replicated-job, global-job)",
		set: func(s *swarm.ServiceSpec) bool { return s.Mode.ReplicatedJob != nil || s.Mode.GlobalJob != nil }},
	{since: "1.44", field: "healthcheck.start_interval",
		set: func(s *swarm.ServiceSpec) bool {
			return cs(s) != nil && cs(s).Healthcheck != nil && cs(s).Healthcheck.StartInterval != 0
		},
		drop: func(s *swarm.ServiceSpec) {
			c := ownCS(s)
			h := *c.Healthcheck
			h.StartInterval = 0
			c.Healthcheck = &h
		}},
	{since: "1.46", field: "oom_score_adj",
		set:  func(s *swarm.ServiceSpec) bool { return cs(s) != nil && cs(s).OomScoreAdj != 0 },
		drop: func(s *swarm.ServiceSpec) { ownCS(s).OomScoreAdj = 0 }},
}

func cs(s *swarm.ServiceSpec) *swarm.ContainerSpec { return s.TaskTemplate.ContainerSpec }

// ownCS gives s a container spec of its own before a field of it is
// cleared: the one it holds may be shared with another copy of the spec.
func ownCS(s *swarm.ServiceSpec) *swarm.ContainerSpec {
	c := *s.TaskTemplate.ContainerSpec
	s.TaskTemplate.ContainerSpec = &c
	return &c
}

// UnsupportedFields names, one warning per service and field, what the
// stack's services set that engine API version cannot carry. Sorted; nil
// when version is empty or carries everything.
func (st *Stack) UnsupportedFields(version string) []string {
	return st.forAPI(version, false)
}

// ForAPIVersion drops from the stack's services every field engine API
// version cannot carry, so that what is written is what the daemon keeps,
// and returns what it dropped in the words of UnsupportedFields. A field
// that cannot be dropped (a job mode) stays and is named all the same.
//
// `docker stack deploy` sends such fields and lets the daemon lose them;
// the spec Flotilla compares with the live one has to be the kept one, or
// drift would be reported, and healed, on every pass.
func (st *Stack) ForAPIVersion(version string) []string {
	return st.forAPI(version, true)
}

func (st *Stack) forAPI(version string, drop bool) []string {
	if version == "" {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(st.Services)) {
		spec := st.Services[name]
		short := strings.TrimPrefix(name, st.Namespace+"_")
		for _, f := range apiFields {
			if !versions.LessThan(version, f.since) || !f.set(&spec) {
				continue
			}
			what := "is dropped for API " + version
			if f.drop == nil {
				what = "cannot be dropped: a daemon at API " + version + " refuses the service"
			} else if drop {
				f.drop(&spec)
			}
			out = append(out, fmt.Sprintf("service %s: %s needs engine API %s and %s", short, f.field, f.since, what))
		}
		if drop {
			st.Services[name] = spec
		}
	}
	return out
}
