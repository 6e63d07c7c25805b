package bench

import (
	"os"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }
