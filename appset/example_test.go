package appset

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

// The worked example in examples/appsets must validate and expand to what
// its README says.
func TestTheWorkedExampleExpandsToPlatformAndOneApplicationPerServiceDirectory(t *testing.T) {
	repo := newGitRepo(t)
	files := map[string]string{}
	root := "../examples/appsets/repo"
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	head := repo.commit(files)
	repo.git("update-ref", "refs/pull/7/head", head)
	repo.git("update-ref", "refs/pull/8/head", head) // open, but not labelled
	text, err := os.ReadFile("../examples/appsets/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := forgetest.New(t, "shop/web")
	srv.Set(forgetest.PR{Number: 7, HeadSHA: head, HeadRepo: "shop/web", Labels: []string{"preview"}},
		forgetest.PR{Number: 8, HeadSHA: head, HeadRepo: "shop/web"})
	f := parse(t, strings.NewReplacer("REPO_URL", repo.dir, "FORGE_API", srv.GiteaAPI()).Replace(string(text)))
	fetcher := newFetcher(t)
	gen, err := New(Options{Fetcher: fetcher, Refs: fetcher}).Expand(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	full, err := f.Expanded(gen)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range full.Applications {
		got = append(got, a.Name)
	}
	if want := []string{"platform", "api", "web", "web-pr-7"}; !slices.Equal(got, want) {
		t.Fatalf("applications %v, want %v", got, want)
	}
	if ws, err := full.Windows(); err != nil || !ws.Matches("web") {
		t.Fatalf("windows %v, %v", ws, err)
	}
}
