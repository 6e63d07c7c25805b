package source

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// treeFiles reads every regular file under dir, by slash path.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("read the tree at %s: %v", dir, err)
	}
	return out
}

func TestATreeBeingRenderedSurvivesFetchesThatPruneTheRepository(t *testing.T) {
	src := newTestRepo(t)
	clock := newFakeClock()
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), Clock: clock.Now, Keep: 1})
	ctx := context.Background()
	files := map[string]string{"docker-compose.yml": "services: {}\n", "conf/app.conf": "a=1\n", "env/.env": "X=1\n"}
	src.write(files).commit("rendered")

	// The render of one application holds this revision...
	reading, err := f.Fetch(ctx, Request{RepoURL: src.dir})
	if err != nil {
		t.Fatal(err)
	}
	// ...while another application's fetches move the repository on, each
	// pruning down to Keep.
	var last *Revision
	for i := range 3 {
		src.write(map[string]string{"docker-compose.yml": fmt.Sprintf("services: {} # %d\n", i)}).commit(fmt.Sprint("move ", i))
		clock.Advance(time.Second)
		r, err := f.Fetch(ctx, Request{RepoURL: src.dir, Revision: "master"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Commit == reading.Commit {
			t.Fatalf("fetch %d did not move to a new commit", i)
		}
		last.Release()
		last = r
	}
	got := treeFiles(t, reading.Dir)
	if len(got) != len(files) {
		t.Errorf("the leased tree holds %d files, want %d: %v", len(got), len(files), got)
	}
	for name, want := range files {
		if got[name] != want {
			t.Errorf("leased tree: %s = %q, want %q", name, got[name], want)
		}
	}

	// Released, it is pruned like any other old tree.
	reading.Release()
	reading.Release() // a second release is harmless
	clock.Advance(time.Second)
	if _, err := f.Fetch(ctx, Request{RepoURL: src.dir, Revision: "master"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(reading.Dir); !os.IsNotExist(err) {
		t.Errorf("the released tree was kept: stat = %v", err)
	}
	if _, err := os.Stat(last.Dir); err != nil {
		t.Errorf("the newest tree is gone: %v", err)
	}
}

func TestReleaseOfARevisionTheFetcherDidNotMakeDoesNothing(t *testing.T) {
	var nilRev *Revision
	nilRev.Release()
	(&Revision{Commit: "x"}).Release()
}
