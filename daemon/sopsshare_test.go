package daemon

import (
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// The warning names exactly the groups that share the controller's key:
// not an application with its own key, not a project with one.
func TestSharedSOPSKeyNamesTheGroupsThatShareTheControllersKey(t *testing.T) {
	keyed := &application.ProjectTerms{Name: "payments", SOPS: &application.SOPS{AgeKeyFile: "/run/secrets/payments"}}
	web := &application.ProjectTerms{Name: "web"}
	data := &application.ProjectTerms{Name: "data"}
	apps := []application.Application{
		{Name: "pay", Project: keyed},
		{Name: "site", Project: web},
		{Name: "blog", Project: web},
		{Name: "etl", Project: data, SOPS: &application.SOPS{AgeKeyFile: "/run/secrets/etl"}},
		{Name: "tools"},
	}
	if got, want := sharedSOPSKey(apps), []string{noProject, "web"}; !slices.Equal(got, want) {
		t.Errorf("shared by %q, want %q", got, want)
	}
	if got := sharedSOPSKey(apps[:1]); len(got) != 0 {
		t.Errorf("a keyed project alone: shared by %q", got)
	}
}
