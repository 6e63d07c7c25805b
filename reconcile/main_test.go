package reconcile

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/flotilla-gitops/flotilla/renderbox"
)

// Every goroutine a controller starts (batches, passes, the orphan sweep)
// must have ended when its test does. The test binary also serves as the
// render box's child process.
func TestMain(m *testing.M) {
	renderbox.Main()
	goleak.VerifyTestMain(m)
}
