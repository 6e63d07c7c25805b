package source

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/gittest"
)

// A git bomb beside an application's directory, in a monorepo, refuses only
// the applications that read it: the application's path alone is written,
// at its place, once, with a warning; a request for the whole tree is still
// refused having written nothing.
func TestFetchWritesOnlyThePathWhenABombIsBesideIt(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	sha := repo.CommitGraft("bomb beside", map[string]string{
		"app/compose.yml":    "services: {}\n",
		"app/conf/app.conf":  "a=1\n",
		"common.env":         "X=1\n",
		"bomb/README.md":     "boom\n",
		"application/x.yml":  "not app/\n",
		"app-other/file.txt": "sibling with a common prefix\n",
	}, map[string]string{"bomb/inner": repo.Bomb(10, 9)})
	var logs bytes.Buffer
	f := New(Options{CacheDir: t.TempDir(), Clock: newFakeClock().Now,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	start := time.Now()

	rev, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: "app"})
	if err != nil {
		t.Fatalf("Fetch with Path app = %v, want the path alone", err)
	}
	defer rev.Release()
	if rev.Partial != "app" {
		t.Errorf("Partial = %q, want app", rev.Partial)
	}
	got := treeFiles(t, rev.Dir)
	want := map[string]string{"app/compose.yml": "services: {}\n", "app/conf/app.conf": "a=1\n"}
	if len(got) != len(want) {
		t.Errorf("the tree holds %v, want only %v", keys(got), keys(want))
	}
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s = %q, want %q", name, got[name], content)
		}
	}
	if p, err := Contain(rev.Dir, "app/compose.yml"); err != nil || readFile(t, filepath.Dir(p), "compose.yml") == "" {
		t.Errorf("Dir joined with the path does not read as the whole tree's: %v", err)
	}
	if n := strings.Count(logs.String(), "wrote only the requested path"); n != 1 {
		t.Errorf("warned %d times that only the path was written, want once:\n%s", n, logs.String())
	}

	// Served again from the cache, without measuring or warning again.
	again, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: "./app/"})
	if err != nil {
		t.Fatal(err)
	}
	again.Release()
	if again.Dir != rev.Dir || again.Partial != "app" {
		t.Errorf("second fetch: Dir %s Partial %q, want %s app", again.Dir, again.Partial, rev.Dir)
	}
	if n := strings.Count(logs.String(), "wrote only the requested path"); n != 1 {
		t.Errorf("warned %d times after a second fetch, want once", n)
	}

	// The whole tree is still refused, and adds nothing to the cache.
	before := treeDirs(t, f)
	_, err = f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha})
	if !errors.Is(err, ErrTreeTooLarge) || !strings.Contains(err.Error(), "bomb/inner/") {
		t.Fatalf("Fetch of the whole tree = %v, want ErrTreeTooLarge at bomb/inner/", err)
	}
	if after := treeDirs(t, f); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("refusing the whole tree changed the cache: %v -> %v", before, after)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("took %s", d)
	}
}

// Without a Path, a bomb anywhere refuses the fetch, and nothing is written.
func TestFetchWithoutAPathRefusesABombBesideTheApplication(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	sha := repo.CommitGraft("bomb beside", map[string]string{"app/compose.yml": "services: {}\n"},
		map[string]string{"bomb": repo.Bomb(10, 4)})
	f := budgetFetcher(t, TreeBudget{Entries: 1000})
	for _, p := range []string{"", "."} {
		_, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: p})
		if !errors.Is(err, ErrTreeTooLarge) || !strings.Contains(err.Error(), "more than 1000 files and directories") {
			t.Fatalf("Fetch with Path %q = %v, want ErrTreeTooLarge", p, err)
		}
	}
	assertNoTrees(t, f.cacheDir)
}

// The path itself is measured against the same budget: a bomb under it, a
// path the commit does not have, or one that is a file refuse the fetch
// with ErrTreeTooLarge naming the path, and nothing is written.
func TestFetchRefusesAPathOverBudgetOrMissing(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	sha := repo.CommitGraft("bombs", map[string]string{
		"app/compose.yml": "services: {}\n",
		"file.txt":        "a file\n",
	}, map[string]string{"bomb": repo.Bomb(10, 4), "app/vendor": repo.Bomb(10, 4)})
	f := budgetFetcher(t, TreeBudget{Entries: 1000})
	for _, tc := range []struct{ path, want string }{
		{"app", "path app alone: at app/vendor/"},
		{"bomb", "path bomb alone: at bomb/"},
		{"missing", "path missing alone: path missing: not a directory in the tree"},
		{"app/compose.yml", "not a directory in the tree"},
		{"file.txt/x", "not a directory in the tree"},
	} {
		_, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: tc.path})
		if !errors.Is(err, ErrTreeTooLarge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Fetch with Path %q = %v, want ErrTreeTooLarge saying %q", tc.path, err, tc.want)
		}
	}
	assertNoTrees(t, f.cacheDir)
}

