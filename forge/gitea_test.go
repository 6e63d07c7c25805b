package forge_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

// Against a real Gitea (FLOTILLA_GITEA, built from code.gitea.io/gitea):
// the client reads its open pull requests, tells a fork's from a
// same-repository one, sees labels, drops a closed one, and refs/pull/N/head
// outlives the pull request, as the generator assumes.
func TestListOpenAgainstARealGitea(t *testing.T) {
	g := forgetest.StartGitea(t)
	g.CreateRepo("web")
	g.Write("ann", "ann/web", "", "main", "compose.yaml", "services: {}\n")
	own := g.Write("ann", "ann/web", "main", "change-1", "compose.yaml", "services: {web: {image: a}}\n")
	closed := g.Write("ann", "ann/web", "main", "change-2", "compose.yaml", "services: {web: {image: b}}\n")
	g.Fork("web")
	forked := g.Write("eve", "eve/web", "main", "evil", "compose.yaml", "services: {web: {image: evil}}\n")
	n1 := g.OpenPR("ann", "web", "change-1")
	n2 := g.OpenPR("ann", "web", "change-2")
	n3 := g.OpenPR("eve", "web", "eve:evil")
	g.Label("web", n1, "preview")
	g.Label("web", n3, "preview")
	g.ClosePR("web", n2)

	prs, err := (&forge.Client{Kind: forge.Gitea, API: g.API()}).ListOpen(context.Background(), "ann/web")
	if err != nil {
		t.Fatal(err)
	}
	by := map[int]forge.PullRequest{}
	for _, p := range prs {
		by[p.Number] = p
	}
	if len(prs) != 2 {
		t.Fatalf("open pull requests %+v, want %d and %d", prs, n1, n3)
	}
	if p := by[n1]; p.Fork || p.HeadSHA != own || p.Author != "ann" || len(p.Labels) != 1 || p.Labels[0] != "preview" || p.UpdatedAt.IsZero() {
		t.Fatalf("same-repository pull request %+v (head %s)", p, own)
	}
	if p := by[n3]; !p.Fork || p.HeadRepo != "eve/web" || p.HeadSHA != forked || p.Author != "eve" {
		t.Fatalf("fork pull request %+v (head %s)", p, forked)
	}
	out, err := exec.Command("git", "ls-remote", g.RepoURL("ann/web")).CombinedOutput()
	if err != nil {
		t.Fatalf("ls-remote: %v\n%s", err, out)
	}
	for n, sha := range map[int]string{n1: own, n2: closed, n3: forked} {
		want := fmt.Sprintf("%s\trefs/pull/%d/head", sha, n)
		if !strings.Contains(string(out), want) {
			t.Fatalf("ls-remote lacks %q:\n%s", want, out)
		}
	}
}
