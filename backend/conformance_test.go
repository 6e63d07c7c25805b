package backend

import (
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/backendtest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// TestConformance runs the charts.Backend suite on the real swarm; the same
// suite runs on chartstest.MinimalBackend, so the two agree on every
// behaviour the contract states.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) charts.Backend { return newBackend(t) }, backendtest.Options{
		Name:    func(t testing.TB) string { return swarmtest.Name(t, "conform") },
		Cleanup: swarmtest.Cleanup,
		Image:   swarmtest.Image,
		Timeout: 30 * time.Second,
	})
}
