package appset

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/source"
)

// gitRepo is a repository on disk driven with the git command line, the
// way a forge's refs appear to the generators.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required: %v", err)
	}
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (an empty body removes the file) and commits.
func (r *gitRepo) commit(files map[string]string) string {
	r.t.Helper()
	for name, body := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if body == "" {
			if err := os.RemoveAll(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", "change")
	return r.git("rev-parse", "HEAD")
}

func newFetcher(t *testing.T) *source.Fetcher {
	return source.New(source.Options{CacheDir: t.TempDir()})
}

func parse(t *testing.T, text string) *application.File {
	t.Helper()
	f, err := application.Parse("apps.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func names(apps []application.Application) []string {
	out := make([]string, len(apps))
	for i, a := range apps {
		out[i] = a.Name
	}
	return out
}

const dirSet = `apiVersion: flotilla/v1
applicationSets:
  - name: services
    generators:
      - git:
          repoURL: REPO
          revision: main
          directories: ["apps/*"]
          exclude: ["apps/legacy"]
    template:
      name: "svc-{{.basename}}"
      source: {repoURL: REPO, revision: main, path: "{{.path}}"}
      syncPolicy: {automated: {}}
`

func TestGitGeneratorMakesOneApplicationPerDirectoryAndFollowsCommits(t *testing.T) {
	repo := newGitRepo(t)
	repo.commit(map[string]string{
		"apps/web/compose.yaml": "services: {}\n", "apps/api/compose.yaml": "services: {}\n",
		"apps/db/compose.yaml": "services: {}\n", "apps/legacy/compose.yaml": "services: {}\n",
		"apps/README.md": "not a directory\n",
	})
	f := parse(t, strings.ReplaceAll(dirSet, "REPO", repo.dir))
	e := New(Options{Fetcher: newFetcher(t)})
	apps, err := e.Expand(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(apps); !slices.Equal(got, []string{"svc-api", "svc-db", "svc-web"}) {
		t.Fatalf("applications %v, want svc-api svc-db svc-web", got)
	}
	a := apps[2]
	if a.Source.Path != "apps/web" || a.Generated == nil || a.Generated.Set != "services" || a.Generated.Prune {
		t.Fatalf("generated application %+v (generated %+v)", a, a.Generated)
	}
	if f.ApplicationSets[0].Template.Source.Path != "{{.path}}" {
		t.Fatal("expanding changed the template")
	}
	if _, err := f.Expanded(apps); err != nil {
		t.Fatalf("generated applications do not validate: %v", err)
	}

	repo.commit(map[string]string{"apps/cache/compose.yaml": "services: {}\n", "apps/db": ""})
	apps, err = e.Expand(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(apps); !slices.Equal(got, []string{"svc-api", "svc-cache", "svc-web"}) {
		t.Fatalf("after adding cache and removing db: %v", got)
	}
}

func TestAFailingGeneratorKeepsTheLastGoodApplicationsAndSaysSo(t *testing.T) {
	repo := newGitRepo(t)
	repo.commit(map[string]string{"apps/web/compose.yaml": "services: {}\n"})
	f := parse(t, strings.ReplaceAll(dirSet, "REPO", repo.dir))
	e := New(Options{Fetcher: newFetcher(t)})
	if _, err := e.Expand(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(repo.dir); err != nil {
		t.Fatal(err)
	}
	apps, err := e.Expand(context.Background(), f)
	var se *SetError
	if !errors.As(err, &se) || se.Set != "services" || !se.Kept {
		t.Fatalf("error %v, want a SetError of services that kept its applications", err)
	}
	if got := names(apps); !slices.Equal(got, []string{"svc-web"}) {
		t.Fatalf("applications while the repository is gone: %v", got)
	}
	// A set that never succeeded generates nothing, and says so.
	_, err = New(Options{Fetcher: newFetcher(t)}).Expand(context.Background(), f)
	if !errors.As(err, &se) || se.Kept {
		t.Fatalf("error %v, want a SetError that kept nothing", err)
	}
}

type staticRefs map[string]string

func (s staticRefs) ListRefs(context.Context, string, *application.Credentials) (map[string]string, error) {
	return s, nil
}

func TestMatrixCombinesTwoGeneratorsAndSwarmsFollowTheKnownSwarms(t *testing.T) {
	f := parse(t, `apiVersion: flotilla/v1
applicationSets:
  - name: fleet
    prune: true
    generators:
      - matrix:
          generators:
            - swarms: {names: ["eu-*", "local"]}
            - list: {elements: [{app: web}, {app: api}]}
    template:
      name: "{{.app}}-{{.name}}"
      source: {repoURL: "https://h/x.git", path: "{{.app}}"}
`)
	e := New(Options{Swarms: func() []string { return []string{"local", "eu-1", "us-1"} }})
	apps, err := e.Expand(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(apps); !slices.Equal(got, []string{"web-local", "api-local", "web-eu-1", "api-eu-1"}) {
		t.Fatalf("applications %v", got)
	}
	if !apps[0].Generated.Prune {
		t.Fatal("prune: true was not carried to the generated application")
	}
}

func TestATemplateNamingAMissingParameterOrTwoElementsWithOneNameFailsTheSet(t *testing.T) {
	for _, tc := range []struct{ tpl, want string }{
		{`name: "{{.nope}}"`, "nope"},
		{`name: "same"`, "both make an application named"},
	} {
		f := parse(t, `apiVersion: flotilla/v1
applicationSets:
  - name: s
    generators:
      - list: {elements: [{a: x}, {a: y}]}
    template:
      `+tc.tpl+`
      source: {repoURL: "https://h/x.git"}
`)
		apps, err := New(Options{}).Expand(context.Background(), f)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(apps) != 0 {
			t.Errorf("template %s: apps %v, error %v; want %q", tc.tpl, names(apps), err, tc.want)
		}
	}
}
