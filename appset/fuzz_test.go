package appset

import (
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// FuzzFillTakesParametersLiterally fills a set's template with parameters
// a repository chooses (a directory path and its base name, a pull
// request's branch): whatever their text, it is substituted as it is and
// never read as template text itself, so a directory named "{{ .x }}" or
// a branch holding template actions cannot reach other parameters or
// functions. The template is the trusted applications file's; the fuzzer
// varies only what the repository controls.
func FuzzFillTakesParametersLiterally(f *testing.F) {
	for _, s := range [][2]string{
		{"apps/web", "main"},
		{"{{ .branch }}", "{{ .path }}"},
		{"a/{{ printf \"%s\" .basename }}", "{{ range 9 }}x{{ end }}"},
		{"", ""},
		{"x}}{{", "{{/* */}}"},
		{"é/\x00/..", "feature/<script>"},
	} {
		f.Add(s[0], s[1])
	}
	tpl := application.Application{
		Name:   "app-{{ .basename | lower }}",
		Stack:  "{{ .basename }}-{{ .branch }}",
		Source: application.Source{RepoURL: "https://h/x.git", Revision: "{{ .branch }}", Path: "{{ .path }}"},
	}
	f.Fuzz(func(t *testing.T, dir, branch string) {
		base := dir
		if i := strings.LastIndex(dir, "/"); i >= 0 {
			base = dir[i+1:]
		}
		a, err := Fill(tpl, Params{"path": dir, "basename": base, "branch": branch})
		if err != nil {
			t.Fatalf("fill with parameters %q, %q: %v", dir, branch, err)
		}
		if a.Name != "app-"+strings.ToLower(base) || a.Stack != base+"-"+branch ||
			a.Source.Path != dir || a.Source.Revision != branch || a.Source.RepoURL != tpl.Source.RepoURL {
			t.Fatalf("parameters %q, %q were not taken literally: %+v", dir, branch, a)
		}
	})
}
