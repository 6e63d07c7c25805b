package appset

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

// A preview's feedback takes the forge its set's pullRequest generator
// declares, token included, and its own pull request for the plan
// comment; the template's forge is not changed for the next element.
func TestAPreviewsFeedbackTakesTheGeneratorsForgeAndItsPullRequest(t *testing.T) {
	repo := newGitRepo(t)
	head := repo.commit(map[string]string{"compose.yaml": "services: {}\n"})
	repo.git("update-ref", "refs/pull/4/head", head)
	repo.git("update-ref", "refs/pull/9/head", head)
	srv := forgetest.New(t, "shop/web")
	srv.Set(forgetest.PR{Number: 4, HeadSHA: head, HeadRepo: "shop/web"}, forgetest.PR{Number: 9, HeadSHA: head, HeadRepo: "shop/web"})
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := strings.Replace(previewSet, "forge: {kind: gitea, api: API, repo: shop/web}", "forge: {kind: gitea, api: API, repo: shop/web, tokenFile: "+token+"}", 1) +
		"      feedback: {statuses: true}\n"
	f := parse(t, strings.NewReplacer("REPO", repo.dir, "API", srv.GiteaAPI()).Replace(set))
	apps, err := New(Options{Refs: newFetcher(t)}).Expand(context.Background(), f)
	if err != nil || len(apps) != 2 {
		t.Fatalf("%v %v", names(apps), err)
	}
	for i, n := range []string{"4", "9"} {
		fb := apps[i].Feedback
		if fb == nil || fb.Forge == nil || fb.Forge.API != srv.GiteaAPI() || fb.Forge.Repo != "shop/web" || fb.Forge.TokenFile != token || fb.PullRequest != n || !fb.Statuses {
			t.Fatalf("preview %d feedback %+v", i, fb)
		}
	}
	if apps[0].Feedback == apps[1].Feedback || apps[0].Feedback.Forge == apps[1].Feedback.Forge {
		t.Fatal("previews share one feedback")
	}
	if tpl := f.ApplicationSets[0].Template.Feedback; tpl.Forge != nil || tpl.PullRequest != "" {
		t.Fatalf("the template was changed: %+v", tpl)
	}
}
