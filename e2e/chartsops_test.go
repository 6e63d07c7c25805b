package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// sealedChartFiles is the example chart whose web service also takes
// API_TOKEN from a SOPS-encrypted env file of the chart.
func sealedChartFiles(t *testing.T, token, recipient string) map[string]string {
	t.Helper()
	files := exampleChartFiles(t, prodValues)
	web := files["deploy/templates/web.yaml"]
	files["deploy/templates/web.yaml"] = strings.Replace(web, "    networks: [back]\n", "    env_file: ./files/web.env\n    networks: [back]\n", 1)
	files["deploy/files/web.env"] = string(sopsagetest.Encrypt(t, "web.env", []byte("API_TOKEN="+token+"\n"), recipient))
	return files
}

// rollbackBy runs ctl until it has served a rollback of h's application
// to revision.
func rollbackBy(t *testing.T, h *harness, ctl *reconcile.Controller, revision int) reconcile.Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ch, err := ctl.Rollback(h.app.Name, revision, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		return res
	case <-time.After(90 * time.Second):
		t.Fatal("rollback not served")
	}
	return reconcile.Result{}
}

func TestRollbackOfAChartWithASopsValueRedeploysItsExactValueOrRefuses(t *testing.T) {
	t.Parallel()
	const token1, token2 = "e2e-chart-token-1-58c3", "e2e-chart-token-2-58c3"
	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	h := chartHarness(t)
	h.repo.Commit("token 1", sealedChartFiles(t, token1, id.Recipient))
	ctl := h.sopsController(ids)
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(2)
	h.repo.Commit("token 2", sealedChartFiles(t, token2, id.Recipient))
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	webEnv := func() []string { return h.services()["web"].Spec.TaskTemplate.ContainerSpec.Env }
	if env := webEnv(); !slices.Contains(env, "API_TOKEN="+token2) {
		t.Fatalf("revision 2's web env %q", env)
	}

	// A restarted controller has not rendered token 1: refused, nothing
	// written.
	before := webEnv()
	res := rollbackBy(t, h, h.sopsController(ids), 1)
	if res.Err == nil || reconcile.KindOf(res.Err) != reconcile.Stalled || !strings.Contains(res.Err.Error(), "revision 1 ") ||
		strings.Contains(res.Err.Error(), token1) {
		t.Fatalf("restarted rollback: %+v; want a stalled refusal naming revision 1", res)
	}
	if env := webEnv(); !slices.Equal(env, before) {
		t.Fatalf("a refused rollback changed the web env to %q", env)
	}

	// The controller that rendered it redeploys it exactly.
	if res := rollbackBy(t, h, ctl, 1); res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: %+v", res)
	}
	if env := webEnv(); !slices.Contains(env, "API_TOKEN="+token1) {
		t.Fatalf("after the rollback the web env is %q", env)
	}
	rs, err := h.backend.Releases(t.Context(), h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if strings.Contains(r.Manifest, token1) || strings.Contains(r.Manifest, token2) {
			t.Fatalf("release %d holds a decrypted value", r.Revision)
		}
	}
}
