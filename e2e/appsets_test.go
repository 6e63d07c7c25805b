package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// One small service that runs as soon as its task starts.
const sleeper = `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    stop_grace_period: 1s
`

// A service whose task can never be placed: never Healthy. (A task that
// starts and fails is seen running for a moment, and that moment may be
// the one a pass reads.)
const unplaceable = `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy: {placement: {constraints: ["node.labels.flotilla-test-never == yes"]}}
`

// startFlotilla runs `flotilla controller` with the API on a loopback
// address without tokens, and returns the process and a CLI pointed at it.
func startFlotilla(t *testing.T, id string, args ...string) (*stoppable, cli) {
	t.Helper()
	addr := freeAddr(t)
	args = append([]string{"controller", "--data", filepath.Join(t.TempDir(), "data"), "--controller-id", id,
		"--listen", addr, "--insecure-no-auth"}, args...)
	cmd := exec.Command(flotillaBinary(t), args...)
	s := &stoppable{t: t, cmd: cmd, logs: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.exited:
			case <-time.After(stopDeadline):
				_ = cmd.Process.Kill()
				<-s.exited
			}
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", s.logs)
		}
	})
	server := "http://" + addr
	return s, cli{t: t, bin: flotillaBinary(t), server: server, env: []string{"FLOTILLA_SERVER=" + server}}
}

// statuses lists the controller's applications by name, or nil while the
// API does not answer yet.
func statuses(c cli) map[string]api.ApplicationSummary {
	c.t.Helper()
	out, code := c.run("app", "list", "-o", "json")
	if code != 0 {
		return nil
	}
	var list api.ApplicationList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		c.t.Fatalf("app list: %v\n%s", err, out)
	}
	m := map[string]api.ApplicationSummary{}
	for _, a := range list.Items {
		m[a.Name] = a
	}
	return m
}

