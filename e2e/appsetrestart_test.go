package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// A directory leaves the repository while the controller is down: the
// restarted controller knows only from the stack's release record that the
// set made it, and does what the set says now.
func TestADirectoryRemovedWhileTheControllerIsDownHasItsStackRemovedAtRestartOnlyWhenTheSetPrunes(t *testing.T) {
	t.Parallel()
	for _, prune := range []bool{true, false} {
		t.Run(fmt.Sprintf("prune %v", prune), func(t *testing.T) {
			t.Parallel()
			prefix := swarmtest.Name(t, "setrestart")
			for _, d := range []string{"a", "b"} {
				swarmtest.Cleanup(t, prefix+"-"+d)
			}
			repo := gittest.New(t)
			repo.Commit("two", map[string]string{"apps/a/compose.yaml": sleeper, "apps/b/compose.yaml": sleeper})
			apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applicationSets:
  - name: dirs
    prune: %[3]v
    generators:
      - git: {repoURL: %[2]s, revision: main, directories: ["apps/*"]}
    template:
      name: "%[1]s-{{.basename}}"
      source: {repoURL: %[2]s, revision: main, path: "{{.path}}"}
      syncPolicy: {automated: {}, interval: 10s}
`, prefix, repo.Dir, prune))
			ctl, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s")
			swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
				st := statuses(c)
				for _, n := range []string{"a", "b"} {
					if s := st[prefix+"-"+n]; s.Health != "Healthy" {
						return false, fmt.Sprintf("%s: %s/%s", n, s.Sync, s.Health)
					}
				}
				return true, ""
			})
			before := stackServices(t, prefix+"-a")
			if code, _ := ctl.stop(syscall.SIGTERM, stopDeadline); code != 0 {
				t.Fatalf("controller exit %d on SIGTERM", code)
			}

			repo.Commit("remove b", map[string]string{"apps/b/compose.yaml": ""})
			ctl2, c2 := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s")
			if prune {
				ctl2.waitLog("removed the stack of an application its application set no longer generates", 60*time.Second)
				swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
					n := len(stackServices(t, prefix+"-b"))
					return n == 0, fmt.Sprintf("%d services left in the stack of the removed directory", n)
				})
			} else {
				ctl2.waitLog("its stack stays", 60*time.Second)
				time.Sleep(5 * time.Second) // a pass of a and the sweep again
				if n := len(stackServices(t, prefix+"-b")); n != 1 {
					t.Fatalf("prune: false, yet the removed directory's stack has %d services", n)
				}
			}
			st := statuses(c2)
			if _, ok := st[prefix+"-b"]; ok || len(st) != 1 {
				t.Fatalf("applications after the restart: %v", st)
			}
			after := stackServices(t, prefix+"-a")
			if len(after) != 1 || len(before) != 1 || after[0].ID != before[0].ID || after[0].Version.Index != before[0].Version.Index {
				t.Fatalf("the other directory's stack was touched: before %+v, after %+v", before, after)
			}
		})
	}
}

func TestAPreviewWhosePullRequestClosedWhileTheControllerWasDownIsRemovedAtRestart(t *testing.T) {
	t.Parallel()
	prefix := swarmtest.Name(t, "prrestart")
	preview := prefix + "-pr-9"
	swarmtest.Cleanup(t, preview)
	repo := gittest.New(t)
	repo.Commit("main", map[string]string{"compose.yaml": sleeper})
	head := repo.Commit("change", map[string]string{"compose.yaml": strings.Replace(sleeper, "app:1", "app:2", 1)})
	repo.SetRef("refs/pull/9/head", head)
	forgeSrv := forgetest.New(t, "shop/web")
	forgeSrv.Set(forgetest.PR{Number: 9, HeadSHA: head, HeadRepo: "shop/web"})
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applicationSets:
  - name: previews
    generators:
      - pullRequest: {repoURL: %[2]s, forge: {kind: gitea, api: %[3]s, repo: shop/web}}
    template:
      name: "%[1]s-pr-{{.number}}"
      source: {repoURL: %[2]s, revision: "{{.sha}}"}
      syncPolicy: {automated: {}, interval: 10s}
`, prefix, repo.Dir, forgeSrv.GiteaAPI()))
	ctl, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s")
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		s, ok := statuses(c)[preview]
		return ok && s.Revision == head && s.Health == "Healthy", fmt.Sprintf("%v %s %s", ok, shortID(s.Revision), s.Health)
	})
	if code, _ := ctl.stop(syscall.SIGTERM, stopDeadline); code != 0 {
		t.Fatalf("controller exit %d on SIGTERM", code)
	}

	forgeSrv.ClosePR(9) // its ref stays, as on GitHub
	ctl2, c2 := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s")
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		st := statuses(c2)
		_, listed := st[preview]
		n := len(stackServices(t, preview))
		return st != nil && !listed && n == 0, fmt.Sprintf("application listed %v, %d services", listed, n)
	})
	// The removal is logged once it has finished, which can be after the
	// services are gone from the swarm: wait for the line, then read it.
	ctl2.waitLog("removed the stack of an application its application set no longer generates", 30*time.Second)
	if !strings.Contains(ctl2.logs.String(), `set=previews`) {
		t.Fatalf("the removal does not name the set:\n%s", ctl2.logs)
	}
}

// The built binary's validate expands a set over a repository on disk, and
// tells an invalid file (1) from one it could not check (3).
func TestValidateExpandsApplicationSetsAndTellsAnUnreachableRepositoryFromAnInvalidFile(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.Commit("two", map[string]string{"apps/a/compose.yaml": sleeper, "apps/b/compose.yaml": sleeper})
	file := func(repoURL, dependsOn string) string {
		return writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: front
    source: {repoURL: %[1]s, revision: main, path: apps/a}
    dependsOn: [%[2]s]
applicationSets:
  - name: dirs
    generators:
      - git: {repoURL: %[1]s, revision: main, directories: ["apps/*"]}
    template:
      name: "svc-{{.basename}}"
      source: {repoURL: %[1]s, revision: main, path: "{{.path}}"}
`, repoURL, dependsOn))
	}
	gone := filepath.Join(t.TempDir(), "gone")
	for _, tt := range []struct {
		args []string
		code int
		has  string
	}{
		{[]string{"-f", file(repo.Dir, "svc-b")}, 0, "3 applications valid, 2 of them generated by 1 application set"},
		{[]string{"-f", file(repo.Dir, "svc-c")}, 1, `field applications[0].dependsOn[0]: "svc-c" is not an application of this file`},
		{[]string{"-f", file(gone, "svc-b")}, 3, `application set "dirs": generators[0]: git generator: repository unreachable`},
		{[]string{"--offline", "-f", file(gone, "svc-b")}, 0, "1 application set not expanded (--offline)"},
	} {
		out, code := runCombined(t, append([]string{"validate"}, tt.args...)...)
		if code != tt.code || !strings.Contains(out, tt.has) {
			t.Errorf("flotilla validate %v: exit %d (want %d), output:\n%s\nwant it to contain %q", tt.args, code, tt.code, out, tt.has)
		}
	}
}
