package e2e

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// exampleChartFiles is the worked example chart, placed at deploy/ in the
// test's repository, with a production values file beside it.
func exampleChartFiles(t *testing.T, prodValues string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(os.DirFS("../examples/chart"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(os.DirFS("../examples/chart"), p)
		out[path.Join("deploy", p)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out["deploy/values-prod.yaml"] = prodValues
	return out
}

const prodValues = "web:\n  message: from-prod\nworker:\n  queue: jobs-prod\n"

// chartHarness is an automated application deploying the example chart
// with values-prod.yaml and one inline value.
func chartHarness(t *testing.T) *harness {
	h := newHarness(t, true)
	h.app.Source.Compose = application.Compose{}
	h.app.Source.Chart = &application.Chart{
		ValueFiles: []string{"values-prod.yaml"},
		Values:     application.Values{"env": map[string]any{"REGION": "eu"}},
	}
	return h
}

// runningChart is chartHarness with the example chart deployed and its two
// services running, with the controller that deployed it and the files of
// the commit, for a test to change.
func runningChart(t *testing.T) (*harness, *reconcile.Controller, map[string]string) {
	t.Helper()
	h := chartHarness(t)
	good := exampleChartFiles(t, prodValues)
	h.repo.Commit("chart", good)
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(2)
	return h, ctl, good
}

func TestChartFromGitDeploysAndUpdatesOnlyTheServiceAValueReaches(t *testing.T) {
	t.Parallel()
	h := chartHarness(t)
	h.repo.Commit("chart", exampleChartFiles(t, prodValues))
	ctl := h.controller(false)

	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Install || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(2)
	svcs := h.services()
	env := strings.Join(svcs["web"].Spec.TaskTemplate.ContainerSpec.Env, ",")
	if env != "APP_MESSAGE=from-prod,REGION=eu" {
		t.Fatalf("web env %q", env)
	}
	if got := svcs["worker"].Spec.TaskTemplate.ContainerSpec.Env; !slices.Contains(got, "QUEUE=jobs-prod") {
		t.Fatalf("worker env %v", got)
	}
	rs, err := h.backend.Releases(t.Context(), h.app.Stack)
	if err != nil || len(rs) != 1 || rs[0].Chart == nil || rs[0].Chart.Name != "shop" || rs[0].Chart.Version != "0.1.0" {
		t.Fatalf("record: %+v %v", rs, err)
	}

	// Unchanged: nothing is written.
	before, stats := versions(h.services()), h.backend.Stats()
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("unchanged pass: %+v", res)
	}
	if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
		t.Fatalf("unchanged pass wrote: %v", d.Requests)
	}
	if !maps.Equal(before, versions(h.services())) {
		t.Fatal("versions moved on an unchanged pass")
	}

	// A value only the worker uses: one service write, the web untouched.
	h.repo.Commit("worker queue", exampleChartFiles(t, strings.Replace(prodValues, "jobs-prod", "urgent", 1)))
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade {
		t.Fatalf("value change: %+v", res)
	}
	if !slices.Equal(res.Deployed.Updated, []string{"worker"}) || res.Deployed.Writes != 1 {
		t.Fatalf("deploy: %+v", res.Deployed)
	}
	after := versions(h.services())
	if after["web"] != before["web"] || after["worker"] == before["worker"] {
		t.Fatalf("versions %v → %v", before, after)
	}
	rs, _ = h.backend.Releases(t.Context(), h.app.Stack)
	if rs[0].Chart.ValuesDigest == rs[1].Chart.ValuesDigest {
		t.Fatal("values digest did not follow the values")
	}
}

func TestBrokenChartGivesItsErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	h, ctl, good := runningChart(t)
	running := versions(h.services())

	for _, b := range []struct {
		name  string
		edit  map[string]string
		wants []string
	}{
		{"template error", map[string]string{"deploy/templates/worker.yaml": "services:\n  worker:\n    image: {{ .Values.image.tag | nosuchfunc }}\n"},
			[]string{"deploy/templates/worker.yaml:3", "chart shop", "nosuchfunc"}},
		{"schema violation", map[string]string{"deploy/values-prod.yaml": prodValues + "  replicas: 99\n"},
			[]string{"deploy/values.schema.json", "worker.replicas", `"maximum"`}},
		{"missing required value", map[string]string{"deploy/values-prod.yaml": "worker:\n  queue: null\n"},
			[]string{"deploy/templates/worker.yaml:6", "worker.queue is required"}},
		{"output not a compose document", map[string]string{"deploy/templates/worker.yaml": "- not\n- a mapping\n"},
			[]string{"deploy/templates/worker.yaml", "the output is a list, not a compose mapping"}},
		{"file escaping the chart", map[string]string{"deploy/templates/worker.yaml": "configs:\n  stolen:\n    file: ../values-prod.yaml\n"},
			[]string{"deploy/templates/worker.yaml", "configs.stolen.file", "path leaves the repository checkout"}},
		{"symlink in the chart", map[string]string{"deploy/files/link.conf": "symlink:../values-prod.yaml"},
			[]string{"deploy/files/link.conf", "symlinks are not allowed in a chart"}},
	} {
		files := maps.Clone(good)
		for name, content := range b.edit {
			if target, ok := strings.CutPrefix(content, "symlink:"); ok {
				if err := os.Symlink(target, filepath.Join(h.repo.Dir, filepath.FromSlash(name))); err != nil {
					t.Fatal(err)
				}
				continue
			}
			files[name] = content
		}
		h.repo.Commit(b.name, files)
		stats := h.backend.Stats()
		res := h.reconcile(ctl)
		if res.Err == nil {
			t.Fatalf("%s: pass succeeded", b.name)
		}
		for _, w := range append(b.wants, `application "`+h.app.Name+`"`) {
			if !strings.Contains(res.Status.LastError, w) {
				t.Errorf("%s: error %q lacks %q", b.name, res.Status.LastError, w)
			}
		}
		if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
			t.Fatalf("%s: wrote %v", b.name, d.Requests)
		}
		if !maps.Equal(running, versions(h.services())) {
			t.Fatalf("%s: running services changed", b.name)
		}
	}
}

