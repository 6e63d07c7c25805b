package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/source"
)

// commitFiles writes files into the worktree of repo at dir and commits them.
func commitFiles(t *testing.T, repo *git.Repository, dir string, files map[string]string, n int) string {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit("commit", &git.CommitOptions{Author: &object.Signature{
		Name: "Ada", Email: "ada@example.com", When: time.Date(2024, 1, 1, 0, 0, n, 0, time.UTC),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// A pass (and a diff) lease the checkout they render from; once they end,
// the tree must be released, or the cache would keep every commit for ever.
func TestAPassAndADiffReleaseTheirCheckoutWhenTheyEnd(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	f := source.New(source.Options{CacheDir: cache, Logger: quiet, Keep: 1})
	app := testApp("shop", true)
	app.Source.RepoURL, app.Source.Revision = dir, "master"
	c := newTestController(t, chartstest.NewMinimal(), f, app)
	treeOf := func(sha string) string {
		m, _ := filepath.Glob(filepath.Join(cache, "*", "trees", sha))
		if len(m) == 1 {
			return m[0]
		}
		return ""
	}

	first := commitFiles(t, repo, dir, repoFiles(composeV1), 1)
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	second := commitFiles(t, repo, dir, map[string]string{"app.conf": "listen 81\n"}, 2)
	if _, err := c.Diff(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	if treeOf(first) != "" {
		t.Errorf("the first pass's tree %s was kept after the pass ended", first[:12])
	}
	third := commitFiles(t, repo, dir, map[string]string{"app.conf": "listen 82\n"}, 3)
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	if treeOf(second) != "" {
		t.Errorf("the diff's tree %s was kept after the diff ended", second[:12])
	}
	if treeOf(third) == "" {
		t.Errorf("the newest tree %s is gone", third[:12])
	}
}
