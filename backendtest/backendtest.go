// Package backendtest is the conformance suite of charts.Backend and of
// every capability in package capability. Every implementation runs the
// same behaviour tests, the moby backend on a real swarm and the in-memory
// fakes in memory, so a fake the reconciler's tests rely on cannot promise
// what the real backend does not do.
//
// Each check is a behaviour the contract's or a capability's doc comments
// state; the suite asserts nothing an implementation is free to do
// differently. A capability is checked only where the backend implements
// it, and every capability in capability.All has a check.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
)

// Options adapt the suite to a backend.
type Options struct {
	// Name returns a fresh stack name. Nil uses a random lowercase name.
	// Every subtest deploys to and records under names of its own, so
	// subtests run in parallel.
	Name func(t testing.TB) string
	// Cleanup, when set, is called with every name the suite takes, so a
	// backend with state outside the test can register its removal with
	// t.Cleanup (services, networks, configs, secrets and records).
	Cleanup func(t testing.TB, stack string)
	// Image is the image every service runs. It must be available where
	// the backend deploys, keep running when started without arguments,
	// and exit 0 when its arguments are "exit 0" (the job). Default
	// "flotilla-test/app:1", whose program does both.
	Image string
	// Timeout bounds each wait for tasks to reach their desired count.
	// Default 30s.
	Timeout time.Duration
}

type suite struct {
	opts       Options
	newBackend func(t *testing.T) charts.Backend
}

func newSuite(newBackend func(t *testing.T) charts.Backend, opts Options) *suite {
	if opts.Image == "" {
		opts.Image = "flotilla-test/app:1"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	return &suite{opts: opts, newBackend: newBackend}
}

// Run runs the conformance suite against the backends newBackend returns,
// one per subtest: the charts.Backend contract, then, under "Capability",
// the check of each capability the backend implements. newBackend may
// return the same backend every time: subtests never share a stack or a
// release name.
func Run(t *testing.T, newBackend func(t *testing.T) charts.Backend, opts Options) {
	s := newSuite(newBackend, opts)
	tests := []struct {
		name string
		fn   func(t *testing.T, b charts.Backend)
	}{
		{"DeployCreates", s.testDeployCreates},
		{"RedeployWritesNothing", s.testRedeployWritesNothing},
		{"ChangeUpdatesOnlyThatService", s.testChangeUpdatesOnlyThatService},
		{"WritesCountConfigs", s.testWritesCountConfigs},
		{"HealRewrites", s.testHealRewrites},
		{"LabelsOnServices", s.testLabelsOnServices},
		{"NeverRemoves", s.testNeverRemoves},
		{"InvalidRequestWritesNothing", s.testInvalidRequestWritesNothing},
		{"StackServicesReport", s.testStackServicesReport},
		{"StackServicesModes", s.testStackServicesModes},
		{"StackServicesUnknownStack", s.testStackServicesUnknownStack},
		{"RemoveStackKeepsReleases", s.testRemoveStackKeepsReleases},
		{"ReleasesNewestFirst", s.testReleasesNewestFirst},
		{"RecordReleaseKeep", s.testRecordReleaseKeep},
		{"RecordReleaseRefusesDuplicate", s.testRecordReleaseRefusesDuplicate},
		{"RecordReleaseRoundTrip", s.testRecordReleaseRoundTrip},
		{"ReleasesUnknown", s.testReleasesUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s.newBackend(t))
		})
	}
	s.runCapabilities(t)
}

// RunCapabilities runs only the capability checks, for a backend whose
// charts.Backend contract is already held to the suite elsewhere: a test
// fake that adds capabilities to chartstest.MinimalBackend, say. The checks
// still deploy through the contract, so it must work.
func RunCapabilities(t *testing.T, newBackend func(t *testing.T) charts.Backend, opts Options) {
	newSuite(newBackend, opts).runCapabilities(t)
}

// stack takes a fresh name and registers its cleanup.
func (s *suite) stack(t *testing.T) string {
	t.Helper()
	var name string
	if s.opts.Name != nil {
		name = s.opts.Name(t)
	} else {
		var b [5]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		name = "bt" + hex.EncodeToString(b[:])
	}
	if s.opts.Cleanup != nil {
		s.opts.Cleanup(t, name)
	}
	return name
}

// deploy sends req and fails the test on error.
func deploy(t *testing.T, b charts.Backend, req charts.DeployRequest) charts.DeployResult {
	t.Helper()
	res, err := b.DeployStack(context.Background(), req)
	if err != nil {
		t.Fatalf("deploy %s: %v", req.Stack, err)
	}
	return res
}

// want is the DeployResult a step expects. The contract gives no order for
// the name lists, so they are compared as sets.
type want struct {
	created, updated, unchanged []string
	writes                      int
}

func checkResult(t *testing.T, step string, got charts.DeployResult, w want) {
	t.Helper()
	same := func(a, b []string) bool {
		a, b = slices.Clone(a), slices.Clone(b)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b)
	}
	if !same(got.Created, w.created) || !same(got.Updated, w.updated) || !same(got.Unchanged, w.unchanged) || got.Writes != w.writes {
		t.Fatalf("%s: got created %v updated %v unchanged %v writes %d; want created %v updated %v unchanged %v writes %d",
			step, got.Created, got.Updated, got.Unchanged, got.Writes, w.created, w.updated, w.unchanged, w.writes)
	}
	if got.Changed() != (w.writes > 0) {
		t.Fatalf("%s: Changed() = %v with %d writes", step, got.Changed(), got.Writes)
	}
}

// byName indexes a StackServices answer by unscoped name, failing on a
// name reported twice.
func byName(t *testing.T, states []charts.ServiceState) map[string]charts.ServiceState {
	t.Helper()
	out := make(map[string]charts.ServiceState, len(states))
	for _, st := range states {
		if _, dup := out[st.Name]; dup {
			t.Fatalf("service %q reported twice", st.Name)
		}
		out[st.Name] = st
	}
	return out
}

func names(states []charts.ServiceState) []string {
	out := make([]string, 0, len(states))
	for _, st := range states {
		out = append(out, st.Name)
	}
	slices.Sort(out)
	return out
}

// eventually polls cond until it holds or the suite's timeout passes.
// Swarm reports tasks as they start, so a read right after a deploy may
// legitimately lag.
func (s *suite) eventually(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(s.opts.Timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %v: %s", s.opts.Timeout, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// revisions lists the revision numbers of rs, in the order given.
func revisions(rs []charts.Release) []int {
	out := make([]int, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Revision)
	}
	return out
}

func releases(t *testing.T, b charts.Backend, name string) []charts.Release {
	t.Helper()
	rs, err := b.Releases(context.Background(), name)
	if err != nil {
		t.Fatalf("releases of %s: %v", name, err)
	}
	return rs
}

func record(t *testing.T, b charts.Backend, r charts.Release, keep int) {
	t.Helper()
	if err := b.RecordRelease(context.Background(), r, keep); err != nil {
		t.Fatalf("record %s revision %d: %v", r.Name, r.Revision, err)
	}
}

// scoped is a service's name on the swarm, as DeployRequest.Heal takes it.
func scoped(stack, service string) string { return stack + "_" + service }

func describe(states []charts.ServiceState) string {
	parts := make([]string, 0, len(states))
	for _, st := range states {
		parts = append(parts, fmt.Sprintf("%s %s %d/%d", st.Name, st.Mode, st.Running, st.Desired))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