func TestRollbackToAnOlderChartVersionInGitRedeploysItWithGitGone(t *testing.T) {
	t.Parallel()
	h := chartHarness(t)
	h.repo.Commit("chart 0.1.0", exampleChartFiles(t, prodValues))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(2)
	newer := exampleChartFiles(t, strings.Replace(prodValues, "jobs-prod", "jobs-0.2", 1))
	newer["deploy/Chart.yaml"] = strings.Replace(newer["deploy/Chart.yaml"], "version: 0.1.0", "version: 0.2.0", 1)
	h.repo.Commit("chart 0.2.0", newer)
	if res := h.reconcile(ctl); res.Err != nil || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	queue := func() string {
		for _, e := range h.services()["worker"].Spec.TaskTemplate.ContainerSpec.Env {
			if q, ok := strings.CutPrefix(e, "QUEUE="); ok {
				return q
			}
		}
		return ""
	}
	if q := queue(); q != "jobs-0.2" {
		t.Fatalf("worker queue %q", q)
	}

	// The git repository goes away; the rollback needs only the records.
	gone := h.repo.Dir + ".gone"
	if err := os.Rename(h.repo.Dir, gone); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(gone, h.repo.Dir) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ch, err := ctl.Rollback(h.app.Name, 1, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	var res reconcile.Result
	select {
	case res = <-ch:
	case <-time.After(60 * time.Second):
		t.Fatal("rollback not served")
	}
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback with git gone: %+v", res)
	}
	if q := queue(); q != "jobs-prod" {
		t.Fatalf("after rollback the worker queue is %q", q)
	}
	rs, _ := h.backend.Releases(t.Context(), h.app.Stack)
	if rs[0].Manifest != rs[2].Manifest || rs[0].Chart == nil || rs[0].Chart.Version != "0.1.0" || rs[0].Chart.ValuesDigest != rs[2].Chart.ValuesDigest {
		t.Fatalf("revision 3 is not revision 1: %+v %+v", rs[0], rs[0].Chart)
	}
}
