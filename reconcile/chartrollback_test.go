package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// A rollback of a chart application whose record holds sealed values
// deploys that revision's exact values, which the controller knows from
// its own renders or from a render of the chart as declared now, or
// refuses, naming the revision.

// chartRollbackSetup deploys "shop" from sealedChart(token1, tok, "1") as
// revision 1 and from second as revision 2, on a backend that keeps its
// deploy requests. It returns the controller that deployed both, a
// function that starts another (a restart: same swarm, repository and age
// key), the backend and the repository.
func chartRollbackSetup(t *testing.T, token1, tok string, second func(recipient string) map[string]string) (*Controller, func() *Controller, *recordingBackend, *fakeFetcher) {
	t.Helper()
	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	b := &recordingBackend{MinimalBackend: chartstest.NewMinimal()}
	f := newFakeFetcher()
	f.commit(t, sealedChart(t, token1, tok, "1", id.Recipient))
	app := testApp("shop", true)
	app.Source.Path = "chart"
	app.Source.Chart = &application.Chart{}
	start := func() *Controller {
		t.Helper()
		c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, SOPS: ids}, []application.Application{app})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: revision %d, %v", res.Revision, res.Err)
	}
	f.commit(t, second(id.Recipient))
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("second commit: revision %d, %v", res.Revision, res.Err)
	}
	return c, start, b, f
}

// rollbackNow runs a rollback pass of "shop" to revision.
func rollbackNow(t *testing.T, c *Controller, revision int) Result {
	t.Helper()
	res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: revision, By: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// assertNoPlaintext fails when a release record holds one of values.
func assertNoPlaintext(t *testing.T, b *recordingBackend, values ...string) {
	t.Helper()
	rs, err := b.Releases(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		for _, v := range values {
			if strings.Contains(r.Manifest, v) || strings.Contains(r.Desired, v) {
				t.Fatalf("release %d holds a decrypted value", r.Revision)
			}
		}
	}
}

func TestRollbackOfAChartDeploysTheSealedValueItsControllerRendered(t *testing.T) {
	const token1, token2, tok = "chart-rb-old-7e21", "chart-rb-new-7e21", "chart-rb-file-7e21"
	c, _, b, _ := chartRollbackSetup(t, token1, tok, func(r string) map[string]string { return sealedChart(t, token2, tok, "1", r) })
	if env := deployedEnv(t, "shop", b.last(t)); !slices.Contains(env, "API_TOKEN="+token2) {
		t.Fatalf("revision 2 deployed env %q", env)
	}
	if res := rollbackNow(t, c, 1); res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: revision %d, %v", res.Revision, res.Err)
	}
	if env := deployedEnv(t, "shop", b.last(t)); !slices.Contains(env, "API_TOKEN="+token1) {
		t.Fatalf("rollback deployed env %q, want revision 1's token", env)
	}
	assertNoPlaintext(t, b, token1, token2)
	// The pinned record is used by the next pass, which needs its values
	// too and finds nothing to do.
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("pinned pass: %s, %v", res.Action, res.Err)
	}
}

func TestRollbackOfAChartRefusesASealedValueARestartedControllerCannotReproduce(t *testing.T) {
	const token1, token2, tok = "chart-rb-old-90ad", "chart-rb-new-90ad", "chart-rb-file-90ad"
	_, restart, b, _ := chartRollbackSetup(t, token1, tok, func(r string) map[string]string { return sealedChart(t, token2, tok, "1", r) })
	writes := b.Writes()
	res := rollbackNow(t, restart(), 1)
	if res.Err == nil || KindOf(res.Err) != Stalled {
		t.Fatalf("rollback: revision %d, %v; want a stalled refusal", res.Revision, res.Err)
	}
	for _, want := range []string{"revision 1 ", "environment variable API_TOKEN of service web", "cannot be redeployed with its exact values"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q does not say %q", res.Err, want)
		}
	}
	if strings.Contains(res.Err.Error(), token1) || strings.Contains(res.Err.Error(), token2) {
		t.Fatalf("the error holds a value: %v", res.Err)
	}
	if b.Writes() != writes {
		t.Errorf("a refused rollback wrote %d times", b.Writes()-writes)
	}
}

func TestRollbackOfAChartWhoseSealedValueDidNotChangeWorksAfterARestart(t *testing.T) {
	const token, tok = "chart-rb-same-3c5b", "chart-rb-file-3c5b"
	_, restart, b, _ := chartRollbackSetup(t, token, tok, func(r string) map[string]string { return sealedChart(t, token, tok, "2", r) })
	if res := rollbackNow(t, restart(), 1); res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback: revision %d, %v", res.Revision, res.Err)
	}
	req := b.last(t)
	if env := deployedEnv(t, "shop", req); !slices.Contains(env, "API_TOKEN="+token) {
		t.Fatalf("rollback deployed env %q", env)
	}
	if !strings.Contains(req.Manifest, "example/web:1") {
		t.Fatalf("rollback deployed another revision:\n%s", req.Manifest)
	}
	assertNoPlaintext(t, b, token)
}

// With the chart's source unreachable nothing can be rendered now: the
// values this controller rendered still serve, and a restarted controller
// refuses, saying the source could not be fetched.
func TestRollbackOfAChartWithItsSourceUnreachableNeedsTheSealedValuesRemembered(t *testing.T) {
	const token1, token2, tok = "chart-rb-old-d04e", "chart-rb-new-d04e", "chart-rb-file-d04e"
	c, restart, b, f := chartRollbackSetup(t, token1, tok, func(r string) map[string]string { return sealedChart(t, token2, tok, "1", r) })
	f.mu.Lock()
	f.err = errors.New("dial tcp: connection refused")
	f.mu.Unlock()

	writes := b.Writes()
	res := rollbackNow(t, restart(), 1)
	if res.Err == nil || KindOf(res.Err) != Stalled || !strings.Contains(res.Err.Error(), "revision 1 ") ||
		!strings.Contains(res.Err.Error(), "source could not be fetched") {
		t.Fatalf("restarted rollback with the source down: %v; want a stalled refusal", res.Err)
	}
	if b.Writes() != writes {
		t.Errorf("a refused rollback wrote %d times", b.Writes()-writes)
	}

	if res := rollbackNow(t, c, 1); res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback with the source down: revision %d, %v", res.Revision, res.Err)
	}
	if env := deployedEnv(t, "shop", b.last(t)); !slices.Contains(env, "API_TOKEN="+token1) {
		t.Fatalf("rollback deployed env %q, want revision 1's token", env)
	}
}
