// Package chartstest provides in-memory backends for tests of the reconciler
// and of anything else that holds a charts.Backend.
package chartstest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// MinimalBackend implements charts.Backend and nothing more, in memory. It
// exists to prove that the reconciler runs every path with the smallest
// contract and reports each feature it loses; it claims no capability.
type MinimalBackend struct {
	mu       sync.Mutex
	stacks   map[string]map[string]*fakeService // stack → scoped name → service
	objects  map[objectKey]string               // network, config or secret → its stack
	releases map[string][]charts.Release        // stack → oldest first
	writes   int
	deploys  int
	// FailReads makes StackServices answer nil, as a backend that could not
	// reach its daemon would.
	FailReads bool
	// FailDeploy, when set, is returned by DeployStack before any write.
	FailDeploy error
	// LoseRecords makes RecordRelease answer nil without storing anything,
	// as a write the daemon acknowledged and then lost would.
	LoseRecords bool
	// recordVersion stamps each stored record, as a swarm object version.
	recordVersion uint64
}

var _ charts.Backend = (*MinimalBackend)(nil)

// objectKey names a network, config or secret the way the swarm tells them
// apart: by kind and name.
type objectKey struct{ kind, name string }

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
		objects:  map[objectKey]string{},
		releases: map[string][]charts.Release{},
	}
}

