package source

import (
	"context"
	"os"
	"os/exec"
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

func TestCommit_signsWithAnSSHKeyThatGitVerifies(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"compose.yaml": "services: {}\n"})
	src.commit("initial")
	origin := bareCopy(t, src)
	dir := t.TempDir()
	for _, kind := range []string{"ed25519", "rsa"} {
		t.Run(kind, func(t *testing.T) {
			key := filepath.Join(dir, kind)
			args := []string{"-q", "-t", kind, "-N", "", "-C", "", "-f", key}
			if kind == "rsa" {
				args = append(args, "-b", "2048")
			}
			if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen: %v\n%s", err, out)
			}
			pub, err := os.ReadFile(key + ".pub")
			if err != nil {
				t.Fatal(err)
			}
			allowed := filepath.Join(dir, kind+".allowed")
			if err := os.WriteFile(allowed, []byte("bot@example.invalid "+string(pub)), 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := Commit(context.Background(), CommitRequest{
				RepoURL: origin, Branch: "master", SigningKeyFile: key,
				Author: application.CommitAuthor{Name: "Bot", Email: "bot@example.invalid"},
				Change: func(_ context.Context, f *Files) (string, error) {
					return "signed by " + kind, f.WriteFile("compose.yaml", []byte("services: {"+kind+": {image: x}}\n"))
				},
			})
			if err != nil || res.Commit == "" {
				t.Fatalf("commit: %+v, %v", res, err)
			}
			out, err := exec.Command("git", "--git-dir", origin, "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed,
				"verify-commit", res.Commit).CombinedOutput()
			if err != nil || !strings.Contains(string(out), `Good "git" signature for bot@example.invalid`) {
				t.Fatalf("git verify-commit: %v\n%s", err, out)
			}
		})
	}
	// A key file that is not a key is refused before anything is cloned,
	// naming the file only.
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nsecretish\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Commit(context.Background(), CommitRequest{RepoURL: origin, Branch: "master", SigningKeyFile: bad,
		Change: func(context.Context, *Files) (string, error) { t.Fatal("Change ran"); return "", nil }})
	if err == nil || strings.Contains(err.Error(), "secretish") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad key: %v", err)
	}
}
