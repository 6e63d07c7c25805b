package source

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestContain(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "app", "conf"), 0o755))
	must(os.WriteFile(filepath.Join(root, "app", "conf", "a.conf"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "app", "escape")))
	must(os.Symlink(outside, filepath.Join(root, "app", "escdir")))
	must(os.Symlink("conf/a.conf", filepath.Join(root, "app", "inside")))
	must(os.Symlink(filepath.Join(outside, "not-yet"), filepath.Join(root, "app", "dangling")))

	ok := []string{"app/conf/a.conf", "app/inside", "app/../app/conf/a.conf", "app/missing.txt"}
	for _, rel := range ok {
		if _, err := Contain(root, rel); err != nil {
			t.Errorf("Contain(%q) = %v, want ok", rel, err)
		}
	}
	bad := []string{"../x", "app/../../etc/passwd", "/etc/passwd", "app/escape", "app/escdir/secret", "app/escdir/new", "app/dangling", "app/dangling/x"}
	for _, rel := range bad {
		if _, err := Contain(root, rel); !errors.Is(err, ErrOutsideRepository) {
			t.Errorf("Contain(%q) = %v, want ErrOutsideRepository", rel, err)
		}
	}
}
