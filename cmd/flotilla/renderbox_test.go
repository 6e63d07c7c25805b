package main

import (
	"os"
	"testing"

	"github.com/flotilla-gitops/flotilla/renderbox"
)

// TestMain lets the test binary serve as the render box's child process,
// as the flotilla binary does: a controller a test starts renders its
// charts by re-executing this binary.
func TestMain(m *testing.M) {
	renderbox.Main()
	os.Exit(m.Run())
}
