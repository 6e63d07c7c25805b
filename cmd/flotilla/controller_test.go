package main

import "testing"

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
