package reconcile

import (
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

const composeHookWaves = `version: "3.8"
services:
  seed:
    image: example/api:1
    command: ["seed"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync, wave: 1}
  migrate:
    image: example/api:1
    command: ["migrate"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync}
  api:
    image: example/api:1
  notify:
    image: example/api:1
    command: ["notify"]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PostSync}
`

func hookStates(hs []application.HookStatus) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Phase+"/"+h.Name+"/"+string(h.State))
	}
	return out
}

func TestPreSyncHooksRunWaveByWaveAndEachHasAStatus(t *testing.T) {
	b, f, c := orderedApp(t, composeHookWaves)
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"migrate", "seed", "api", "notify"}) {
		t.Fatalf("deploys %v, want wave 0's hook, wave 1's hook, the services, the PostSync hook", got)
	}
	// seed was created only after a read of the stack found migrate done.
	b.mu.Lock()
	log := strings.Join(b.log, "; ")
	b.mu.Unlock()
	if !strings.Contains(log, "deploy migrate; read") || strings.Index(log, "deploy migrate") > strings.Index(log, "deploy seed") {
		t.Errorf("log %s: wave 1 was not created after wave 0 was read back", log)
	}
	want := []string{"PreSync/migrate/Succeeded", "PreSync/seed/Succeeded", "PostSync/notify/Succeeded"}
	if got := hookStates(res.Status.Hooks); !slices.Equal(got, want) {
		t.Fatalf("hooks %v, want %v", got, want)
	}
	for _, h := range res.Status.Hooks {
		if h.Revision != 1 || (h.Name == "seed") != (h.Wave == 1) || h.ExitCode == nil || *h.ExitCode != 0 {
			t.Errorf("hook %+v, want revision 1, seed in wave 1, exit code 0", h)
		}
	}
	// A restarted controller reads the same from the swarm.
	c2 := newTestController(t, b, f, c.Applications()[0])
	if res := mustReconcile(t, c2, "shop"); !slices.Equal(hookStates(res.Status.Hooks), want) {
		t.Errorf("after a restart hooks %v, want %v", hookStates(res.Status.Hooks), want)
	}
}

func TestAFailedWaveZeroHookKeepsWaveOneFromBeingCreated(t *testing.T) {
	b, f, c := orderedApp(t, composeHookWaves)
	b.fail("migrate", true)
	res := mustReconcile(t, c, "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "PreSync hook migrate failed") || !strings.Contains(res.Err.Error(), "later PreSync hook(s) seed not created") {
		t.Fatalf("pass error %v", res.Err)
	}
	if got := b.deploys(); !slices.Equal(got, []string{"migrate"}) {
		t.Fatalf("deploys %v, want only the wave-0 hook", got)
	}
	want := []string{"PreSync/migrate/Failed", "PreSync/seed/Skipped", "PostSync/notify/Skipped"}
	check := func(when string, hs []application.HookStatus) {
		t.Helper()
		if got := hookStates(hs); !slices.Equal(got, want) {
			t.Fatalf("%s: hooks %v, want %v", when, got, want)
		}
		m := hs[0]
		if m.ExitCode == nil || *m.ExitCode != 1 || m.Revision != 1 || m.FinishedAt.IsZero() || !strings.Contains(m.Message, "non-zero exit (1)") {
			t.Errorf("%s: failed hook %+v, want exit code 1, revision 1, a finish time and Swarm's reason", when, m)
		}
		if !strings.Contains(hs[1].Message, "PreSync hook migrate failed") {
			t.Errorf("%s: skipped hook says %q", when, hs[1].Message)
		}
	}
	check("the failing pass", res.Status.Hooks)
	// A retry, and a restarted controller, still create nothing of wave 1
	// and show the same states, read from the swarm.
	b.resetLog()
	check("a retry", mustReconcile(t, c, "shop").Status.Hooks)
	c2 := newTestController(t, b, f, c.Applications()[0])
	check("after a restart", mustReconcile(t, c2, "shop").Status.Hooks)
	if got := b.deploys(); len(got) != 0 {
		t.Errorf("deploys after the failure %v, want none", got)
	}
}
