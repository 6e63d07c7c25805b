package bench

import (
	"testing"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/backendtest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// liveBackend stands in for the swarm in the benchmarks, so it is held to
// the conformance checks of the capabilities it claims.
func TestLiveBackendConforms(t *testing.T) {
	b := &liveBackend{MinimalBackend: chartstest.NewMinimal(), live: map[string]map[string]swarm.Service{}}
	backendtest.RunCapabilities(t, func(*testing.T) charts.Backend { return b }, backendtest.Options{})
}
