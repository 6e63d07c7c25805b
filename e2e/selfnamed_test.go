package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// Objects a stack names itself deploy without an allow entry, carry the
// application's owner stamp, and are swept with prune once the repository
// drops them, like the objects under the stack's prefix: the records that
// declared them by name are the proof.
func TestSelfNamedObjectsDeployAndAreSweptWhenDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Automated.Prune = true
	zero := 0
	h.app.SyncPolicy.RetainRotated = &zero
	ctx := context.Background()
	self := h.app.Stack + "-team"
	// The repository then drops api and the objects only it used (a
	// service keeps what its previous spec mounted, for a rollback).
	full := `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy: {replicas: 0}
  api:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    networks: [team]
    configs: [team_conf]
    secrets: [team_secret]
    deploy: {replicas: 0}
networks:
  team: {name: ` + self + `-net, driver: overlay}
configs:
  team_conf: {name: ` + self + `-conf, file: ./web.conf}
secrets:
  team_secret: {name: ` + self + `-secret, file: ./token.txt}
`
	bare := `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy: {replicas: 0}
`
	h.repo.Commit("self-named", sweepFiles(full, "v1\n"))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	nets, err := h.backend.LiveNetworks(ctx, h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	confs, err := h.backend.LiveConfigs(ctx, h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := h.backend.LiveSecrets(ctx, h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := nets[self+"-net"]; !ok {
		t.Fatalf("networks %v lack %s-net", names(nets), self)
	}
	if _, ok := confs[self+"-conf"]; !ok {
		t.Fatalf("configs %v lack %s-conf", names(confs), self)
	}
	if _, ok := secs[self+"-secret"]; !ok {
		t.Fatalf("secrets %v lack %s-secret", names(secs), self)
	}

	h.repo.Commit("drop them", sweepFiles(bare, "v1\n"))
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st := res.Status.Sweep
	if st == nil || st.DryRun {
		t.Fatalf("sweep status: %+v", st)
	}
	for _, want := range []string{"service " + h.app.Stack + "_api", "network " + self + "-net", "config " + self + "-conf", "secret " + self + "-secret"} {
		if !slices.Contains(st.Removed, want) {
			t.Errorf("removed %v, want %s\n%s", st.Removed, want, strings.Join(st.Messages, "\n"))
		}
	}
}
