package main

import (
	"testing"
	"time"
)

func TestControllerOptions_validate(t *testing.T) {
	good := controllerOptions{shutdownTimeout: 10 * time.Second, http: httpTimeouts{read: time.Second}}
	if err := good.validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	none := good
	none.http = httpTimeouts{}
	if err := none.validate(); err != nil {
		t.Fatalf("0 (no timeout) refused: %v", err)
	}
	for name, o := range map[string]controllerOptions{
		"zero shutdown timeout":     {shutdownTimeout: 0},
		"negative shutdown timeout": {shutdownTimeout: -time.Second},
		"negative read timeout":     {shutdownTimeout: time.Second, http: httpTimeouts{read: -1}},
		"negative idle timeout":     {shutdownTimeout: time.Second, http: httpTimeouts{idle: -1}},
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
	} {
		f := cmd.Flags().Lookup(flag)
		if f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want default %s", flag, f, want)
		}
	}
}
