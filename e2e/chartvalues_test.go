package e2e

import (
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
)

func TestCommitInASecondValuesRepositoryUpdatesTheStack(t *testing.T) {
	t.Parallel()
	h := chartHarness(t)
	vals := gittest.New(t)
	h.app.Source.Values = &application.ValuesSource{RepoURL: vals.Dir, Revision: "main", Files: []string{"eu/prod.yaml"}}
	h.repo.Commit("chart", exampleChartFiles(t, prodValues))
	v1 := vals.Commit("eu values", map[string]string{"eu/prod.yaml": "worker:\n  queue: from-values-repo\n"})
	ctl := h.controller(false)

	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(2)
	if got := h.services()["worker"].Spec.TaskTemplate.ContainerSpec.Env; !slices.Contains(got, "QUEUE=from-values-repo") {
		t.Fatalf("worker env %v", got)
	}
	rs, err := h.backend.Releases(t.Context(), h.app.Stack)
	if err != nil || len(rs) != 1 || rs[0].Chart == nil || rs[0].Chart.ValuesCommit != v1 {
		t.Fatalf("record: %+v %v", rs, err)
	}

	stats := h.backend.Stats()
	if res = h.reconcile(ctl); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("unchanged pass: %+v", res)
	}
	if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
		t.Fatalf("unchanged pass wrote: %v", d.Requests)
	}

	// A commit only in the values repository: the worker is updated.
	before := versions(h.services())
	v2 := vals.Commit("eu queue", map[string]string{"eu/prod.yaml": "worker:\n  queue: urgent\n"})
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("values commit: %+v", res)
	}
	if !slices.Equal(res.Deployed.Updated, []string{"worker"}) || res.Deployed.Writes != 1 {
		t.Fatalf("deploy: %+v", res.Deployed)
	}
	after := versions(h.services())
	if after["web"] != before["web"] || after["worker"] == before["worker"] {
		t.Fatalf("versions %v → %v", before, after)
	}
	if got := h.services()["worker"].Spec.TaskTemplate.ContainerSpec.Env; !slices.Contains(got, "QUEUE=urgent") {
		t.Fatalf("worker env %v", got)
	}
	rs, _ = h.backend.Releases(t.Context(), h.app.Stack)
	if rs[0].Chart.ValuesCommit != v2 || rs[0].Commit != rs[1].Commit {
		t.Fatalf("revision 2: commit %s (was %s), values commit %s", rs[0].Commit, rs[1].Commit, rs[0].Chart.ValuesCommit)
	}
}
