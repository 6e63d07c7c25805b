package e2e

import (
	"maps"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/reconcile"
)

// attack is one change a hostile repository author could push, and the
// words its refusal must contain besides the application's name.
type attack struct {
	name  string
	files map[string]string // laid over the running stack's files
	want  []string
	// anyOf: the error names at least one of these (a runaway loop in the
	// render child may meet its deadline or its memory limit first).
	anyOf []string
}

// refuseEach commits each attack in turn over good, the files of the stack
// h already runs through ctl, and checks what the hostile-input suite
// promises for every rule: the pass fails naming the application and the
// wanted words, the swarm saw no write, and the running services are as
// they were. Last it commits good again and the same controller passes:
// a refused repository costs its own pass, never the controller.
func (h *harness) refuseEach(ctl *reconcile.Controller, good map[string]string, attacks []attack) {
	h.t.Helper()
	before := versions(h.services())
	for _, a := range attacks {
		fs := maps.Clone(good)
		maps.Copy(fs, a.files)
		h.repo.Commit(a.name, fs)
		stats := h.backend.Stats()
		res := h.reconcile(ctl)
		if res.Err == nil {
			h.t.Errorf("%s: the pass succeeded; want a refusal", a.name)
			continue
		}
		for _, w := range append(append([]string(nil), a.want...), `application "`+h.app.Name+`"`) {
			if !strings.Contains(res.Status.LastError, w) {
				h.t.Errorf("%s: error %q does not mention %q", a.name, res.Status.LastError, w)
			}
		}
		if len(a.anyOf) > 0 && !slices.ContainsFunc(a.anyOf, func(w string) bool { return strings.Contains(res.Status.LastError, w) }) {
			h.t.Errorf("%s: error %q mentions none of %q", a.name, res.Status.LastError, a.anyOf)
		}
		if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
			h.t.Errorf("%s: wrote to the swarm before refusing: %v", a.name, d.Requests)
		}
		if after := versions(h.services()); !maps.Equal(before, after) {
			h.t.Errorf("%s: running services changed: %v -> %v", a.name, before, after)
		}
	}
	h.repo.Commit("good again", good)
	if res := h.reconcile(ctl); res.Err != nil {
		h.t.Fatalf("after the attacks, the good revision no longer deploys: %v", res.Err)
	}
}
