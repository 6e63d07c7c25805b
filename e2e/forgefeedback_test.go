package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// Against a real Gitea (FLOTILLA_GITEA; skipped without it): the built
// controller previews a pull request with feedback, declared once on the
// set's generator; the head commit gets a success status linking to the
// console, and the pull request one plan comment, which a push edits in
// place while the new head gets its own success status. The token is in
// no log line.
func TestAPreviewsDeployIsReportedOnItsCommitAndItsPullRequest(t *testing.T) {
	g := forgetest.StartGitea(t)
	t.Parallel()
	prefix := swarmtest.Name(t, "fb")
	g.CreateRepo("web")
	g.Write("ann", "ann/web", "", "main", "compose.yaml", sleeper)
	one := g.Write("ann", "ann/web", "main", "change", "compose.yaml", strings.Replace(sleeper, "app:1", "app:2", 1))
	n := g.OpenPR("ann", "web", "change")
	preview := fmt.Sprintf("%s-pr-%d", prefix, n)
	swarmtest.Cleanup(t, preview)
	token := g.Token("ann")
	tokenFile := filepath.Join(t.TempDir(), "gitea-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apps := writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applicationSets:
  - name: previews
    generators:
      - pullRequest:
          repoURL: %[2]s
          forge: {kind: gitea, api: %[3]s, repo: ann/web, tokenFile: %[4]s}
    template:
      name: "%[1]s-pr-{{.number}}"
      source: {repoURL: %[2]s, revision: "{{.sha}}"}
      syncPolicy: {automated: {}, interval: 10s}
      feedback: {statuses: true}
`, prefix, g.RepoURL("ann/web"), g.API(), tokenFile))
	ctl, c := startFlotilla(t, prefix, "--config", apps, "--appset-interval", "2s", "--console-url", "https://flotilla.example.com")

	deployed := func(commit string) {
		t.Helper()
		swarmtest.Eventually(t, 180*time.Second, func() (bool, string) {
			s := statuses(c)[preview]
			state := g.CombinedState("ann/web", commit)
			return s.Revision == commit && state == "success", fmt.Sprintf("revision %s, forge state %q", shortID(s.Revision), state)
		})
	}
	comments := func() []forgetest.Comment {
		var ours []forgetest.Comment
		for _, cm := range g.Comments("web", n) {
			if strings.HasPrefix(cm.Body, forge.PlanMarker(preview)) {
				ours = append(ours, cm)
			}
		}
		return ours
	}
	deployed(one)
	st := g.Statuses("ann/web", one)
	if len(st) == 0 || st[0].Context != "flotilla/"+preview || st[0].TargetURL != "https://flotilla.example.com/ui/#/app/"+preview {
		t.Fatalf("statuses of %s: %+v", one, st)
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		ours := comments()
		return len(ours) == 1 && strings.Contains(ours[0].Body, one[:8]), fmt.Sprintf("%d comments", len(ours))
	})
	if b := comments()[0].Body; !strings.Contains(b, "| `app` | create |") {
		t.Fatalf("first plan comment:\n%s", b)
	}

	two := g.Write("ann", "ann/web", "", "change", "compose.yaml", sleeper)
	deployed(two)
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		ours := comments()
		return len(ours) == 1 && strings.Contains(ours[0].Body, two[:8]), fmt.Sprintf("%d comments: %+v", len(ours), ours)
	})
	if b := comments()[0].Body; !strings.Contains(b, "| `app` | update | `image` |") || !strings.Contains(b, "`flotilla-test/app:1`") {
		t.Fatalf("second plan comment:\n%s", b)
	}
	if strings.Contains(ctl.logs.String(), token) {
		t.Fatal("the token is in the controller's log")
	}
}
