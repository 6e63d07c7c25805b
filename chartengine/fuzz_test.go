package chartengine

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/fault"
)

// FuzzChartValues renders the example chart with arbitrary values (a
// values document, and one set key): whatever the values, a render either
// fails with a *fault.Error or gives the same manifest twice. It never
// panics.
func FuzzChartValues(f *testing.F) {
	for _, seed := range []struct{ values, key, val string }{
		{"", "web.message", "hi"},
		{"web: {replicas: 3}\n", "image.tag", "2"},
		{"web: {replicas: many}\n", "worker.replicas", "0"},
		{"env: {A: x, B: y}\n", "env.C", "$HOME"},
		{"- a list\n", "a..b", "1"},
		{"worker: {queue: null}\n", "worker.queue", "null"},
		{"image: {tag: [1, 2]}\n", "image", "true"},
		{"web: &a {message: x}\nworker: *a\n", `web\.x`, "1"},
		{"{{ .Values }}: 1\n", "web.port", "99999"},
		{"web: {ratio: .nan}\nenv: {X: .inf}\n", "env.Y", "-0"},
		{"web: {message: \"{{ fail \\\"x\\\" }}\"}\n", "web.message", "{{ now }}"},
	} {
		f.Add(seed.values, seed.key, seed.val)
	}
	root := copyExample(f, nil)
	c, err := Load(root, "chart")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, values, key, val string) {
		d := Dir{Root: root, Path: "chart", Set: map[string]any{key: ParseSetValue(val)}}
		vals, err := parseValues("inline", []byte(values))
		if err != nil {
			return
		}
		d.Values = vals
		a, err := c.Render(d, Release{Name: "shop", Revision: 1})
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, not a *fault.Error: %v", err, err)
			}
			return
		}
		b, err := c.Render(d, Release{Name: "shop", Revision: 1})
		if err != nil || a.Manifest != b.Manifest || a.ValuesDigest != b.ValuesDigest {
			t.Fatalf("second render differs (%v)", err)
		}
	})
}

// FuzzLoadArchive reads arbitrary bytes as a packaged chart: it either
// loads (and then renders or fails with a *fault.Error) or fails with a
// *fault.Error naming the archive. It never panics.
func FuzzLoadArchive(f *testing.F) {
	root := copyExample(f, nil)
	c, err := Load(root, "chart")
	if err != nil {
		f.Fatal(err)
	}
	var pkg bytes.Buffer
	if _, err := c.Package(&pkg); err != nil {
		f.Fatal(err)
	}
	f.Add(pkg.Bytes())
	f.Add(pkg.Bytes()[:len(pkg.Bytes())/2])
	f.Add([]byte("\x1f\x8b\x08\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ch, err := LoadArchive(bytes.NewReader(data), "fuzz.tgz")
		var fe *fault.Error
		if err != nil {
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.File, "fuzz.tgz") {
				t.Fatalf("error %T names %v: %v", err, fe, err)
			}
			return
		}
		if _, err := ch.Render(Dir{}, Release{Name: "shop", Revision: 1}); err != nil && !errors.As(err, &fe) {
			t.Fatalf("render error is %T: %v", err, err)
		}
	})
}
