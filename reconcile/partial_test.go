package reconcile

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/source"
)

// The values repository need hold only the directory common to its files
// when its tree is over the budget; files at its root need all of it.
func TestValuesDir(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{nil, ""},
		{[]string{"values.yaml"}, ""},
		{[]string{"env/prod/values.yaml"}, "env/prod"},
		{[]string{"env/prod/values.yaml", "env/prod/more/x.yaml"}, "env/prod"},
		{[]string{"env/prod/values.yaml", "env/staging/values.yaml"}, "env"},
		{[]string{"env/prod/values.yaml", "other/values.yaml"}, ""},
		{[]string{"env/prod/values.yaml", "top.yaml"}, ""},
		{[]string{"./env//prod/../prod/v.yaml"}, "env/prod"},
		{[]string{"envx/a.yaml", "env/b.yaml"}, ""},
	} {
		if got := valuesDir(tc.files); got != tc.want {
			t.Errorf("valuesDir(%q) = %q, want %q", tc.files, got, tc.want)
		}
	}
}

// A render that fails on a partial tree says why files may be missing,
// and keeps the failure it wraps.
func TestPartialHint(t *testing.T) {
	err := partialHint(os.ErrNotExist, &source.Revision{Partial: "good"})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "only good was written") {
		t.Errorf("partialHint = %v", err)
	}
	if err := partialHint(os.ErrNotExist, &source.Revision{}); err != os.ErrNotExist {
		t.Errorf("partialHint on a whole tree = %v, want the error unchanged", err)
	}
}