// DeployStack converts the manifest without a swarm, creates the networks,
// configs and secrets it does not hold yet, and creates or updates each
// service whose spec changed. Like the moby backend it checks everything
// before its first write, and Writes counts objects as well as services.
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
	if err := compose.Unseal(st, req.Sealed); err != nil {
		return charts.DeployResult{}, fmt.Errorf("manifest: %w", err)
	}
	var missing []objectKey
	for _, name := range slices.Sorted(maps.Keys(st.Networks)) {
		missing = append(missing, objectKey{"network", name})
	}
	for _, name := range slices.Sorted(maps.Keys(st.Configs)) {
		missing = append(missing, objectKey{"config", name})
	}
	for _, name := range slices.Sorted(maps.Keys(st.Secrets)) {
		missing = append(missing, objectKey{"secret", name})
		_, known := b.objects[objectKey{"secret", name}]
		if _, given := req.Secrets[name]; !known && !given && st.Secrets[name].Driver == nil {
			return charts.DeployResult{}, fmt.Errorf("secret %q is not on the swarm and its plaintext was not supplied", name)
		}
	}
	missing = slices.DeleteFunc(missing, func(k objectKey) bool { _, ok := b.objects[k]; return ok })
	names := slices.Sorted(maps.Keys(st.Services))
	hashes := make(map[string]string, len(names))
	for _, name := range names {
		if hashes[name], err = specHash(st.Services[name]); err != nil {
			return charts.DeployResult{}, err
		}
	}

	b.deploys++
	var res charts.DeployResult
	for _, k := range missing {
		b.objects[k] = req.Stack
		res.Writes++
	}
	live := b.stacks[req.Stack]
	if live == nil {
		live = map[string]*fakeService{}
		b.stacks[req.Stack] = live
	}
	for _, name := range names {
		spec, h := st.Services[name], hashes[name]
		short := strings.TrimPrefix(name, req.Stack+"_")
		s, ok := live[name]
		switch {
		case !ok:
			live[name] = &fakeService{spec: spec, hash: h, version: 1, labels: serviceLabels(spec, req.Labels)}
			res.Created = append(res.Created, short)
			res.Writes++
		case s.hash != h || slices.Contains(req.Heal, name):
			s.spec, s.hash, s.labels = spec, h, serviceLabels(spec, req.Labels)
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

// serviceLabels is what a written service carries: the manifest's labels
// with the request's stamped over them, in a map of its own.
func serviceLabels(spec swarm.ServiceSpec, stamp map[string]string) map[string]string {
	l := make(map[string]string, len(spec.Labels)+len(stamp))
	maps.Copy(l, spec.Labels)
	maps.Copy(l, stamp)
	return l
}

// StackServices reports every service of the stack as fully running, and
// every job as fully completed.
func (b *MinimalBackend) StackServices(_ context.Context, stack string) []charts.ServiceState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.FailReads {
		return nil
	}
	var out []charts.ServiceState
	for name, s := range b.stacks[stack] {
		mode, desired, job := modeOf(s.spec.Mode)
		state := charts.ServiceState{
			Name:    strings.TrimPrefix(name, stack+"_"),
			ID:      name,
			Image:   s.spec.TaskTemplate.ContainerSpec.Image,
			Mode:    mode,
			Desired: desired,
			Version: s.version,
			Labels:  maps.Clone(s.labels),
		}
		taskState := "running"
		if job {
			state.Completed, taskState = desired, "complete"
		} else {
			state.Running = desired
		}
		state.Tasks = make([]charts.TaskState, desired)
		for i := range state.Tasks {
			state.Tasks[i] = charts.TaskState{ID: fmt.Sprintf("%s.%d", name, i+1), Slot: i + 1, State: taskState, DesiredState: taskState}
		}
		out = append(out, state)
	}
	slices.SortFunc(out, func(a, b charts.ServiceState) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// modeOf names a service mode as charts.ServiceState does and gives its
// desired count, taking the fake's swarm to be one node.
func modeOf(m swarm.ServiceMode) (name string, desired uint64, job bool) {
	switch {
	case m.Global != nil:
		return "global", 1, false
	case m.GlobalJob != nil:
		return "global-job", 1, true
	case m.ReplicatedJob != nil:
		desired = 1
		if m.ReplicatedJob.TotalCompletions != nil {
			desired = *m.ReplicatedJob.TotalCompletions
		} else if m.ReplicatedJob.MaxConcurrent != nil {
			desired = *m.ReplicatedJob.MaxConcurrent
		}
		return "replicated-job", desired, true
	case m.Replicated != nil && m.Replicated.Replicas != nil:
		return "replicated", *m.Replicated.Replicas, false
	}
	return "replicated", 1, false
}

// RemoveStack forgets the stack's services, networks, configs and secrets;
// records stay.
func (b *MinimalBackend) RemoveStack(_ context.Context, stack string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.stacks, stack)
	maps.DeleteFunc(b.objects, func(_ objectKey, owner string) bool { return owner == stack })
	return nil
}

// ForgetService drops one service, by scoped name, from whichever stack
// holds it and reports whether there was one. It is not a capability (the
// backend stays minimal): a test that wants a sweep to remove services
// wraps the backend with a RemoveService that calls it.
func (b *MinimalBackend) ForgetService(scoped string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, services := range b.stacks {
		if _, ok := services[scoped]; ok {
			delete(services, scoped)
			return true
		}
	}
	return false
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
			return fmt.Errorf("record %s revision %d: %w", r.Name, r.Revision, charts.ErrRecordExists)
		}
	}
	if b.LoseRecords {
		return nil
	}
	b.recordVersion++
	r.Version = b.recordVersion
	rs = append(rs, r)
	if keep > 0 && len(rs) > keep {
		rs = rs[len(rs)-keep:]
	}
	b.releases[r.Name] = rs
	return nil
}

// ReleaseNames lists, sorted, every release with a record. It is not
// capability.ReleaseLister, which MinimalBackend does not claim; a fake that
// claims it answers from this.
func (b *MinimalBackend) ReleaseNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for name, rs := range b.releases {
		if len(rs) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// DeleteRelease removes one record, as an operator deleting its config by
// hand would, and reports whether it was there.
func (b *MinimalBackend) DeleteRelease(release string, revision int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	rs := b.releases[release]
	i := slices.IndexFunc(rs, func(r charts.Release) bool { return r.Revision == revision })
	if i < 0 {
		return false
	}
	b.releases[release] = slices.Delete(rs, i, i+1)
	return true
}

// Writes counts every write so far, as DeployResult.Writes does: creates of
// networks, configs and secrets, and creates and updates of services.
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
