// Package e2e holds the end-to-end tests: the controller's real parts (git
// through go-git, compose through docker/cli, the moby backend) against repositories
// the tests create on disk and the real single-node swarm.
package e2e

import (
	"os"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/renderbox"
)

// TestMain also lets the test binary serve as the render box's child
// process.
func TestMain(m *testing.M) {
	renderbox.Main()
	os.Exit(swarmtest.Main(m))
}
