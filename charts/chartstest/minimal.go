// Package chartstest provides in-memory backends for tests of the reconciler
// and of anything else that holds a charts.Backend.
package chartstest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// MinimalBackend implements charts.Backend and nothing more, in memory. It
// exists to prove that the reconciler runs every path with the smallest
// contract and reports each feature it loses; it claims no capability.
type MinimalBackend struct {
	mu       sync.Mutex
	stacks   map[string]map[string]*fakeService // stack → scoped name → service
	releases map[string][]charts.Release        // stack → oldest first
	writes   int
	deploys  int
	// FailReads makes StackServices answer nil, as a backend that could not
	// reach its daemon would.
	FailReads bool
	// FailDeploy, when set, is returned by DeployStack before any write.
	FailDeploy error
}

var _ charts.Backend = (*MinimalBackend)(nil)

type fakeService struct {
	spec    swarm.ServiceSpec
	hash    string
	version uint64
	labels  map[string]string
}

// NewMinimal returns an empty MinimalBackend.
func NewMinimal() *MinimalBackend {
	return &MinimalBackend{
		stacks:   map[string]map[string]*fakeService{},
		releases: map[string][]charts.Release{},
	}
}

// DeployStack converts the manifest without a swarm and creates or updates
// each service whose spec changed.
func (b *MinimalBackend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.FailDeploy != nil {
		return charts.DeployResult{}, b.FailDeploy
	}
	st, err := compose.Convert(ctx, req.Manifest, req.Stack, nil)
	if err != nil {
		return charts.DeployResult{}, fmt.Errorf("convert: %w", err)
	}
	b.deploys++
	live := b.stacks[req.Stack]
	if live == nil {
		live = map[string]*fakeService{}
		b.stacks[req.Stack] = live
	}
	var res charts.DeployResult
	names := make([]string, 0, len(st.Services))
	for n := range st.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		spec := st.Services[name]
		h, err := specHash(spec)
		if err != nil {
			return res, err
		}
		short := strings.TrimPrefix(name, req.Stack+"_")
		s, ok := live[name]
		switch {
		case !ok:
			live[name] = &fakeService{spec: spec, hash: h, version: 1, labels: req.Labels}
			res.Created = append(res.Created, short)
			res.Writes++
		case s.hash != h || slices.Contains(req.Heal, name):
			s.spec, s.hash, s.labels = spec, h, req.Labels
			s.version++
			res.Updated = append(res.Updated, short)
			res.Writes++
		default:
			res.Unchanged = append(res.Unchanged, short)
		}
	}
	b.writes += res.Writes
	return res, nil
}

// StackServices reports every service of the stack as fully running.
func (b *MinimalBackend) StackServices(_ context.Context, stack string) []charts.ServiceState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.FailReads {
		return nil
	}
	var out []charts.ServiceState
	for name, s := range b.stacks[stack] {
		desired := uint64(1)
		mode := "replicated"
		if s.spec.Mode.Global != nil {
			mode = "global"
		} else if s.spec.Mode.Replicated != nil && s.spec.Mode.Replicated.Replicas != nil {
			desired = *s.spec.Mode.Replicated.Replicas
		}
		tasks := make([]charts.TaskState, desired)
		for i := range tasks {
			tasks[i] = charts.TaskState{ID: fmt.Sprintf("%s.%d", name, i+1), Slot: i + 1, State: "running", DesiredState: "running"}
		}
		out = append(out, charts.ServiceState{
			Tasks:   tasks,
			Name:    strings.TrimPrefix(name, stack+"_"),
			ID:      name,
			Image:   s.spec.TaskTemplate.ContainerSpec.Image,
			Mode:    mode,
			Desired: desired,
			Running: desired,
			Version: s.version,
			Labels:  s.labels,
		})
	}
	slices.SortFunc(out, func(a, b charts.ServiceState) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// RemoveStack forgets the stack's services; records stay.
func (b *MinimalBackend) RemoveStack(_ context.Context, stack string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.stacks, stack)
	return nil
}

// Releases returns the stack's records newest first.
func (b *MinimalBackend) Releases(_ context.Context, release string) ([]charts.Release, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rs := slices.Clone(b.releases[release])
	slices.Reverse(rs)
	return rs, nil
}

// RecordRelease appends r and keeps the newest keep records.
func (b *MinimalBackend) RecordRelease(_ context.Context, r charts.Release, keep int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rs := b.releases[r.Name]
	for _, old := range rs {
		if old.Revision == r.Revision {
			return errors.New("release revision already recorded")
		}
	}
	rs = append(rs, r)
	if keep > 0 && len(rs) > keep {
		rs = rs[len(rs)-keep:]
	}
	b.releases[r.Name] = rs
	return nil
}

// Writes counts service creates and updates so far.
func (b *MinimalBackend) Writes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes
}

// ServiceVersion returns a service's version by scoped name, 0 if absent.
func (b *MinimalBackend) ServiceVersion(stack, scoped string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.stacks[stack][scoped]; ok {
		return s.version
	}
	return 0
}

func specHash(spec swarm.ServiceSpec) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hash spec: %w", err)
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%x", sum), nil
}