// A tree within the budget is written whole, whatever the path: files the
// application reaches outside its path (../common.env) are there.
func TestFetchWritesASmallTreeWholeWhateverThePath(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	sha := repo.Commit("small", map[string]string{"app/compose.yml": "services: {}\n", "common.env": "X=1\n"})
	f := newTestFetcher(t, nil)
	rev, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer rev.Release()
	if rev.Partial != "" || filepath.Base(rev.Dir) != sha {
		t.Errorf("Dir %s Partial %q, want the whole tree at %s", rev.Dir, rev.Partial, sha)
	}
	if got := readFile(t, rev.Dir, "common.env"); got != "X=1\n" {
		t.Errorf("common.env = %q", got)
	}
}

// A path that leaves the repository is refused before anything is fetched.
func TestFetchRefusesAPathOutsideTheRepository(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	repo.Commit("small", map[string]string{"app/compose.yml": "services: {}\n"})
	f := newTestFetcher(t, nil)
	for _, p := range []string{"..", "../x", "app/../..", "app/../app", "/etc", "/"} {
		_, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Path: p})
		if !errors.Is(err, ErrOutsideRepository) {
			t.Errorf("Fetch with Path %q = %v, want ErrOutsideRepository", p, err)
		}
	}
	assertNoTrees(t, f.cacheDir)
}

// Partial trees are leased and pruned by commit, like whole ones: the paths
// of one commit count once towards Keep, a leased one outlives newer
// commits, and a released one goes once Keep newer commits were served.
func TestPartialTreesArePrunedByCommitAndKeptWhileLeased(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	clock := newFakeClock()
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), Clock: clock.Now, Keep: 1,
		TreeBudget: TreeBudget{Entries: 1000}})
	commit := func(msg string) string {
		return repo.CommitGraft(msg, map[string]string{"a/compose.yml": msg + "\n", "b/compose.yml": msg + "\n"},
			map[string]string{"bomb": repo.Bomb(10, 4)})
	}
	fetch := func(sha, p string) *Revision {
		t.Helper()
		clock.Advance(time.Second)
		rev, err := f.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: p})
		if err != nil {
			t.Fatal(err)
		}
		if rev.Partial != p {
			t.Fatalf("Partial = %q, want %q", rev.Partial, p)
		}
		return rev
	}

	first := commit("first")
	held := fetch(first, "a")
	other := fetch(first, "b")
	other.Release()
	// Both paths of the one commit stay with Keep 1.
	for _, r := range []*Revision{held, other} {
		if _, err := os.Stat(r.Dir); err != nil {
			t.Fatalf("a path of the newest commit was pruned: %v", err)
		}
	}

	second := commit("second")
	fetch(second, "b").Release()
	if got := readFile(t, held.Dir, "a/compose.yml"); got != "first\n" {
		t.Errorf("the leased partial tree reads %q", got)
	}
	if _, err := os.Stat(other.Dir); err != nil {
		t.Errorf("a released path of a leased commit was pruned: %v", err)
	}

	held.Release()
	third := commit("third")
	newest := fetch(third, "a")
	defer newest.Release()
	for _, r := range []*Revision{held, other} {
		if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
			t.Errorf("released tree %s was kept: stat = %v", filepath.Base(r.Dir), err)
		}
	}
	if got := treeDirs(t, f); len(got) != 1 || !strings.HasPrefix(got[0], third) {
		t.Errorf("trees left: %v, want only the newest commit's", got)
	}
}

// A partial tree left by an earlier run is not served: the whole tree may
// fit the budget of this one.
func TestPartialTreesOfAnEarlierRunAreRemoved(t *testing.T) {
	requireUploadPack(t)
	repo := gittest.New(t)
	sha := repo.CommitGraft("bomb", map[string]string{"app/compose.yml": "services: {}\n", "common.env": "X=1\n"},
		map[string]string{"bomb": repo.Bomb(10, 3)})
	cache := t.TempDir()
	small := New(Options{CacheDir: cache, Logger: testLogger(t), TreeBudget: TreeBudget{Entries: 500}})
	rev, err := small.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Partial != "app" {
		t.Fatalf("Partial = %q under the small budget", rev.Partial)
	}
	rev.Release()

	raised := New(Options{CacheDir: cache, Logger: testLogger(t)})
	rev, err = raised.Fetch(t.Context(), Request{RepoURL: repo.Dir, Revision: sha, Path: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer rev.Release()
	if rev.Partial != "" || readFile(t, rev.Dir, "common.env") != "X=1\n" {
		t.Errorf("after raising the budget: Partial %q, want the whole tree", rev.Partial)
	}
	if got := treeDirs(t, raised); len(got) != 1 || got[0] != sha {
		t.Errorf("trees left: %v, want only the whole tree", got)
	}
}

func budgetFetcher(t *testing.T, b TreeBudget) *Fetcher {
	t.Helper()
	return New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), Clock: newFakeClock().Now, TreeBudget: b})
}

// treeDirs lists the trees directories of every repository f caches.
func treeDirs(t *testing.T, f *Fetcher) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(f.cacheDir, "*", "trees", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range matches {
		out = append(out, filepath.Base(m))
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
