package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// noFetch is a fetcher for a controller whose loop never runs.
type noFetch struct{}

func (noFetch) Fetch(context.Context, source.Request) (*source.Revision, error) {
	return nil, errors.New("not fetched in this test")
}

const reloadBase = `apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: https://git.example.com/shop.git, path: deploy}
    stack: shop
`

func names(apps []application.Application) []string {
	out := make([]string, 0, len(apps))
	for _, a := range apps {
		out = append(out, a.Name)
	}
	slices.Sort(out)
	return out
}

// FuzzReloadApplications feeds arbitrary bytes to the reload path of a
// running controller's applications file. It must never panic; a file that
// does not parse must leave the loaded set exactly as it was; one that does
// must become the set, application for application.
func FuzzReloadApplications(f *testing.F) {
	if data, err := os.ReadFile("../application/testdata/full.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(reloadBase))
	f.Add([]byte(reloadBase + "  - name: blog\n    source: {repoURL: https://git.example.com/blog.git}\n    stack: blog\n"))
	f.Add([]byte(reloadBase + "  - name: shop\n    source: {repoURL: https://git.example.com/x.git}\n    stack: other\n"))
	f.Add([]byte("apiVersion: flotilla/v1\napplications: []\n"))
	f.Add([]byte("apiVersion: flotilla/v1\napplications: &a [*a]\n"))
	f.Add([]byte("{"))
	f.Add([]byte(""))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	first, err := application.Parse("apps.yaml", []byte(reloadBase))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctl, err := reconcile.New(reconcile.Options{Backend: chartstest.NewMinimal(), Fetcher: noFetch{}, Logger: log}, first.Applications)
		if err != nil {
			t.Fatal(err)
		}
		before := names(ctl.Applications())
		replaced := reloadApplications("apps.yaml", data, ctl, nil, log)
		after := names(ctl.Applications())
		file, perr := application.Parse("apps.yaml", data)
		switch {
		case replaced != (perr == nil):
			t.Fatalf("reload replaced=%v but Parse error %v", replaced, perr)
		case !replaced && !slices.Equal(before, after):
			t.Fatalf("an invalid file changed the loaded set from %v to %v", before, after)
		case replaced && !slices.Equal(after, names(file.Applications)):
			t.Fatalf("loaded %v, the file declares %v", after, names(file.Applications))
		}
	})
}

func TestReloadApplications_newProjectsReachThePolicy(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	first, err := application.Parse("apps.yaml", []byte(reloadBase))
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := reconcile.New(reconcile.Options{Backend: chartstest.NewMinimal(), Fetcher: noFetch{}, Logger: log}, first.Applications)
	if err != nil {
		t.Fatal(err)
	}
	policy := access.NewPolicy(nil)
	ci := access.Identity{Name: "ci-shop"}
	if policy.Decide(ci, access.Operate, "shop") != access.NotFound {
		t.Fatal("a binding before any project")
	}
	data := "apiVersion: flotilla/v1\nprojects:\n  - {name: shop, applications: [shop], roles: [{role: operator, tokens: [ci-shop]}]}\n" +
		strings.TrimPrefix(reloadBase, "apiVersion: flotilla/v1\n")
	if !reloadApplications("apps.yaml", []byte(data), ctl, policy, log) {
		t.Fatal("the reload was refused")
	}
	if d := policy.Decide(ci, access.Operate, "shop"); d != access.Allow {
		t.Fatalf("after the reload: %s, want allow", d)
	}
}