// stackServices lists the services of stack on the swarm.
func stackServices(t *testing.T, stack string) []swarm.Service {
	t.Helper()
	svcs, err := swarmtest.Client(t).ServiceList(context.Background(), client.ServiceListOptions{
		Filters: make(client.Filters).Add("label", "com.docker.stack.namespace="+stack)})
	if err != nil {
		t.Fatal(err)
	}
	return svcs.Items
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "applications.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestADependentWaitsUntilItsDependencyIsHealthyAndValidateRefusesACycle(t *testing.T) {
	t.Parallel()
	db, web := swarmtest.Name(t, "dep-db"), swarmtest.Name(t, "dep-web")
	swarmtest.Cleanup(t, db)
	swarmtest.Cleanup(t, web)
	repo := gittest.New(t)
	repo.Commit("db cannot start", map[string]string{"db/compose.yaml": unplaceable, "web/compose.yaml": sleeper})
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source: {repoURL: %[3]s, revision: main, path: db}
    syncPolicy: {automated: {}, interval: 10s}
  - name: %[2]s
    source: {repoURL: %[3]s, revision: main, path: web}
    syncPolicy: {automated: {}, interval: 10s}
    dependsOn: [%[1]s]
`, db, web, repo.Dir))

	// The cycle first: validate names both applications.
	cyclic := writeFile(t, strings.Replace(readFile(t, apps), "path: db}\n", "path: db}\n    dependsOn: ["+web+"]\n", 1))
	out, code := runCombined(t, "validate", "-f", cyclic)
	if code == 0 || !strings.Contains(out, "cycle") || !strings.Contains(out, db+" → "+web) && !strings.Contains(out, web+" → "+db) {
		t.Fatalf("validate of a cycle: exit %d, output %s", code, out)
	}

	_, c := startFlotilla(t, swarmtest.Name(t, "dep"), "--config", apps)
	// db deploys and never gets Healthy; web waits and says for what.
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		st := statuses(c)
		s := st[web]
		return st[db].LastAppliedRevision > 0 && strings.Contains(s.Waiting, "waiting for "+db), fmt.Sprintf("db %+v, web waiting %q", st[db].Status.Health, s.Waiting)
	})
	time.Sleep(12 * time.Second) // more than one pass of web
	if svcs := stackServices(t, web); len(svcs) != 0 {
		t.Fatalf("web deployed %d services while db is not Healthy", len(svcs))
	}
	if st := statuses(c); st[db].Health == "Healthy" {
		t.Fatalf("db is Healthy although its task cannot be placed: %+v", st[db])
	}

	healthyAt := time.Now()
	repo.Commit("db fixed", map[string]string{"db/compose.yaml": sleeper})
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		st := statuses(c)
		return st[web].Health == "Healthy" && st[web].Sync == "Synced" && st[web].Waiting == "", fmt.Sprintf("db %s/%s, web %s/%s waiting %q",
			st[db].Sync, st[db].Health, st[web].Sync, st[web].Health, st[web].Waiting)
	})
	svcs := stackServices(t, web)
	if len(svcs) != 1 || svcs[0].CreatedAt.Before(healthyAt) {
		t.Fatalf("web services %d, created %v; want one created after db was fixed at %v", len(svcs), svcs, healthyAt)
	}
}

// runCombined runs the binary and returns stdout and stderr together.
func runCombined(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var b bytes.Buffer
	cmd := exec.Command(flotillaBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return b.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return b.String(), 0
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestADenyWindowHoldsAnAutomatedSyncUntilItEndsAndManualSyncStillSyncs(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "window")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("v1", map[string]string{"compose.yaml": sleeper})

	// A deny window that opened at the start of this minute and closes
	// about a minute from now.
	now := time.Now().UTC()
	start := now.Truncate(time.Minute)
	end := now.Add(60 * time.Second).Truncate(time.Second).Add(time.Second)
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
syncWindows:
  - kind: deny
    schedule: "%d %d * * *"
    duration: %s
    applications: ["%s"]
    manualSync: true
applications:
  - name: %[4]s
    source: {repoURL: %[6]s, revision: main}
    syncPolicy: {automated: {}, interval: 10s}
`, start.Minute(), start.Hour(), end.Sub(start), stack, "", repo.Dir))
	_, c := startFlotilla(t, swarmtest.Name(t, "win"), "--config", apps)

	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		s := statuses(c)[stack]
		return strings.Contains(s.Waiting, "deny window") && strings.Contains(s.Waiting, end.Format(time.RFC3339)), "waiting " + s.Waiting
	})
	if svcs := stackServices(t, stack); len(svcs) != 0 {
		t.Fatalf("%d services deployed inside a deny window", len(svcs))
	}
	if out, _ := c.run("app", "list"); !strings.Contains(out, "held") {
		t.Fatalf("app list does not mark the held application:\n%s", out)
	}

	// manualSync: true lets an explicit sync through.
	if _, code := c.run("app", "sync", stack, "--wait", "--timeout", "60s"); code != 0 {
		t.Fatal("explicit sync refused inside a manualSync window")
	}
	if svcs := stackServices(t, stack); len(svcs) != 1 {
		t.Fatalf("explicit sync deployed %d services", len(svcs))
	}

	// A new commit waits for the window to end.
	v2 := strings.Replace(sleeper, "app:1", "app:2", 1)
	commit := repo.Commit("v2", map[string]string{"compose.yaml": v2})
	if time.Until(end) < 15*time.Second {
		t.Fatalf("the test was too slow: the window ends at %s", end)
	}
	time.Sleep(12 * time.Second)
	if img := stackServices(t, stack)[0].Spec.TaskTemplate.ContainerSpec.Image; strings.Contains(img, "app:2") {
		t.Fatalf("the new commit was applied inside the deny window (image %s)", img)
	}
	swarmtest.Eventually(t, time.Until(end)+60*time.Second, func() (bool, string) {
		s := statuses(c)[stack]
		return s.Revision == commit && s.Sync == "Synced", fmt.Sprintf("revision %s sync %s waiting %q", shortID(s.Revision), s.Sync, s.Waiting)
	})
	if time.Now().Before(end) {
		t.Fatalf("synced before the window ended at %s", end)
	}
}

