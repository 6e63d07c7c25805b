package api_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Handlers, streams and the request forwarding behind them must not outlive
// the tests that started them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
