package daemon

import (
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// The warning names exactly the groups that share the controller's key:
// not an application with its own key, not a project with one, not a
// pull-request preview (which decrypts with no key but its set's).
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
		{Name: "data-pr-4", Project: data, Generated: &application.Generated{Set: "previews", Preview: true}},
	}
	if got, want := sharedSOPSKey(apps), []string{noProject, "web"}; !slices.Equal(got, want) {
		t.Errorf("shared by %q, want %q", got, want)
	}
	if got := sharedSOPSKey(apps[:1]); len(got) != 0 {
		t.Errorf("a keyed project alone: shared by %q", got)
	}
	if got := sharedSOPSKey(apps[3:]); !slices.Equal(got, []string{noProject}) {
		t.Errorf("etl (own key), tools and a preview of data: shared by %q, want only %q", got, noProject)
	}
}
