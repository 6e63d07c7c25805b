package chartengine

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/fault"
)

// FuzzChartTemplate renders the example chart with one more template of
// arbitrary text, over arbitrary values: a chart either fails to load or
// render with a *fault.Error, or renders the same manifest twice. The
// budget is made small here so that the fuzzer spends its time on shapes,
// not on waiting. How long a render takes is not asserted: a loop that
// calls nothing and writes nothing ({{ range 100000000 }}{{ end }}) is
// beyond the in-process budget by design and is bounded by the render
// box's child process (renderbox TestRenderDeadline, e2e hostile renders),
// and a timed assertion fails on a busy machine (it did, under -race in
// CI: 32 s for that seed). So no seed loops like that.
func FuzzChartTemplate(f *testing.F) {
	for _, s := range [][2]string{
		{"services:\n  extra:\n    image: {{ .Values.image.repository }}:1\n", ""},
		{"{{ range $i := until 5 }}x{{ end }}", "web: {replicas: 2}\n"},
		{"{{ $s := \"ab\" }}{{ range until 40 }}{{ $s = cat $s $s }}{{ end }}{{ $s }}", ""},
		{"{{ template \"fuzz.yaml\" . }}", ""},
		{"{{ define \"t\" }}{{ template \"t\" . }}{{ end }}{{ template \"t\" . }}", ""},
		{"{{ .Values.nope.deeper }}", "nope: 1\n"},
		{"{{ toYaml .Values | indent 2 }}", "a: {b: [1, 2, {c: d}]}\n"},
		{"{{ fail \"no\" }}", ""},
		{"{{ include \"shop.image\" . | repeat 1000000 }}", ""},
	} {
		f.Add(s[0], s[1])
	}
	oldTime, oldBuilt := maxRenderTime, maxBuilt
	maxRenderTime, maxBuilt = time.Second, 4<<20
	f.Cleanup(func() { maxRenderTime, maxBuilt = oldTime, oldBuilt })
	f.Fuzz(func(t *testing.T, tpl, values string) {
		root := copyExample(t, map[string]string{filepath.ToSlash(filepath.Join("chart", "templates", "fuzz.yaml")): tpl})
		var fe *fault.Error
		c, err := Load(root, "chart")
		if err != nil {
			if !errors.As(err, &fe) {
				t.Fatalf("load error is %T, not a *fault.Error: %v", err, err)
			}
			return
		}
		d := Dir{Root: root, Path: "chart"}
		if d.Values, err = parseValues("inline", []byte(values)); err != nil {
			return
		}
		a, err := c.Render(d, Release{Name: "shop", Revision: 1})
		if err != nil {
			if !errors.As(err, &fe) {
				t.Fatalf("render error is %T, not a *fault.Error: %v", err, err)
			}
			return
		}
		b, err := c.Render(d, Release{Name: "shop", Revision: 1})
		if err != nil || a.Manifest != b.Manifest {
			t.Fatalf("second render differs (%v)", err)
		}
	})
}
