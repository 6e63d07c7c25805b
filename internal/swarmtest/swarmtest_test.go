package swarmtest

import (
	"errors"
	"fmt"
	"testing"
)

// recorder is a testing.TB that notes how a test ended instead of ending it.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	panic(fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	panic(fmt.Sprintf(format, args...))
}

func runNeed(t *testing.T) *recorder {
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		Need(r)
	}()
	return r
}

func TestNeedSkipsWithoutASwarmAndFailsWhenTheSwarmIsRequired(t *testing.T) {
	saved, savedRan := unavailable, mainRan
	t.Cleanup(func() { unavailable, mainRan = saved, savedRan })
	mainRan, unavailable = true, errors.New("daemon does not answer")

	t.Setenv("CI", "")
	t.Setenv("FLOTILLA_REQUIRE_SWARM", "")
	if r := runNeed(t); !r.skipped || r.failed {
		t.Errorf("without a swarm and without the variable: skipped %v failed %v, want a skip", r.skipped, r.failed)
	}
	t.Setenv("FLOTILLA_REQUIRE_SWARM", "1")
	if r := runNeed(t); !r.failed || r.skipped {
		t.Errorf("with FLOTILLA_REQUIRE_SWARM=1: skipped %v failed %v, want a failure", r.skipped, r.failed)
	}
	unavailable = nil
	if r := runNeed(t); r.failed || r.skipped {
		t.Errorf("with a swarm: skipped %v failed %v, want the test to go on", r.skipped, r.failed)
	}
}
