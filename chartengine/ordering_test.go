package chartengine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/compose"
)

func TestAChartsOutputKeepsItsServicesWaves(t *testing.T) {
	root := copyExample(t, nil)
	p := filepath.Join(root, "chart", "templates", "worker.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    x-flotilla: {wave: 1}\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := render(t, root, Dir{})
	if err != nil {
		t.Fatal(err)
	}
	ord, err := compose.ReadOrdering(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if ord.Of("worker").Wave != 1 || ord.Of("web").Wave != 0 {
		t.Errorf("ordering of the chart's output = %+v, want worker in wave 1", ord)
	}
}
