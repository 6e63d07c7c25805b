package appset

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	text, err := os.ReadFile("../examples/appsets/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := parse(t, strings.ReplaceAll(string(text), "REPO_URL", repo.dir))
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
