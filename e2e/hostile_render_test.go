package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/source"
)

// isolatedController is h's controller as the binary runs it: charts
// render in a child process under l, trees are fetched under budget, and
// it also holds the applications others, which must keep syncing while
// h's repository is refused.
func (h *harness) isolatedController(l renderbox.Limits, budget source.TreeBudget, others ...application.Application) *reconcile.Controller {
	h.t.Helper()
	box, err := renderbox.New(l)
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := reconcile.New(reconcile.Options{
		ControllerID: h.id,
		Backend:      h.backend,
		Fetcher:      source.New(source.Options{CacheDir: filepath.Join(h.t.TempDir(), "git"), Logger: quiet, TreeBudget: budget}),
		Logger:       quiet,
		RenderBox:    box,
	}, append([]application.Application{h.app}, others...))
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// bystander is a second running application, on its own repository and
// stack, deployed by its own controller first; the controller under
// attack takes it over (same controller id) and must keep syncing it.
func bystander(t *testing.T, h *harness) *harness {
	t.Helper()
	o := newHarness(t, true)
	o.id = h.id
	o.repo.Commit("initial", files(stackFile))
	if res := o.reconcile(o.controller(false)); res.Err != nil {
		t.Fatal(res.Err)
	}
	o.waitRunning(3)
	return o
}

// syncs checks that the bystander's new commit deploys through ctl.
func (o *harness) syncs(ctl *reconcile.Controller) {
	o.t.Helper()
	o.repo.Commit("bystander moves on", map[string]string{
		"deploy/docker-compose.yml": stackFile,
		"deploy/.env":               "GREETING=still-here\n",
		"deploy/web.conf":           "listen 8080\n",
		"deploy/token.txt":          "s3cr3t-token-value\n",
	})
	if res := o.reconcile(ctl); res.Err != nil || res.Revision < 2 {
		o.t.Fatalf("the other application stopped syncing: %+v", res)
	}
}

// attackFile is the template every render attack writes, so that each
// commit holds one attack only.
const attackFile = "deploy/templates/attack.yaml"

// Rule 4, templates: a chart that runs away in time or memory costs its
// own pass, in its own render process, with an error naming the limit;
// the controller and its other applications carry on.
func TestHostileRenderIsBoundedInAChildProcess(t *testing.T) {
	t.Parallel()
	h := chartHarness(t)
	good := exampleChartFiles(t, prodValues)
	good[attackFile] = "" // each attack writes it; the good tree has none
	h.repo.Commit("chart", good)
	o := bystander(t, h)
	// 3 s was too short for the good chart's own render on a loaded CI
	// machine; the deadline and the CPU limit are equal, and either may
	// stop a runaway loop first. A loop that allocates as it goes (range
	// makes a value per iteration) may also meet the memory limit first
	// on a busy machine: seen once on the current engine's stage.
	ctl := h.isolatedController(renderbox.Limits{Deadline: 8 * time.Second, Memory: 128 << 20}, source.TreeBudget{}, o.app)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(2)

	h.refuseEach(ctl, good, []attack{
		{
			// The loop no in-process budget sees: ranges over a list
			// built once, a body that calls nothing and writes nothing.
			name:  "nested range over a prebuilt list",
			files: map[string]string{attackFile: `{{ $l := until 100000 }}{{ range $l }}{{ range $l }}{{ range $l }}{{ end }}{{ end }}{{ end }}`},
			want:  []string{"chart shop"},
			anyOf: []string{" of 8s exceeded", "memory limit of 128 MiB"},
		},
		{
			// The same with no function at all: range over integers.
			name:  "nested range over integers",
			files: map[string]string{attackFile: `{{ range 100000 }}{{ range 100000 }}{{ if false }}{{ end }}{{ end }}{{ end }}`},
			want:  []string{"chart shop"},
			anyOf: []string{" of 8s exceeded", "memory limit of 128 MiB"},
		},
		{
			// A list whose length overflows int64 when counted naively.
			name:  "untilStep across the whole int64 range",
			files: map[string]string{attackFile: "# {{ untilStep -9223372036854775808 9223372036854775807 2 | len }}\n"},
			want:  []string{"templates/attack.yaml", "untilStep", "more than"},
		},
		{
			// toYaml of a list that holds itself twice at every level.
			name:  "huge toYaml of a self-doubling list",
			files: map[string]string{attackFile: `# {{ $l := list (repeat 1048576 "x") }}{{ range until 12 }}{{ $l = list $l $l }}{{ end }}{{ toYaml $l | len }}` + "\n"},
			want:  []string{"templates/attack.yaml", "render budget"},
		},
		{
			// Within the in-process budget, past the child's memory: the
			// kernel's limit, not the controller, pays for it.
			name:  "string doubling past the render process's memory",
			files: map[string]string{attackFile: `# {{ $s := repeat 1048576 "x" }}{{ range until 7 }}{{ $s = cat $s $s }}{{ end }}{{ len $s }}` + "\n"},
			want:  []string{"chart shop", "memory limit of 128 MiB"},
		},
	})
	o.syncs(ctl)
}
