package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/flotilla-gitops/flotilla/application"
)

// bareCopy makes a bare clone of r, the remote Commit pushes to (a
// non-bare remote refuses pushes to its checked-out branch).
func bareCopy(t *testing.T, r *testRepo) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainClone(dir, true, &git.CloneOptions{URL: r.dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func headOf(t *testing.T, dir string) plumbing.Hash {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("master"), true)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Hash()
}

func TestCommit_writesOnlyWhatChangeWroteAndNeverOutsideTheRepository(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"compose.yaml": "services: {}\n", "other": "x\n"})
	src.commit("initial")
	if err := os.Symlink("/etc/hostname", filepath.Join(src.dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	src.commit("a symlink out")
	origin := bareCopy(t, src)
	before := headOf(t, origin)
	author := application.CommitAuthor{Name: "Bot", Email: "bot@example.invalid"}

	req := CommitRequest{RepoURL: origin, Branch: "master", Author: author}
	req.Change = func(_ context.Context, f *Files) (string, error) {
		if b, err := f.ReadFile("escape.yaml"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("read a symlink out of the repository: %q, %v", b, err)
		}
		if err := f.WriteFile("escape.yaml", []byte("x")); err == nil {
			t.Error("wrote through a symlink")
		}
		if _, err := f.ReadFile("."); err == nil {
			t.Error("read the repository's root as a file")
		}
		if err := f.WriteFile("../../etc/x", []byte("x")); err == nil {
			t.Error("wrote outside the repository")
		}
		if err := f.WriteFile("new-file", []byte("x")); err == nil {
			t.Error("created a file: only existing files are rewritten")
		}
		return "", nil
	}
	res, err := Commit(context.Background(), req)
	if err != nil || res.Commit != "" || headOf(t, origin) != before {
		t.Fatalf("nothing to commit: %+v, %v", res, err)
	}

	req.DryRun = true
	req.Change = func(_ context.Context, f *Files) (string, error) {
		return "change", f.WriteFile("compose.yaml", []byte("services: {a: {image: x}}\n"))
	}
	if res, err := Commit(context.Background(), req); err != nil || res.Commit != "" || res.Message != "change" || headOf(t, origin) != before {
		t.Fatalf("dry run: %+v, %v", res, err)
	}

	req.DryRun = false
	res, err = Commit(context.Background(), req)
	if err != nil || res.Commit == "" || res.Attempts != 1 {
		t.Fatalf("commit: %+v, %v", res, err)
	}
	if got := headOf(t, origin); got.String() != res.Commit {
		t.Fatalf("origin's head %s, want %s", got, res.Commit)
	}
	repo, _ := git.PlainOpen(origin)
	c, _ := repo.CommitObject(plumbing.NewHash(res.Commit))
	stats, _ := c.Stats()
	if len(stats) != 1 || stats[0].Name != "compose.yaml" || c.Author.Email != "bot@example.invalid" || c.Committer.Name != "Bot" {
		t.Fatalf("commit touches %v by %s/%s", stats, c.Author, c.Committer)
	}
}
