package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// runCanaryToCompletion drives the rollout started by the last commit
// through canaryCompose's two steps until it is Completed.
func runCanaryToCompletion(t *testing.T, b charts.Backend, c *Controller, clk *testClock) {
	t.Helper()
	for range 20 {
		if st, _, _, _ := rolloutState(t, b); st.Phase == rollout.Completed {
			return
		}
		clk.add(31 * time.Second)
		reconcileOK(t, c)
	}
	st, _, _, _ := rolloutState(t, b)
	t.Fatalf("the rollout did not complete: %+v", st)
}

// A rollback is released like a commit: the version rolled back to goes
// out as the canary, step by step, while the stable service keeps running
// what it ran; the passes after it, pinned to the rollback, go on with
// the steps, and every record they write is still that rollback.
func TestARollbackGoesThroughTheRolloutsSteps(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c) // revision 1: web:1
	first, err := b.Releases(context.Background(), "shop")
	if err != nil || len(first) != 1 {
		t.Fatalf("records after the first deploy: %v %+v", err, first)
	}
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	runCanaryToCompletion(t, b, c, clk)
	if _, web, _, _ := rolloutState(t, b); web != "example/web:2" {
		t.Fatalf("after the rollout web runs %s, want web:2", web)
	}
	rs, err := b.Releases(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Desired == "" || !strings.Contains(rs[0].Desired, "example/web:2") || strings.Contains(rs[0].Desired, "web-canary") {
		t.Fatalf("the newest record keeps no Desired manifest as the source declared it:\n%s", rs[0].Desired)
	}

	res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: 1, By: "test"})
	if err != nil || res.Err != nil {
		t.Fatalf("rollback: %v %v", err, res.Err)
	}
	st, web, canary, n := rolloutState(t, b)
	if st.Phase != rollout.Progressing || st.Step != 0 || st.Weight != 0 || web != "example/web:2" || canary != "example/web:1" || n != 1 {
		t.Fatalf("after the rollback's pass: state %+v web %s canary %s at %d; want web:2 stable, web:1 as the canary at step 0", st, web, canary, n)
	}
	if res.Status.Pinned == "" {
		t.Fatal("the rollback does not pin the application")
	}

	// The automated passes hold the pin and take the rollback's steps.
	clk.add(5 * time.Second)
	reconcileOK(t, c)
	if st, web, _, _ := rolloutState(t, b); st.Weight != 25 || web != "example/web:2" {
		t.Fatalf("once the canary is ready: state %+v web %s, want 25%% on web:1 with web:2 stable", st, web)
	}
	runCanaryToCompletion(t, b, c, clk)
	st, web, _, n = rolloutState(t, b)
	if web != "example/web:1" || n != 0 {
		t.Fatalf("after the rollback's rollout: state %+v web %s canary at %d; want web:1, no canary", st, web, n)
	}
	res = reconcileOK(t, c)
	if res.Status.Pinned == "" || res.Action != charts.Unchanged {
		t.Fatalf("after the rollback completed: pinned %q action %s, want still pinned and nothing written", res.Status.Pinned, res.Action)
	}
	rs, err = b.Releases(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	var rollbackRecords int
	for _, r := range rs {
		if !strings.HasPrefix(r.Trigger, "rollback to revision 1") {
			break
		}
		rollbackRecords++
		if r.PinnedCommit == "" || r.PinnedCommit == first[0].Commit || r.Commit != first[0].Commit {
			t.Errorf("revision %d of the rollback: pinned %q commit %q, want pinned to the head and revision 1's commit %q", r.Revision, r.PinnedCommit, r.Commit, first[0].Commit)
		}
	}
	if rollbackRecords < 3 {
		t.Fatalf("%d records of the rollback, want one per step it took (at least 3): %+v", rollbackRecords, triggers(rs))
	}

	// A new commit ends the pin: it is rolled out like any other.
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("3")})
	res = reconcileOK(t, c)
	if st, web, canary, _ := rolloutState(t, b); res.Status.Pinned != "" || web != "example/web:1" || canary != "example/web:3" || st.Step != 0 {
		t.Fatalf("a commit after the rollback: pinned %q state %+v web %s canary %s", res.Status.Pinned, st, web, canary)
	}
}

func triggers(rs []charts.Release) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Trigger)
	}
	return out
}

// A record written before records kept their Desired manifest holds a
// rollout's colours and not what they were made from: a rollback to it
// deploys it as it is, as before, rather than refuse it.
func TestARollbackToARecordWithoutItsDesiredManifestDeploysItAsItIs(t *testing.T) {
	b, f, c, clk := canaryOnMinimal(t)
	reconcileOK(t, c)
	f.commit(t, map[string]string{"docker-compose.yml": canaryCompose("2")})
	reconcileOK(t, c)
	clk.add(5 * time.Second)
	reconcileOK(t, c) // 25% on web:2
	rs, err := b.Releases(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	old := rs[0]
	if !strings.Contains(old.Manifest, "web-canary") || old.Desired == "" {
		t.Fatalf("the newest record is not a rollout's step:\n%s", old.Manifest)
	}
	old.Revision, old.Desired = rs[0].Revision+1, ""
	if err := b.RecordRelease(context.Background(), old, 0); err != nil {
		t.Fatal(err)
	}
	runCanaryToCompletion(t, b, c, clk)

	res, err := c.reconcileNow(context.Background(), "shop", &SyncRequest{Rollback: old.Revision, By: "test"})
	if err != nil || res.Err != nil {
		t.Fatalf("rollback to a record without Desired: %v %v", err, res.Err)
	}
	if st, web, canary, _ := rolloutState(t, b); web != "example/web:1" || canary != "example/web:2" || st.Weight != 25 {
		t.Fatalf("after the rollback: state %+v web %s canary %s, want the record as it was (web:1, 25%% on web:2)", st, web, canary)
	}
}
