// Package e2e holds the end-to-end tests: the controller's real parts (git
// through go-git, compose through docker/cli, the moby backend) against repositories
// the tests create on disk and the real single-node swarm.
package e2e

import (
	"os"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }
