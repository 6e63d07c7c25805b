package chartstest_test

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/backendtest"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// TestMinimalConformance holds the fake to the contract the moby backend
// meets (see backend/conformance_test.go). All subtests share one fake, as
// all stacks share one swarm, so stacks must stay apart and concurrent use
// is exercised under -race.
func TestMinimalConformance(t *testing.T) {
	b := chartstest.NewMinimal()
	backendtest.Run(t, func(*testing.T) charts.Backend { return b }, backendtest.Options{})
}
