package reconcile

import (
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/capability"
)

// A backend with nothing but charts.Backend lists, before its first pass and
// after it, every capability of the table except those refining one it
// lacks too, each in the table's words.
func TestMinimalBackendStatusListsTheWholeTable(t *testing.T) {
	_, _, c := shopOnMinimal(t, true)
	st, _ := c.Status("shop")
	before := st.Unavailable
	res := mustReconcile(t, c, "shop")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var want []string
	for _, d := range capability.All() {
		if d.Within == "" {
			want = append(want, d.Unavailable().Error())
		}
	}
	for name, got := range map[string][]string{"before the first pass": before, "after a pass": res.Status.Unavailable} {
		if !slices.Equal(got, want) {
			t.Errorf("%s, status lists\n%q\nwant\n%q", name, got, want)
		}
	}
}
