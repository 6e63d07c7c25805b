package reconcile

import (
	"sync/atomic"
	"testing"

	"github.com/flotilla-gitops/flotilla/backendtest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// Every fake of these tests that claims a capability runs the conformance
// check of each one it claims (its charts.Backend contract is
// MinimalBackend's, held to the suite in backendtest), so no test here
// relies on a capability behaving as the real backend's does not.
//
// Left out, because lying is what they are for: racingBackend reports a
// lost compare-and-swap on every deploy, networkedFake names only the
// networks a test tells it exist, and gatedReadFake and sweepGateFake hold
// their reads until a test's step has happened.
func TestFakesConform(t *testing.T) {
	removals := 0
	fakes := map[string]func() charts.Backend{
		"liveDriftFake":   func() charts.Backend { return newLiveDriftFake() },
		"batchFake":       func() charts.Backend { return &batchFake{liveDriftFake: newLiveDriftFake()} },
		"sharedFake":      func() charts.Backend { return &sharedFake{batchFake: &batchFake{liveDriftFake: newLiveDriftFake()}} },
		"versionedFake":   func() charts.Backend { return &versionedFake{batchFake: &batchFake{liveDriftFake: newLiveDriftFake()}} },
		"idAttachingFake": func() charts.Backend { return &idAttachingFake{liveDriftFake: newLiveDriftFake()} },
		"slowReadFake": func() charts.Backend {
			return &slowReadFake{liveDriftFake: newLiveDriftFake(), fetches: new(atomic.Int32)}
		},
		"swarmFake":            func() charts.Backend { return newSwarmFake() },
		"troubledSwarm":        func() charts.Backend { return newTroubledSwarm() },
		"countingStacksReader": func() charts.Backend { return &countingStacksReader{MinimalBackend: chartstest.NewMinimal()} },
		"releaseListing":       func() charts.Backend { return releaseListing{chartstest.NewMinimal(), &removals} },
		"headBackend":          func() charts.Backend { return &headBackend{MinimalBackend: chartstest.NewMinimal()} },
		"loggingOrderBackend":  func() charts.Backend { return &loggingOrderBackend{orderBackend: newOrderBackend()} },
	}
	for name, newFake := range fakes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newFake()
			backendtest.RunCapabilities(t, func(*testing.T) charts.Backend { return b }, backendtest.Options{})
		})
	}
}
