package main

import (
	"testing"
	"time"
)

func TestControllerOptions_validate(t *testing.T) {
	good := controllerOptions{shutdownTimeout: 10 * time.Second, http: httpTimeouts{read: time.Second},
		swarmReadTimeout: time.Second, orphanSweepTimeout: time.Second, queueLimit: 1, maxPasses: 1}
	if err := good.validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	none := good
	none.http = httpTimeouts{}
	if err := none.validate(); err != nil {
		t.Fatalf("0 (no timeout) refused: %v", err)
	}
	with := func(change func(*controllerOptions)) controllerOptions {
		o := good
		change(&o)
		return o
	}
	for name, o := range map[string]controllerOptions{
		"zero shutdown timeout":     with(func(o *controllerOptions) { o.shutdownTimeout = 0 }),
		"negative shutdown timeout": with(func(o *controllerOptions) { o.shutdownTimeout = -time.Second }),
		"negative read timeout":     with(func(o *controllerOptions) { o.http.read = -1 }),
		"negative idle timeout":     with(func(o *controllerOptions) { o.http.idle = -1 }),
		"zero swarm read timeout":   with(func(o *controllerOptions) { o.swarmReadTimeout = 0 }),
		"zero orphan sweep timeout": with(func(o *controllerOptions) { o.orphanSweepTimeout = 0 }),
		"no queue":                  with(func(o *controllerOptions) { o.queueLimit = 0 }),
		"no pass may run":           with(func(o *controllerOptions) { o.maxPasses = 0 }),
		"MCP writes without MCP":    with(func(o *controllerOptions) { o.mcp.AllowWrites = true }),
	} {
		if err := o.validate(); err == nil || !isUsageError(err) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

func TestControllerFlags_shutdownAndHTTPTimeoutsHaveTheirDefaults(t *testing.T) {
	cmd := newControllerCmd()
	for flag, want := range map[string]string{
		"shutdown-timeout": "10s", "http-read-timeout": "30s", "http-write-timeout": "1m0s", "http-idle-timeout": "2m0s",
		"swarm-read-timeout": "30s", "orphan-sweep-timeout": "2m0s", "queue-limit": "16", "max-concurrent-passes": "32",
	} {
		f := cmd.Flags().Lookup(flag)
		if f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want default %s", flag, f, want)
		}
	}
}

func TestControllerOptions_validateHA(t *testing.T) {
	base := controllerOptions{shutdownTimeout: 10 * time.Second, swarmReadTimeout: time.Second, orphanSweepTimeout: time.Second,
		queueLimit: 1, maxPasses: 1, ha: true, leaseDuration: 3 * time.Second}
	t.Setenv("FLOTILLA_HA_ID", "task-7")
	o := base
	if err := o.validate(); err != nil || o.haID != "task-7" {
		t.Fatalf("--ha without --ha-id: %v, id %q; want $FLOTILLA_HA_ID", err, o.haID)
	}
	for name, change := range map[string]func(*controllerOptions){
		"with --once":         func(o *controllerOptions) { o.once = true },
		"a lease under 100ms": func(o *controllerOptions) { o.leaseDuration = 50 * time.Millisecond },
	} {
		o := base
		change(&o)
		if err := o.validate(); err == nil || !isUsageError(err) {
			t.Errorf("--ha %s: %v, want a usage error", name, err)
		}
	}
}
