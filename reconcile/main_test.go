package reconcile

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a controller starts (batches, passes, the orphan sweep)
// must have ended when its test does.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
