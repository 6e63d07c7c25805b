package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

// `flotilla plan --comment N` against a real Gitea: the first run creates
// the plan comment, a run after another push edits that comment in place,
// so the pull request holds exactly one, with the newest plan.
func TestPlanCommentIsEditedInPlaceOnEachPush(t *testing.T) {
	g := forgetest.StartGitea(t)
	g.CreateRepo("web")
	g.Write("ann", "ann/web", "", "main", "README.md", "web\n")
	g.Write("ann", "ann/web", "main", "change-1", "README.md", "change\n")
	n := g.OpenPR("ann", "web", "change-1")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(g.Token("ann")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	repo := t.TempDir()
	commitFile(t, repo, "compose.yaml", planBase)
	base := gitHead(t, repo)
	commitFile(t, repo, "compose.yaml", planHead)
	first := gitHead(t, repo)
	o := planOptions{Repo: repo, Base: base, Head: first, App: "shop", Path: ".", Format: "text",
		Comment: planComment{Number: n, Kind: forge.Gitea, API: g.API(), Repo: "ann/web", TokenFile: tokenFile}}
	var out, errOut bytes.Buffer
	if code := runPlan(context.Background(), o, &out, &errOut); code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	commitFile(t, repo, "compose.yaml", strings.Replace(planHead, "example/web:2", "example/web:3", 1))
	o.Head = gitHead(t, repo)
	errOut.Reset()
	if code := runPlan(context.Background(), o, &out, &errOut); code != exitChanges {
		t.Fatalf("second run: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "plan comment on ann/web#") || !strings.Contains(errOut.String(), "updated") {
		t.Fatalf("second run's report: %s", errOut.String())
	}
	var ours []forgetest.Comment
	for _, c := range g.Comments("web", n) {
		if strings.HasPrefix(c.Body, forge.PlanMarker("shop")) {
			ours = append(ours, c)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d plan comments, want 1: %+v", len(ours), ours)
	}
	if b := ours[0].Body; !strings.Contains(b, "`example/web:3`") || strings.Contains(b, first[:8]) || !strings.Contains(b, "| `worker` | remove |") {
		t.Fatalf("comment not the second plan:\n%s", b)
	}
}