func shortID(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

func TestADirectoryGeneratorFollowsTheRepositorysDirectoriesWithTheFileFromGit(t *testing.T) {
	t.Parallel()
	prefix := swarmtest.Name(t, "dirs")
	for _, d := range []string{"a", "b", "c", "d"} {
		swarmtest.Cleanup(t, prefix+"-"+d)
	}
	services := gittest.New(t)
	suspended := strings.Replace(sleeper, "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    deploy: {replicas: 0}\n", 1)
	services.Commit("three", map[string]string{"apps/a/compose.yaml": suspended, "apps/b/compose.yaml": suspended,
		"apps/c/compose.yaml": suspended, "apps/skip/compose.yaml": suspended})
	config := gittest.New(t)
	setFile := fmt.Sprintf(`apiVersion: flotilla/v1
applicationSets:
  - name: dirs
    prune: true
    generators:
      - git: {repoURL: %[2]s, revision: main, directories: ["apps/*"], exclude: ["apps/skip"]}
    template:
      name: "%[1]s-{{.basename}}"
      source: {repoURL: %[2]s, revision: main, path: "{{.path}}"}
      syncPolicy: {automated: {}, interval: 10s}
`, prefix, services.Dir)
	config.Commit("set", map[string]string{"deploy/applications.yaml": setFile})
	ctl, c := startFlotilla(t, prefix, "--config-repo", config.Dir, "--config-revision", "main",
		"--config-path", "deploy/applications.yaml", "--appset-interval", "2s")

	want := func(names ...string) {
		t.Helper()
		swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
			st := statuses(c)
			if len(st) != len(names) {
				return false, fmt.Sprintf("%d applications", len(st))
			}
			for _, n := range names {
				s, ok := st[prefix+"-"+n]
				if !ok || s.Set != "dirs" || s.LastAppliedRevision == 0 {
					return false, fmt.Sprintf("%s: %+v", n, s.Status)
				}
			}
			return true, ""
		})
	}
	want("a", "b", "c")
	if len(stackServices(t, prefix+"-skip")) != 0 {
		t.Fatal("an excluded directory was deployed")
	}

	services.Commit("fourth", map[string]string{"apps/d/compose.yaml": suspended})
	want("a", "b", "c", "d")

	services.Commit("remove b", map[string]string{"apps/b/compose.yaml": ""})
	want("a", "c", "d")
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		n := len(stackServices(t, prefix+"-b"))
		return n == 0, fmt.Sprintf("%d services left in the removed application's stack", n)
	})

	// A commit of the applications file that does not validate is reported
	// and skipped; the applications stay.
	config.Commit("typo", map[string]string{"deploy/applications.yaml": strings.Replace(setFile, "generators:", "generatorz:", 1)})
	ctl.waitLog("applications file is invalid; keeping the applications loaded before", 30*time.Second)
	time.Sleep(5 * time.Second)
	if st := statuses(c); len(st) != 3 {
		t.Fatalf("after an invalid commit of the applications file: %d applications", len(st))
	}
	if out, code := c.run("status"); code != 1 || !strings.Contains(out, "applications file NOT LOADED") || !strings.Contains(out, "generatorz") {
		t.Fatalf("flotilla status after an invalid commit (exit %d):\n%s", code, out)
	}
}

func TestAnOpenPullRequestMakesAPreviewWhoseStackRunsAndClosingItRemovesIt(t *testing.T) {
	t.Parallel()
	prefix := swarmtest.Name(t, "pr")
	preview := prefix + "-pr-7"
	swarmtest.Cleanup(t, preview)
	repo := gittest.New(t)
	repo.Commit("main", map[string]string{"compose.yaml": sleeper})
	head := repo.Commit("change", map[string]string{"compose.yaml": strings.Replace(sleeper, "app:1", "app:2", 1)})
	forgeSrv := forgetest.New(t, "shop/web")
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
	_, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s")
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		st := statuses(c)
		return st != nil && len(st) == 0, fmt.Sprintf("%d applications before any ref", len(st))
	})

	repo.SetRef("refs/pull/7/head", head)
	forgeSrv.Set(forgetest.PR{Number: 7, HeadSHA: head, HeadRepo: "shop/web"})
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		s, ok := statuses(c)[preview]
		return ok && s.Set == "previews" && s.Revision == head && s.Health == "Healthy",
			fmt.Sprintf("%v %s %s", ok, shortID(s.Revision), s.Health)
	})
	svcs := stackServices(t, preview)
	if len(svcs) != 1 || !strings.Contains(svcs[0].Spec.TaskTemplate.ContainerSpec.Image, "app:2") {
		t.Fatalf("preview stack: %+v", svcs)
	}

	// GitHub keeps the ref of a closed pull request: the forge decides.
	forgeSrv.ClosePR(7)
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, ok := statuses(c)[preview]
		n := len(stackServices(t, preview))
		return !ok && n == 0, fmt.Sprintf("application listed %v, %d services", ok, n)
	})
}

