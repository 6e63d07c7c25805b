package compose

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/docker/cli/cli/compose/convert"
	composetypes "github.com/docker/cli/cli/compose/types"
)

// Swarm's own rules for the names a stack writes. The daemon enforces them
// one object at a time, so a stack with one bad name is refused only after
// the objects before it were created; checking them all first keeps a bad
// file from writing anything.
const (
	// MaxServiceName bounds service and network names: a DNS label.
	MaxServiceName = 63
	// MaxObjectName bounds config and secret names.
	MaxObjectName = maxObjectName
)

var (
	// A service or network name is a DNS name component: letters and
	// digits, with '-' and '_' only between them.
	serviceNameRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[-_]*[a-zA-Z0-9]+)*$`)
	// A config or secret name may also hold '.', and starts and ends with a
	// letter or digit.
	objectNameRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9._-]*[a-zA-Z0-9])?$`)
)

// CheckName reports why Swarm would refuse name for an object of kind
// ("service", "network", "config" or "secret"), or nil. The name is the
// whole swarm name, stack prefix included.
func CheckName(kind, name string) error {
	max, re, chars := MaxServiceName, serviceNameRE, "letters, digits, and '-' or '_' between them"
	if kind == "config" || kind == "secret" {
		max, re, chars = MaxObjectName, objectNameRE, "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	}
	switch {
	case len(name) > max:
		return fmt.Errorf("%s name %q is %d characters, the stack prefix included; Swarm allows %d", kind, name, len(name), max)
	case !re.MatchString(name):
		return fmt.Errorf("%s name %q is not valid in Swarm: use %s", kind, name, chars)
	}
	return nil
}

// checkNames refuses, against the field that declared it, the first name
// of the loaded model that Swarm would refuse: services, the networks the
// stack creates (the default one included), and the configs and secrets it
// creates, once fileObject has named them.
func (p *project) checkNames(stack string, cfg *composetypes.Config) error {
	for _, svc := range cfg.Services {
		if err := CheckName("service", stack+"_"+svc.Name); err != nil {
			return p.fault("services."+svc.Name, err)
		}
	}
	for _, key := range sortedKeys(declaredNetworks(cfg.Services)) {
		n, ok := cfg.Networks[key]
		if ok && n.External.External {
			continue
		}
		name := stack + "_" + key
		if ok && n.Name != "" {
			name = n.Name
		}
		if err := CheckName("network", name); err != nil {
			field := "networks." + key
			if !ok {
				field = "services" // the implicit default network
			}
			return p.fault(field, err)
		}
	}
	for _, key := range sortedKeys(cfg.Configs) {
		if c := cfg.Configs[key]; !c.External.External {
			if err := CheckName("config", objectName(convert.NewNamespace(stack), key, composetypes.FileObjectConfig(c))); err != nil {
				return p.fault("configs."+key, err)
			}
		}
	}
	for _, key := range sortedKeys(cfg.Secrets) {
		if s := cfg.Secrets[key]; !s.External.External {
			if err := CheckName("secret", objectName(convert.NewNamespace(stack), key, composetypes.FileObjectConfig(s))); err != nil {
				return p.fault("secrets."+key, err)
			}
		}
	}
	return nil
}

// NameProblem is one name of a converted stack that Swarm would refuse.
type NameProblem struct {
	Kind string // "service", "network", "config" or "secret"
	Name string // the swarm name
	Err  error
}

// CheckNames is checkNames for a converted stack, for a caller that holds
// no compose files (a deploy of any manifest): every bad name, by kind in
// the order above, then by name.
func (st *Stack) CheckNames() []NameProblem {
	var out []NameProblem
	for _, kind := range []struct {
		kind  string
		names []string
	}{
		{"service", slices.Sorted(maps.Keys(st.Services))},
		{"network", slices.Sorted(maps.Keys(st.Networks))},
		{"config", slices.Sorted(maps.Keys(st.Configs))},
		{"secret", slices.Sorted(maps.Keys(st.Secrets))},
	} {
		for _, name := range kind.names {
			if err := CheckName(kind.kind, name); err != nil {
				out = append(out, NameProblem{Kind: kind.kind, Name: name, Err: err})
			}
		}
	}
	return out
}
