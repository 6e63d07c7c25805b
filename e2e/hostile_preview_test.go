package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// Pull requests are anyone's code. Over a preview set that asks for the
// label "preview", a forge (recorded answers shaped like Gitea's API, see
// docs/security.md "Previews") reports: a labelled pull request from a
// fork, a closed one whose ref stays, an unlabelled one, one idle beyond
// the ttl, one that binds the host path the static application of the
// same repository is allowed, and one that mounts the base's SOPS-encrypted
// env file, which the controller's key opens for the static application.
// None of them gets a running stack or a decrypted value; a legit
// one is previewed, and removed when the forge reports it closed although
// its ref stays; the controller and the static application carry on.
func TestHostilePullRequestsAreNotPreviewedAndALegitOneComesAndGoesWithItsPullRequest(t *testing.T) {
	t.Parallel()
	prefix := swarmtest.Name(t, "hpr")
	static := prefix + "-shop"
	preview := func(n int) string { return fmt.Sprintf("%s-pr-%d", prefix, n) }
	swarmtest.Cleanup(t, static)
	for n := 1; n <= 7; n++ {
		swarmtest.Cleanup(t, preview(n))
	}
	hostDir := "/tmp/flotilla-e2e-preview-" + prefix
	bind := fmt.Sprintf(`version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    volumes: ["%s/data:/data"]
`, hostDir)
	repo := gittest.New(t)
	repo.Commit("main", map[string]string{"compose.yaml": sleeper})
	evil := strings.Replace(sleeper, "app:1", "app:2", 1)
	fork := repo.Commit("fork", map[string]string{"compose.yaml": evil})
	closed := repo.Commit("closed", map[string]string{"compose.yaml": evil})
	unlabelled := repo.Commit("unlabelled", map[string]string{"compose.yaml": evil})
	hostPath := repo.Commit("host path", map[string]string{"compose.yaml": bind})
	legit := repo.Commit("legit", map[string]string{"compose.yaml": strings.Replace(sleeper, "app:1", "app:2", 1) + "    environment: {PR: \"5\"}\n"})
	idle := repo.Commit("idle", map[string]string{"compose.yaml": evil})
	key := sopsagetest.NewIdentity(t)
	keyFile := writeFile(t, string(key.File))
	const baseSecret = "base-db-password-3e9b"
	sealed := string(sopsagetest.Encrypt(t, "db.env", []byte("DB_PASSWORD="+baseSecret+"\n"), key.Recipient))
	mountsSecret := repo.Commit("mounts the base's secret", map[string]string{"db.env": sealed,
		"compose.yaml": evil + "    env_file: [db.env]\n"})
	repo.Commit("main again", map[string]string{"compose.yaml": sleeper + "    env_file: [db.env]\n", "db.env": sealed})
	for n, sha := range map[int]string{1: fork, 2: closed, 3: unlabelled, 4: hostPath, 5: legit, 6: idle, 7: mountsSecret} {
		repo.SetRef(fmt.Sprintf("refs/pull/%d/head", n), sha)
	}
	forgeSrv := forgetest.New(t, "shop/web")
	label := []string{"preview"}
	forgeSrv.Set(
		forgetest.PR{Number: 1, HeadSHA: fork, HeadRepo: "eve/web", Author: "eve", Labels: label},
		forgetest.PR{Number: 2, HeadSHA: closed, HeadRepo: "shop/web", Author: "ann", Labels: label, State: "closed"},
		forgetest.PR{Number: 3, HeadSHA: unlabelled, HeadRepo: "shop/web", Author: "bob"},
		forgetest.PR{Number: 4, HeadSHA: hostPath, HeadRepo: "shop/web", Author: "bob", Labels: label},
		forgetest.PR{Number: 5, HeadSHA: legit, HeadRepo: "shop/web", Author: "ann", Labels: label},
		forgetest.PR{Number: 6, HeadSHA: idle, HeadRepo: "shop/web", Author: "ann", Labels: label, Updated: time.Now().Add(-100 * time.Hour)},
		forgetest.PR{Number: 7, HeadSHA: mountsSecret, HeadRepo: "shop/web", Author: "bob", Labels: label},
	)
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s-shop
    source: {repoURL: %[2]s, revision: main}
    syncPolicy: {automated: {}, interval: 10s}
    allow: {hostPaths: [%[4]s]}
applicationSets:
  - name: previews
    generators:
      - pullRequest:
          repoURL: %[2]s
          forge: {kind: gitea, api: %[3]s, repo: shop/web}
          labels: [preview]
          ttl: 72h
    template:
      name: "%[1]s-pr-{{.number}}"
      source: {repoURL: %[2]s, revision: "{{.sha}}"}
      syncPolicy: {automated: {}, interval: 10s}
`, prefix, repo.Dir, forgeSrv.GiteaAPI(), hostDir))
	ctl, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s", "--sops-age-key-file", keyFile)

	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		st := statuses(c)
		p4, p5, p7 := st[preview(4)], st[preview(5)], st[preview(7)]
		return p5.Revision == legit && p5.Health == "Healthy" && st[static].Health == "Healthy" && strings.Contains(p4.LastError, "host path") && p7.LastError != "",
			fmt.Sprintf("preview 5 %s %s, static %s, preview 4 error %q, preview 7 error %q", shortID(p5.Revision), p5.Health, st[static].Health, p4.LastError, p7.LastError)
	})
	st := statuses(c)
	for _, n := range []int{1, 2, 3, 6} {
		if _, ok := st[preview(n)]; ok {
			t.Errorf("pull request %d was made a preview", n)
		}
	}
	for _, n := range []int{1, 2, 3, 4, 6, 7} {
		if svcs := stackServices(t, preview(n)); len(svcs) != 0 {
			t.Errorf("pull request %d has %d services running", n, len(svcs))
		}
	}
	if e := st[preview(4)].LastError; !strings.Contains(e, hostDir) || !strings.Contains(e, "allow.hostPaths") {
		t.Errorf("the host-path preview's error does not name the path and the key: %q", e)
	}
	if e := st[preview(7)].LastError; !strings.Contains(e, "db.env") || !strings.Contains(e, "applicationSets[0].preview.sops") {
		t.Errorf("the preview that mounts the base's secret: error %q, want the file and applicationSets[0].preview.sops", e)
	}
	if strings.Contains(ctl.logs.String(), baseSecret) {
		t.Errorf("the controller's log holds the base's decrypted value")
	}
	ctl.waitLog("pull requests not previewed", 30*time.Second)
	for _, want := range []string{`#1: from another repository (\"eve/web\")`, "#3: has none of the labels", "#6: not updated within the ttl"} {
		if !strings.Contains(ctl.logs.String(), want) {
			t.Errorf("the log does not say %q", want)
		}
	}

	// The forge reports 5 merged; its ref stays, as on GitHub.
	forgeSrv.ClosePR(5)
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, listed := statuses(c)[preview(5)]
		n := len(stackServices(t, preview(5)))
		return !listed && n == 0, fmt.Sprintf("preview 5 listed %v, %d services", listed, n)
	})
	if st := statuses(c); st == nil || st[static].Health != "Healthy" {
		t.Fatalf("after the attacks the controller or the static application is not well: %+v", st[static])
	}
	select {
	case <-ctl.exited:
		t.Fatalf("the controller exited (%d)", ctl.code)
	default:
	}
}

