package source

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/gittest"
)

// FuzzMaterialiseHonoursTheBudget writes trees of random shapes (a bomb of
// random fanout and depth grafted beside files of random sizes) under a
// random budget: materialise writes the tree exactly when it is within
// every limit, and a refused tree is ErrTreeTooLarge with nothing left on
// disk. What the tree really holds is counted on a copy written without
// limits, so the check does not trust the measuring it checks.
func FuzzMaterialiseHonoursTheBudget(f *testing.F) {
	f.Add(uint8(2), uint8(2), "hello", int16(0), int16(0), int16(0), int16(0))
	f.Add(uint8(3), uint8(3), "", int16(30), int16(-1), int16(-1), int16(-1))
	f.Add(uint8(1), uint8(4), "x", int16(-1), int16(-1), int16(5), int16(-1))
	f.Add(uint8(4), uint8(2), strings.Repeat("y", 50), int16(-1), int16(120), int16(-1), int16(99))
	f.Add(uint8(2), uint8(1), "z", int16(7), int16(16), int16(4), int16(10))
	f.Fuzz(func(t *testing.T, fanout, levels uint8, content string, entries, bytes, depth, blob int16) {
		repo := gittest.New(t)
		fan, lv := int(fanout%4)+1, int(levels%4)+1
		sha := repo.CommitGraft("shape", map[string]string{"a.txt": content, "d/b.txt": content + content},
			map[string]string{"g/bomb": repo.Bomb(fan, lv)})
		b := TreeBudget{Entries: int(entries), Bytes: int64(bytes), Depth: int(depth), Blob: int64(blob)}.withDefaults()

		s, c := commitObject(t, repo.Dir, sha)
		full := filepath.Join(t.TempDir(), "full")
		if err := materialise(t.Context(), s, c, full, TreeBudget{Entries: -1, Bytes: -1, Depth: -1, Blob: -1}); err != nil {
			t.Fatalf("unlimited materialise: %v", err)
		}
		var n, depthMax int
		var total, largest int64
		err := filepath.WalkDir(full, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == full {
				return err
			}
			rel, _ := filepath.Rel(full, p)
			n++
			depthMax = max(depthMax, strings.Count(filepath.ToSlash(rel), "/")+1)
			if d.Type().IsRegular() {
				fi, err := d.Info()
				if err != nil {
					return err
				}
				total += fi.Size()
				largest = max(largest, fi.Size())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		within := (b.Entries < 0 || n <= b.Entries) && (b.Bytes < 0 || total <= b.Bytes) &&
			(b.Depth < 0 || depthMax <= b.Depth) && (b.Blob < 0 || largest <= b.Blob)

		dst := filepath.Join(t.TempDir(), "tree")
		err = materialise(t.Context(), s, c, dst, b)
		switch {
		case err == nil && !within:
			t.Fatalf("budget %+v: written, but the tree has %d entries, %d bytes, depth %d, largest file %d", b, n, total, depthMax, largest)
		case err == nil:
		case !errors.Is(err, ErrTreeTooLarge):
			t.Fatalf("budget %+v: %v, want nil or ErrTreeTooLarge", b, err)
		case within:
			t.Fatalf("budget %+v: refused (%v), but the tree has %d entries, %d bytes, depth %d, largest file %d", b, err, n, total, depthMax, largest)
		default:
			assertNoTrees(t, filepath.Dir(dst))
		}
	})
}
