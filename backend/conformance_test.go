package backend

import (
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/backendtest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// TestConformance runs the conformance suite on the real swarm: the
// charts.Backend contract and the check of every capability the Backend
// implements. The same suite runs on chartstest.MinimalBackend and on the
// fakes that claim capabilities, so they agree on every behaviour the
// contract and the capabilities state.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) charts.Backend { return newBackend(t) }, backendtest.Options{
		Name:    func(t testing.TB) string { return swarmtest.Name(t, "conform") },
		Cleanup: swarmtest.Cleanup,
		Image:   swarmtest.Image,
		Timeout: 30 * time.Second,
	})
}
