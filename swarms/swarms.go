// Package swarms holds the swarms one controller deploys to: a backend per
// swarm, each reached through its own Docker client, and what is known
// about reaching it. The controller's own Docker environment is the swarm
// named application.LocalDestination; every other comes from the
// applications file's swarms, with its managers tried in order (see
// failover).
//
// Each swarm is separate on purpose: its own client, connection pool and
// request counter, so that one that cannot be reached costs only its own
// applications, and a count of requests or writes is per swarm.
package swarms

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// Options configure New.
type Options struct {
	// File names the applications file in errors about its swarms.
	File string
	// Local is the backend of the controller's own Docker environment.
	// Nil: there is no local swarm, and an application naming it fails.
	Local *backend.Backend
	// Backend is the template of every other swarm's backend options
	// (logger, request timeout, image resolution). Its Client and
	// OnRequest are set per swarm.
	Backend backend.Options
	// Metrics counts each swarm's requests under its name, and records its
	// reachability. Nil records nothing.
	Metrics *metrics.Metrics
	// Logger receives failovers. Default slog.Default().
	Logger *slog.Logger
	// SSHFlags are passed to every ssh the connection helper runs for an
	// ssh:// host, such as ["-F", "/run/secrets/ssh_config"]. Default:
	// none, the ssh client's own configuration.
	SSHFlags []string
}

// Registry is the set of swarms. It is safe for concurrent use.
type Registry struct {
	opts   Options
	swarms map[string]*entry
	names  []string // sorted
}

// entry is one swarm.
type entry struct {
	name    string
	hosts   []string
	backend *backend.Backend
	fo      *failover // nil for the local swarm
}

// New connects the registry to each swarm of the applications file, without
// contacting any: a swarm that is down at start is reported by its first
// read. Problems with a swarm's TLS files name the field and the file.
func New(ctx context.Context, defs []application.Swarm, opts Options) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{opts: opts, swarms: map[string]*entry{}}
	if opts.Local != nil {
		r.swarms[application.LocalDestination] = &entry{
			name: application.LocalDestination, backend: opts.Local,
			hosts: []string{opts.Local.Client().DaemonHost()},
		}
	}
	for i, d := range defs {
		e, err := r.connect(ctx, i, d)
		if err != nil {
			return nil, err
		}
		r.swarms[d.Name] = e
	}
	for name := range r.swarms {
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

func (r *Registry) connect(ctx context.Context, i int, d application.Swarm) (*entry, error) {
	fo := &failover{swarm: d.Name, log: r.opts.Logger.With("component", "swarms")}
	var tlsConf *tls.Config
	if d.TLS != nil {
		c, err := loadTLS(r.opts.File, i, d.TLS)
		if err != nil {
			return nil, err
		}
		tlsConf = c
	}
	for _, h := range d.Hosts {
		ep, err := newEndpoint(d, h, tlsConf, r.opts.SSHFlags)
		if err != nil {
			return nil, fmt.Errorf("swarm %s: host %s: %w", d.Name, redact(h), err)
		}
		fo.endpoints = append(fo.endpoints, ep)
	}
	if len(fo.endpoints) == 0 {
		return nil, fmt.Errorf("swarm %s: no hosts", d.Name)
	}
	bo := r.opts.Backend
	// The host only fills the request URL, which fo rewrites for the
	// manager it sends to.
	bo.Host, bo.Transport = "tcp://flotilla-swarm-"+d.Name+":2375", fo
	bo.OnRequest = r.opts.Metrics.DockerRequests(d.Name)
	if bo.Logger != nil {
		bo.Logger = bo.Logger.With("swarm", d.Name)
	}
	b, err := backend.New(ctx, bo)
	if err != nil {
		return nil, fmt.Errorf("swarm %s: %w", d.Name, err)
	}
	return &entry{name: d.Name, hosts: slices.Clone(d.Hosts), backend: b, fo: fo}, nil
}

// Names returns the swarms' names, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// Backends returns every swarm's backend by name, for the reconciler.
func (r *Registry) Backends() map[string]charts.Backend {
	out := make(map[string]charts.Backend, len(r.swarms))
	for name, e := range r.swarms {
		out[name] = e.backend
	}
	return out
}

// Backend returns the named swarm's backend.
func (r *Registry) Backend(name string) (*backend.Backend, bool) {
	e, ok := r.swarms[name]
	if !ok {
		return nil, false
	}
	return e.backend, true
}

// Status is what is known about reaching one swarm.
type Status struct {
	Name string `json:"name"`
	// Reachable: a manager answered and says it can manage the swarm.
	Reachable bool `json:"reachable"`
	// Error says why not; empty when Reachable.
	Error string `json:"error,omitempty"`
	// Host is the endpoint in use: the one that last answered.
	Host  string   `json:"host"`
	Hosts []string `json:"hosts"`
	// Nodes and Managers count the swarm's nodes, as its manager reports.
	Nodes    int `json:"nodes"`
	Managers int `json:"managers"`
	// EngineVersion is the Docker engine version of the manager in use.
	EngineVersion string `json:"engineVersion,omitempty"`
	// Checked is when this was found out.
	Checked time.Time `json:"checked"`
}

// CheckTimeout bounds one swarm's check.
const CheckTimeout = 5 * time.Second

// Check asks every swarm, side by side, whether it can be managed, and
// returns their statuses sorted by name. Each is bounded by CheckTimeout, so
// one that does not answer cannot hold up the others.
func (r *Registry) Check(ctx context.Context) []Status {
	out := make([]Status, len(r.names))
	var wg sync.WaitGroup
	for i, name := range r.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = r.check(ctx, r.swarms[name])
		}()
	}
	wg.Wait()
	return out
}

func (r *Registry) check(ctx context.Context, e *entry) Status {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	st := Status{Name: e.name, Checked: time.Now().UTC()}
	for _, h := range e.hosts {
		st.Hosts = append(st.Hosts, redact(h))
	}
	info, err := e.backend.Client().Info(ctx, client.InfoOptions{})
	st.Host = e.host()
	switch {
	case err != nil:
		st.Error = err.Error()
		// The Docker client's wording around it names the placeholder
		// host; the failover's own names the ones tried.
		var ue *unreachableError
		if errors.As(err, &ue) {
			st.Error = ue.Error()
		}
	case info.Info.Swarm.LocalNodeState != swarm.LocalNodeStateActive:
		st.Error = fmt.Sprintf("the engine at %s is not part of a swarm (state %q)", st.Host, info.Info.Swarm.LocalNodeState)
	case !info.Info.Swarm.ControlAvailable:
		st.Error = fmt.Sprintf("the engine at %s is not a swarm manager", st.Host)
	default:
		st.Reachable = true
	}
	if err == nil {
		st.Nodes, st.Managers, st.EngineVersion = info.Info.Swarm.Nodes, info.Info.Swarm.Managers, info.Info.ServerVersion
	}
	r.opts.Metrics.SetSwarmReachable(e.name, st.Reachable)
	return st
}

// host is the endpoint in use.
func (e *entry) host() string {
	if e.fo == nil {
		return e.hosts[0]
	}
	return redact(e.fo.host())
}

// Host returns the endpoint the named swarm's requests go to now.
func (r *Registry) Host(name string) (string, bool) {
	e, ok := r.swarms[name]
	if !ok {
		return "", false
	}
	return e.host(), true
}