// Against a real Gitea (FLOTILLA_GITEA; skipped without it): a labelled
// pull request from a fork is not previewed, a labelled one from the
// repository is, at the head commit Gitea reports, and closing it on Gitea
// removes the preview and its stack while refs/pull/N/head stays.
func TestPreviewsFollowARealGiteasOpenPullRequests(t *testing.T) {
	g := forgetest.StartGitea(t)
	t.Parallel()
	prefix := swarmtest.Name(t, "gpr")
	g.CreateRepo("web")
	g.Write("ann", "ann/web", "", "main", "compose.yaml", sleeper)
	own := g.Write("ann", "ann/web", "main", "change", "compose.yaml", strings.Replace(sleeper, "app:1", "app:2", 1))
	g.Fork("web")
	g.Write("eve", "eve/web", "main", "evil", "compose.yaml", strings.Replace(sleeper, "app:1", "app:2", 1)+"    environment: {EVIL: \"1\"}\n")
	nOwn := g.OpenPR("ann", "web", "change")
	nFork := g.OpenPR("eve", "web", "eve:evil")
	g.Label("web", nOwn, "preview")
	g.Label("web", nFork, "preview")
	previewOwn, previewFork := fmt.Sprintf("%s-pr-%d", prefix, nOwn), fmt.Sprintf("%s-pr-%d", prefix, nFork)
	swarmtest.Cleanup(t, previewOwn)
	swarmtest.Cleanup(t, previewFork)
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applicationSets:
  - name: previews
    generators:
      - pullRequest:
          repoURL: %[2]s
          forge: {kind: gitea, api: %[3]s, repo: ann/web}
          labels: [preview]
    template:
      name: "%[1]s-pr-{{.number}}"
      source: {repoURL: %[2]s, revision: "{{.sha}}"}
      syncPolicy: {automated: {}, interval: 10s}
`, prefix, g.RepoURL("ann/web"), g.API()))
	ctl, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s")
	swarmtest.Eventually(t, 120*time.Second, func() (bool, string) {
		s, ok := statuses(c)[previewOwn]
		return ok && s.Revision == own && s.Health == "Healthy", fmt.Sprintf("%v %s %s", ok, shortID(s.Revision), s.Health)
	})
	if _, ok := statuses(c)[previewFork]; ok || len(stackServices(t, previewFork)) != 0 {
		t.Fatal("the fork's pull request was previewed")
	}
	ctl.waitLog("from another repository", 30*time.Second)

	g.ClosePR("web", nOwn)
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, listed := statuses(c)[previewOwn]
		n := len(stackServices(t, previewOwn))
		return !listed && n == 0, fmt.Sprintf("listed %v, %d services", listed, n)
	})
}
