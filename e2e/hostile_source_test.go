package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/source"
)

// treeAttack is an attack whose commit may also graft trees no worktree
// could hold (a git bomb), path → tree hash.
type treeAttack struct {
	attack
	grafts func(h *harness) map[string]string
}

// refuseTrees is refuseEach for attacks on the tree itself: each commit
// is refused naming the application and the wanted words, as stalled
// (fetching the same commit again is refused the same way), with no
// write to the swarm and the running services unchanged; then the good
// files deploy again through the same controller.
func (h *harness) refuseTrees(ctl *reconcile.Controller, good map[string]string, attacks []treeAttack) {
	h.t.Helper()
	before := versions(h.services())
	for _, a := range attacks {
		fs := maps.Clone(good)
		maps.Copy(fs, a.files)
		var grafts map[string]string
		if a.grafts != nil {
			grafts = a.grafts(h)
		}
		h.repo.CommitGraft(a.name, fs, grafts)
		stats := h.backend.Stats()
		res := h.reconcile(ctl)
		if res.Err == nil {
			h.t.Errorf("%s: the pass succeeded; want a refusal", a.name)
			continue
		}
		if reconcile.KindOf(res.Err) != reconcile.Stalled {
			h.t.Errorf("%s: refusal is %s, want stalled: %v", a.name, reconcile.KindOf(res.Err), res.Err)
		}
		for _, w := range append(append([]string(nil), a.want...), `application "`+h.app.Name+`"`, "git tree budget") {
			if !strings.Contains(res.Status.LastError, w) {
				h.t.Errorf("%s: error %q does not mention %q", a.name, res.Status.LastError, w)
			}
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

// Rule 4, git trees: a commit whose tree would expand past the budget is
// refused before anything is written to disk, naming the path and the
// limit; the controller and its other applications carry on.
func TestHostileSourceTreeIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	good := files(stackFile)
	h.repo.Commit("initial", good)
	o := bystander(t, h)
	budget := source.TreeBudget{Entries: 5000, Depth: 20, Blob: 1 << 20, Bytes: 4 << 20}
	ctl := h.isolatedController(renderbox.Limits{}, budget, o.app)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(3)

	deep := "deploy/" + strings.Repeat("n/", 25) + "x.txt"
	// Each attack's files are deleted by the others' commits and the
	// good one's, so that each commit holds one attack only.
	for _, f := range []string{deep, "deploy/blob.bin", "deploy/a.bin", "deploy/b.bin", "deploy/c.bin", "deploy/d.bin", "deploy/e.bin"} {
		good[f] = ""
	}
	h.refuseTrees(ctl, good, []treeAttack{
		{
			// A few hundred bytes of objects, 8^5 files under path.
			attack: attack{name: "git bomb under the application's path", want: []string{"deploy/bomb", "more than 5000 files and directories"}},
			grafts: func(h *harness) map[string]string { return map[string]string{"deploy/bomb": h.repo.Bomb(8, 5)} },
		},
		{
			// Few files, each copy counted: a wide bomb of one level
			// under a directory the stack never reads.
			attack: attack{name: "wide flat bomb in deploy/vendor", want: []string{"deploy/vendor", "more than 5000"}},
			grafts: func(h *harness) map[string]string { return map[string]string{"deploy/vendor": h.repo.Bomb(6000, 1)} },
		},
		{
			attack: attack{name: "directories nested past the depth limit", files: map[string]string{deep: "x\n"}, want: []string{"deeper than 20 directories"}},
		},
		{
			attack: attack{name: "one file over the size limit", files: map[string]string{"deploy/blob.bin": strings.Repeat("z", 2<<20)}, want: []string{"deploy/blob.bin", "more than 1048576"}},
		},
		{
			// Each file under the blob limit, together over the bytes.
			attack: attack{name: "files over the bytes limit together", files: map[string]string{
				"deploy/a.bin": strings.Repeat("a", 900<<10), "deploy/b.bin": strings.Repeat("b", 900<<10),
				"deploy/c.bin": strings.Repeat("c", 900<<10), "deploy/d.bin": strings.Repeat("d", 900<<10),
				"deploy/e.bin": strings.Repeat("e", 900<<10),
			}, want: []string{"more than 4194304 bytes in all"}},
		},
	})
	o.syncs(ctl)
}

// Rule 4, git trees in a monorepo: a git bomb in a sibling directory
// refuses only the applications that read it. The whole tree is over the
// budget, so the application at good/ gets its own path alone and syncs;
// the one at bomb/ is stalled naming the bomb and the budget, with nothing
// written to its stack.
func TestHostileSourceTreeBesideTheApplicationRefusesOnlyItsReaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.Source.Path = "good"
	bad := newHarness(t, true)
	bad.id = h.id
	bad.repo = h.repo
	bad.app.Source.RepoURL = h.repo.Dir
	bad.app.Source.Path = "bomb"

	good := map[string]string{}
	for name, content := range files(stackFile) {
		good["good/"+strings.TrimPrefix(name, "deploy/")] = content
		good["bomb/"+strings.TrimPrefix(name, "deploy/")] = content
	}
	// 8^5 files beside good/, a few hundred bytes of objects.
	h.repo.CommitGraft("bomb beside good/", good, map[string]string{"bomb/vendor": h.repo.Bomb(8, 5)})
	budget := source.TreeBudget{Entries: 5000, Depth: 20, Blob: 1 << 20, Bytes: 4 << 20}
	ctl := h.isolatedController(renderbox.Limits{}, budget, bad.app)

	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatalf("the application beside the bomb was refused: %v", res.Err)
	}
	h.waitRunning(3)
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		res := h.reconcile(ctl)
		return res.Err == nil && res.Status.Health == application.Healthy && res.Status.Sync == application.Synced,
			fmt.Sprintf("%v %s/%s", res.Err, res.Status.Health, res.Status.Sync)
	})

	stats := bad.backend.Stats()
	res := bad.reconcile(ctl)
	if res.Err == nil {
		t.Fatal("the application reading the bomb synced; want a refusal")
	}
	if k := reconcile.KindOf(res.Err); k != reconcile.Stalled {
		t.Errorf("refusal is %s, want stalled: %v", k, res.Err)
	}
	for _, w := range []string{`application "` + bad.app.Name + `"`, "bomb/vendor/", "more than 5000 files and directories", "git tree budget"} {
		if !strings.Contains(res.Status.LastError, w) {
			t.Errorf("error %q does not mention %q", res.Status.LastError, w)
		}
	}
	if d := bad.backend.Stats().Sub(stats); d.Writes != 0 {
		t.Errorf("wrote to the swarm before refusing: %v", d.Requests)
	}
	if svcs := bad.services(); len(svcs) != 0 {
		t.Errorf("the refused application's stack has services: %v", svcs)
	}

	// The bomb stays; the good application still follows its path.
	good["good/.env"] = "GREETING=beside-a-bomb\n"
	h.repo.CommitGraft("good/ moves on", good, map[string]string{"bomb/vendor": h.repo.Bomb(8, 5)})
	if res := h.reconcile(ctl); res.Err != nil || res.Revision < 2 {
		t.Fatalf("the application beside the bomb stopped syncing: %+v", res)
	}
}
