package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/flotilla-gitops/flotilla/internal/gittest"
)

// A tree that holds the tree below it ten times, nine levels deep, is a
// billion files; it must be refused having written nothing, and quickly.
func TestFetchRefusesAGitBombBeforeWritingAnything(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	sha := repo.CommitGraft("bomb", map[string]string{"app/compose.yml": "services: {}\n"},
		map[string]string{"app/bomb": repo.Bomb(10, 9)})
	f := newTestFetcher(t, nil)
	start := time.Now()
	_, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha})
	if !errors.Is(err, ErrTreeTooLarge) {
		t.Fatalf("Fetch = %v, want ErrTreeTooLarge", err)
	}
	for _, want := range []string{repo.Dir, "app/bomb/", "more than 100000 files and directories"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("refusing the bomb took %s", d)
	}
	assertNoTrees(t, f.cacheDir)
}

// Each limit refuses at the entry that crosses it, and a tree within all of
// them is written whole.
func TestMaterialise_budget(t *testing.T) {
	repo := gittest.New(t)
	deep := strings.Repeat("d/", 9) + "f"
	sha := repo.Commit("c", map[string]string{
		"a.txt":   strings.Repeat("a", 100),
		"b/c.txt": strings.Repeat("c", 300),
		deep:      "x",
	})
	// 1 + 2 + 10 entries, 401 bytes, depth 10, largest file 300 bytes.
	for _, tc := range []struct {
		name   string
		budget TreeBudget
		want   string // "" = written
	}{
		{"within", TreeBudget{Entries: 13, Bytes: 401, Depth: 10, Blob: 300}, ""},
		{"unlimited", TreeBudget{Entries: -1, Bytes: -1, Depth: -1, Blob: -1}, ""},
		{"entries", TreeBudget{Entries: 12}, "more than 12 files and directories"},
		{"bytes", TreeBudget{Bytes: 400}, "more than 400 bytes in all"},
		{"depth", TreeBudget{Depth: 9}, "at " + deep + ": deeper than 9 directories"},
		{"blob", TreeBudget{Blob: 299}, "at b/c.txt: a file of 300 bytes, more than 299"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := commitObject(t, repo.Dir, sha)
			dst := filepath.Join(t.TempDir(), "tree")
			err := materialise(t.Context(), s, c, dst, tc.budget.withDefaults())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := readFile(t, dst, deep); got != "x" {
					t.Errorf("%s = %q", deep, got)
				}
				return
			}
			if !errors.Is(err, ErrTreeTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("materialise = %v, want ErrTreeTooLarge saying %q", err, tc.want)
			}
			assertNoTrees(t, filepath.Dir(dst))
		})
	}
}

// A context that ends stops the measuring: a deadline covers the walk.
func TestMaterialise_honoursTheContext(t *testing.T) {
	repo := gittest.New(t)
	sha := repo.CommitGraft("bomb", nil, map[string]string{"bomb": repo.Bomb(10, 6)})
	s, c := commitObject(t, repo.Dir, sha)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dst := filepath.Join(t.TempDir(), "tree")
	err := materialise(ctx, s, c, dst, TreeBudget{Entries: -1, Bytes: -1, Depth: -1, Blob: -1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("materialise = %v, want context.Canceled", err)
	}
	assertNoTrees(t, filepath.Dir(dst))
}

func commitObject(t *testing.T, dir, sha string) (storer.EncodedObjectStorer, *object.Commit) {
	t.Helper()
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		t.Fatal(err)
	}
	return r.Storer, c
}

// assertNoTrees fails if dir holds anything but empty directories: a
// refused tree leaves nothing behind, not even a temporary directory.
func assertNoTrees(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(p, string(filepath.Separator)+"trees"+string(filepath.Separator)) || strings.HasPrefix(d.Name(), tempPrefix) || d.Name() == "tree" {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}
