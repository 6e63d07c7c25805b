package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// recordConfigs returns the stack's release record configs by revision label.
func (h *harness) recordConfigs() map[string]swarm.Config {
	h.t.Helper()
	list, err := swarmtest.Client(h.t).ConfigList(context.Background(), client.ConfigListOptions{Filters: make(client.Filters).Add("label", backend.LabelRecord+"=release").Add("label", backend.LabelRelease+"="+h.app.Stack)})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]swarm.Config{}
	for _, c := range list.Items {
		out[c.Spec.Labels[backend.LabelRevision]] = c
	}
	return out
}

func (h *harness) revisions() []int {
	h.t.Helper()
	rs, err := h.backend.Releases(context.Background(), h.app.Stack)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []int
	for _, r := range rs {
		out = append(out, r.Revision)
	}
	return out
}

func TestAReleaseRecordDeletedByHandIsNoticedOnTheNextPass(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("v1", files(stackFile))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 1 {
		t.Fatalf("v1: %+v", res)
	}
	v2 := files(stackFile)
	v2["deploy/.env"] = "GREETING=again\n"
	h.repo.Commit("v2", v2)
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 2 {
		t.Fatalf("v2: %+v", res)
	}

	rec, ok := h.recordConfigs()["2"]
	if !ok {
		t.Fatal("no config holds revision 2")
	}
	if _, err := swarmtest.Client(t).ConfigRemove(context.Background(), rec.ID, client.ConfigRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same controller, whose memory still holds revision 2: it plans
	// against revision 1, the swarm's newest, and records 2 again.
	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade || res.Revision != 2 {
		t.Fatalf("pass after record 2 was deleted: action %s revision %d err %v", res.Action, res.Revision, res.Err)
	}
	if res.Deployed == nil || res.Deployed.Writes != 0 {
		t.Fatalf("the stack already runs revision 2's manifest, yet the redeploy wrote: %+v", res.Deployed)
	}
	if got := h.revisions(); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("records %v, want [2 1]", got)
	}
}

func TestARecordWrittenByASecondControllerIsPlannedAgainstNotRecordedTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("v1", files(stackFile))
	first, second := h.controller(false), h.controller(true)
	if res := h.reconcile(first); res.Err != nil || res.Revision != 1 {
		t.Fatalf("v1: %+v", res)
	}
	if res := h.reconcile(second); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("second controller on v1: %+v", res)
	}

	v2 := files(stackFile)
	v2["deploy/.env"] = "GREETING=again\n"
	h.repo.Commit("v2", v2)
	if res := h.reconcile(first); res.Err != nil || res.Revision != 2 {
		t.Fatalf("first controller on v2: %+v", res)
	}
	// The second controller last read revision 1; it finds 2 on the swarm.
	res := h.reconcile(second)
	if res.Err != nil || res.Action != charts.Unchanged || res.Status.Sync != application.Synced {
		t.Fatalf("second controller on v2: action %s sync %s err %v", res.Action, res.Status.Sync, res.Err)
	}
	if got := h.revisions(); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("records %v, want [2 1]", got)
	}
}

func TestARecordNumberTakenMeanwhileIsAConflictNotAnOverwrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("v1", files(stackFile))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 1 {
		t.Fatalf("v1: %+v", res)
	}
	// Another writer holds the name of revision 2 in a config no history
	// listing sees, so only the daemon's refusal of the name stops this
	// controller.
	c := swarmtest.Client(t)
	taken, err := c.ConfigCreate(context.Background(), client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: "flotilla-release." + h.app.Stack + ".2"},
		Data:        []byte("theirs"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.ConfigRemove(context.Background(), taken.ID, client.ConfigRemoveOptions{}) })

	v2 := files(stackFile)
	v2["deploy/.env"] = "GREETING=again\n"
	h.repo.Commit("v2", v2)
	res := h.reconcile(ctl)
	if res.Err == nil || !strings.Contains(res.Err.Error(), charts.ErrRecordExists.Error()) {
		t.Fatalf("pass whose revision number is taken: %v", res.Err)
	}
	if res.Status.Sync == application.Synced {
		t.Fatal("a pass that could not record its revision reports Synced")
	}
	cfg, err := c.ConfigInspect(context.Background(), taken.ID, client.ConfigInspectOptions{})
	if err != nil || string(cfg.Config.Spec.Data) != "theirs" {
		t.Fatalf("the other writer's config: %q, %v", cfg.Config.Spec.Data, err)
	}
	if got := h.revisions(); !slices.Equal(got, []int{1}) {
		t.Fatalf("records %v, want [1]", got)
	}
}
