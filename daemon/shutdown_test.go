package daemon

import (
	"errors"
	"testing"
	"time"
)

// isUsageError reports whether the command would exit with its status
// for bad flags.
func isUsageError(err error) bool {
	var u UsageError
	return errors.As(err, &u)
}

func TestControllerOptions_validate(t *testing.T) {
	good := Options{ShutdownTimeout: 10 * time.Second, HTTP: HTTPTimeouts{Read: time.Second},
		SwarmReadTimeout: time.Second, OrphanSweepTimeout: time.Second, QueueLimit: 1, MaxPasses: 1}
	if err := good.validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	none := good
	none.HTTP = HTTPTimeouts{}
	if err := none.validate(); err != nil {
		t.Fatalf("0 (no timeout) refused: %v", err)
	}
	with := func(change func(*Options)) Options {
		o := good
		change(&o)
		return o
	}
	for name, o := range map[string]Options{
		"zero shutdown timeout":     with(func(o *Options) { o.ShutdownTimeout = 0 }),
		"negative shutdown timeout": with(func(o *Options) { o.ShutdownTimeout = -time.Second }),
		"negative read timeout":     with(func(o *Options) { o.HTTP.Read = -1 }),
		"negative idle timeout":     with(func(o *Options) { o.HTTP.Idle = -1 }),
		"zero swarm read timeout":   with(func(o *Options) { o.SwarmReadTimeout = 0 }),
		"zero orphan sweep timeout": with(func(o *Options) { o.OrphanSweepTimeout = 0 }),
		"no queue":                  with(func(o *Options) { o.QueueLimit = 0 }),
		"no pass may run":           with(func(o *Options) { o.MaxPasses = 0 }),
		"MCP writes without MCP":    with(func(o *Options) { o.MCP.AllowWrites = true }),
	} {
		if err := o.validate(); err == nil || !isUsageError(err) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

func TestControllerOptions_validateHA(t *testing.T) {
	base := Options{ShutdownTimeout: 10 * time.Second, SwarmReadTimeout: time.Second, OrphanSweepTimeout: time.Second,
		QueueLimit: 1, MaxPasses: 1, HA: true, LeaseDuration: 3 * time.Second}
	t.Setenv("FLOTILLA_HA_ID", "task-7")
	o := base
	if err := o.validate(); err != nil || o.HAID != "task-7" {
		t.Fatalf("--ha without --ha-id: %v, id %q; want $FLOTILLA_HA_ID", err, o.HAID)
	}
	for name, change := range map[string]func(*Options){
		"with --once":         func(o *Options) { o.Once = true },
		"a lease under 100ms": func(o *Options) { o.LeaseDuration = 50 * time.Millisecond },
	} {
		o := base
		change(&o)
		if err := o.validate(); err == nil || !isUsageError(err) {
			t.Errorf("--ha %s: %v, want a usage error", name, err)
		}
	}
}