func TestPlanBetweenTwoCommitsPrintsExactlyTheServicesAndFieldsThatDiffer(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	base := repo.Commit("base", map[string]string{"deploy/compose.yaml": `services:
  web:
    image: flotilla-test/app:1
    environment: {MODE: one, KEEP: same}
    deploy: {replicas: 2}
  worker:
    image: flotilla-test/app:1
`})
	head := repo.Commit("head", map[string]string{"deploy/compose.yaml": `services:
  web:
    image: flotilla-test/app:1
    environment: {MODE: two, KEEP: same}
    deploy: {replicas: 3}
  worker:
    image: flotilla-test/app:1
  cache:
    image: flotilla-test/app:2
`})
	c := cli{t: t, bin: flotillaBinary(t)}
	out, code := c.run("plan", "--repo", repo.Dir, "--base", base, "--head", head, "--app", "shop", "--path", "deploy")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (changes)", code)
	}
	want := "shop: head " + head[:8] + " against base " + base[:8] + "\n" +
		"  + cache (create)\n" +
		"  ~ web (update)\n" +
		"      env.MODE:  one  → two\n" +
		"      replicas:  2    → 3\n" +
		"  1 to create, 1 to update, 0 to remove\n"
	if out != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", out, want)
	}
	out, code = c.run("plan", "--repo", repo.Dir, "--base", base, "--head", head, "--path", "deploy", "--format", "markdown")
	if code != 2 || !strings.Contains(out, "| `web` | update | `env.MODE` | `one` | `two` |") {
		t.Fatalf("markdown plan (exit %d):\n%s", code, out)
	}
	if _, code := c.run("plan", "--repo", repo.Dir, "--base", head, "--head", head, "--path", "deploy"); code != 0 {
		t.Fatalf("plan of one commit against itself: exit %d, want 0", code)
	}
}

func TestAnUnreachableGeneratorRepositoryRemovesNothingEvenAfterARestartWithPrune(t *testing.T) {
	t.Parallel()
	prefix := swarmtest.Name(t, "gone")
	for _, d := range []string{"a", "b"} {
		swarmtest.Cleanup(t, prefix+"-"+d)
	}
	repo := gittest.New(t)
	suspended := strings.Replace(sleeper, "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    deploy: {replicas: 0}\n", 1)
	repo.Commit("two", map[string]string{"apps/a/compose.yaml": suspended, "apps/b/compose.yaml": suspended})
	// The set reads the repository at a path the test can take away.
	link := filepath.Join(t.TempDir(), "repo")
	if err := os.Symlink(repo.Dir, link); err != nil {
		t.Fatal(err)
	}
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s-static
    source: {repoURL: %[2]s, revision: main, path: apps/a}
    stack: %[1]s-static
    syncPolicy: {automated: {}, interval: 10s}
applicationSets:
  - name: dirs
    prune: true
    generators:
      - git: {repoURL: %[2]s, revision: main, directories: ["apps/*"]}
    template:
      name: "%[1]s-{{.basename}}"
      source: {repoURL: %[2]s, revision: main, path: "{{.path}}"}
      syncPolicy: {automated: {}, interval: 10s}
`, prefix, link))
	swarmtest.Cleanup(t, prefix+"-static")
	deployed := func(c cli) (bool, string) {
		st := statuses(c)
		for _, n := range []string{"a", "b"} {
			if st[prefix+"-"+n].LastAppliedRevision == 0 {
				return false, fmt.Sprintf("%d applications, %s not deployed", len(st), n)
			}
		}
		return true, ""
	}
	ctl, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s", "--prune")
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) { return deployed(c) })

	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	ctl.waitLog("application set not expanded", 30*time.Second)
	time.Sleep(6 * time.Second)
	if st := statuses(c); len(st) != 3 {
		t.Fatalf("with the repository gone: %d applications, want the 3 loaded before", len(st))
	}
	if code, _ := ctl.stop(os.Interrupt, stopDeadline); code != 0 {
		t.Fatalf("controller exit %d", code)
	}

	// A fresh controller that cannot expand the set at all: its stacks look
	// orphaned, and --prune must still not remove them.
	ctl2, c2 := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s", "--prune")
	ctl2.waitLog("application set not expanded", 30*time.Second)
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(ctl2.logs.String(), prefix+"-a") && strings.Contains(ctl2.logs.String(), "its stack stays"),
			"no orphan report for the set's stacks"
	})
	for _, n := range []string{"a", "b"} {
		if len(stackServices(t, prefix+"-"+n)) != 1 {
			t.Fatalf("stack %s-%s was removed while its set could not be expanded", prefix, n)
		}
	}
	if err := os.Symlink(repo.Dir, link); err != nil {
		t.Fatal(err)
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) { return deployed(c2) })
}
