package backendtest

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// Every capability of the table has a conformance check, and there is no
// check of a capability the table does not have.
func TestEveryCapabilityHasACheck(t *testing.T) {
	all := capability.All()
	for _, d := range all {
		if checks[d.Name] == nil {
			t.Errorf("no conformance check for capability %s (backendtest/capabilities.go)", d.Name)
		}
	}
	if len(checks) != len(all) {
		t.Errorf("%d checks for %d capabilities", len(checks), len(all))
	}
}

// TestMinimalConformance holds chartstest.MinimalBackend to the contract the
// moby backend meets (see backend/conformance_test.go). All subtests share
// one fake, as all stacks share one swarm, so stacks must stay apart and
// concurrent use is exercised under -race. It claims no capability, so no
// capability check runs.
func TestMinimalConformance(t *testing.T) {
	b := chartstest.NewMinimal()
	Run(t, func(*testing.T) charts.Backend { return b }, Options{})
}
