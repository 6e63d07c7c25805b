package capability

import (
	"context"
	"fmt"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
)

// Wrapper is implemented by a backend that decorates another one (per
// application, for metrics, for retries). The lookup helpers follow Unwrap so
// a decoration never hides a capability of what it wraps.
type Wrapper interface {
	Unwrap() charts.Backend
}

// As finds the first backend in b's Unwrap chain that implements T.
func As[T any](b charts.Backend) (T, bool) {
	for b != nil {
		if c, ok := b.(T); ok {
			return c, true
		}
		w, ok := b.(Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	var zero T
	return zero, false
}

// ErrUnavailable describes a feature lost because the backend lacks a
// capability. Its message is the sentence status shows.
type ErrUnavailable struct {
	Feature    string
	Capability string
}

func (e *ErrUnavailable) Error() string {
	return fmt.Sprintf("%s unavailable: backend lacks %s", e.Feature, e.Capability)
}

// ReadStack reads one stack's services. If b implements StackServicesReader
// the read can fail honestly; otherwise it falls back to StackServices, whose
// nil cannot be told apart from an empty stack, and says so with ok=false so a
// caller knows not to publish an empty answer as Missing.
func ReadStack(ctx context.Context, b charts.Backend, stack string) (states []charts.ServiceState, trusted bool, err error) {
	if r, ok := As[StackServicesReader](b); ok {
		s, err := r.ReadStackServices(ctx, stack)
		return s, true, err
	}
	s := b.StackServices(ctx, stack)
	return s, len(s) > 0, nil
}

// ReadStacks reads several stacks. If b implements StacksReader it takes one
// look at the swarm; otherwise it reads each stack through ReadStack and keeps
// the all-or-nothing contract: the first failure fails them all. A stack
// whose fallback read was empty is left out of the map rather than reported
// as having no services, since an untrusted empty read may be a failed one.
func ReadStacks(ctx context.Context, b charts.Backend, stacks []string) (map[string][]charts.ServiceState, error) {
	if r, ok := As[StacksReader](b); ok {
		return r.ReadStacks(ctx, stacks)
	}
	out := make(map[string][]charts.ServiceState, len(stacks))
	for _, s := range stacks {
		states, trusted, err := ReadStack(ctx, b, s)
		if err != nil {
			return nil, fmt.Errorf("read stack %s: %w", s, err)
		}
		if trusted {
			out[s] = states
		}
	}
	return out, nil
}

// LatestRelease returns the newest record of release, or nil when it has
// none; known is the newest record the caller read before (nil for none).
// If b implements ReleaseHead and answers that known is still the newest,
// known is returned without reading the history; otherwise the history is
// read in full and its newest record returned, which is the same answer at
// the cost of every record's data.
func LatestRelease(ctx context.Context, b charts.Backend, release string, known *charts.Release) (*charts.Release, error) {
	if h, ok := As[ReleaseHead](b); ok && known != nil && known.Name == release {
		current, err := h.IsLatestRelease(ctx, *known)
		if err != nil {
			return nil, err
		}
		if current {
			return known, nil
		}
	}
	rs, err := b.Releases(ctx, release)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return &rs[0], nil
}

// ReadStacksLive reads several stacks as ReadStacks does. If b implements
// LiveStacksReader the same look also returns every listed service's spec,
// by stack and scoped name (live is non-nil when err is nil); otherwise live
// is nil and the stacks are read through ReadStacks.
func ReadStacksLive(ctx context.Context, b charts.Backend, stacks []string) (states map[string][]charts.ServiceState, live map[string]map[string]swarm.Service, err error) {
	if r, ok := As[LiveStacksReader](b); ok {
		return r.ReadLiveStacks(ctx, stacks)
	}
	states, err = ReadStacks(ctx, b, stacks)
	return states, nil, err
}

// ReadLiveServices reads the live services of several stacks at once. If b
// implements LiveServicesBatch it takes one look at the swarm and batched is
// true; otherwise nothing is read, batched is false, and the caller reads
// each stack it needs through LiveDrift.LiveServices, which is the same
// answer at one request per stack, with each stack's failure its own.
func ReadLiveServices(ctx context.Context, b charts.Backend, stacks []string) (live map[string]map[string]swarm.Service, batched bool, err error) {
	lb, ok := As[LiveServicesBatch](b)
	if !ok {
		return nil, false, nil
	}
	live, err = lb.LiveServicesOf(ctx, stacks)
	return live, true, err
}

// CheckLatestReleases says, by release name, which of the kept records (one
// per release) are still the newest of their releases. If b implements
// ReleaseHeads one listing answers for all of them and batched is true;
// otherwise nothing is read, batched is false, and the caller checks each
// record on its own through LatestRelease, which is the same answer at one
// read per release.
func CheckLatestReleases(ctx context.Context, b charts.Backend, kept []charts.Release) (current map[string]bool, batched bool, err error) {
	h, ok := As[ReleaseHeads](b)
	if !ok {
		return nil, false, nil
	}
	current, err = h.AreLatestReleases(ctx, kept)
	return current, true, err
}
