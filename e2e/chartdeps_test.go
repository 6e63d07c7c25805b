package e2e

import (
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

// siteChartFiles is the chart-site example's chart at deploy/, with its
// EU values file replaced by euValues.
func siteChartFiles(t *testing.T, euValues string) map[string]string {
	t.Helper()
	out := map[string]string{}
	src := os.DirFS("../examples/chart-site/site")
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		out[path.Join("deploy", p)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out["deploy/values-eu.yaml"] = euValues
	return out
}

func TestChartWithASubchartDeploysBothAndASubchartValueUpdatesOnlyIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.Source.Compose = application.Compose{}
	h.app.Source.Chart = &application.Chart{ValueFiles: []string{"values-eu.yaml"}}
	eu := "web:\n  message: hallo\ncache:\n  maxMemory: 64mb\nglobal:\n  region: eu\n"
	h.repo.Commit("site", siteChartFiles(t, eu))
	ctl := h.controller(false)

	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Install {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(2)
	svcs := h.services()
	if got := strings.Join(svcs["cache"].Spec.TaskTemplate.ContainerSpec.Env, ","); got != "MAX_MEMORY=64mb,REGION=eu" {
		t.Fatalf("cache env %q", got)
	}
	if got := svcs["web"].Spec.TaskTemplate.ContainerSpec.Env; !slices.Contains(got, "CACHE_ADDR=cache:6379") {
		t.Fatalf("web env %v", got)
	}
	if n := len(svcs["cache"].Spec.TaskTemplate.ContainerSpec.Configs); n != 1 {
		t.Fatalf("cache has %d configs", n)
	}

	// A value only the subchart reads: one write, to the cache.
	before := versions(h.services())
	h.repo.Commit("cache memory", siteChartFiles(t, strings.Replace(eu, "64mb", "128mb", 1)))
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade || !slices.Equal(res.Deployed.Updated, []string{"cache"}) || res.Deployed.Writes != 1 {
		t.Fatalf("subchart value: %+v %+v", res, res.Deployed)
	}
	after := versions(h.services())
	if after["web"] != before["web"] || after["cache"] == before["cache"] {
		t.Fatalf("versions %v → %v", before, after)
	}
	stats := h.backend.Stats()
	if res = h.reconcile(ctl); res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("unchanged: %+v", res)
	}
	if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
		t.Fatalf("unchanged pass wrote %v", d.Requests)
	}
}
