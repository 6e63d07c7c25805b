package reconcile

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// countingServer counts the requests that reach it.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// A chart's dependency repositories, and the archives their indexes name,
// are held to the project's sourceRepos: a refused one is never asked
// for anything, and the refusal names the application's Chart.yaml, the
// dependency and the project.
func TestADependencyOutsideTheProjectsSourceReposIsRefusedBeforeAnyRequest(t *testing.T) {
	repo := newServedCharts(t)
	repo.publish("1.0.0")
	elsewhere, hits := countingServer(t, http.FileServer(http.Dir(repo.dir)))
	// The granted repository's index names an archive on another host.
	ix, err := os.ReadFile(filepath.Join(repo.dir, "index.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	offHost := t.TempDir()
	if err := os.WriteFile(filepath.Join(offHost, "index.yaml"), []byte(strings.ReplaceAll(string(ix), "- web-1.0.0.tgz", "- "+elsewhere.URL+"/web-1.0.0.tgz")), 0o644); err != nil {
		t.Fatal(err)
	}
	granted, grantedHits := countingServer(t, http.FileServer(http.Dir(offHost)))

	for _, tc := range []struct {
		name, dep string
		hits      *atomic.Int64
		want      []string
	}{
		{"a repository outside sourceRepos", elsewhere.URL, hits, []string{"repository " + elsewhere.URL + " is outside project \"site\""}},
		{"an archive on another host", granted.URL, hits, []string{"archive " + elsewhere.URL + "/web-1.0.0.tgz", "neither under the dependency's repository"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := chartrepo.New(chartrepo.Options{CacheDir: t.TempDir(), BackoffMin: time.Millisecond, BackoffMax: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			b := chartstest.NewMinimal()
			f := newFakeFetcher()
			f.commit(t, parentWithDependency(tc.dep, "~1.0"))
			app := testApp("site", true)
			app.Source.Path = "chart"
			app.Source.Chart = &application.Chart{Insecure: true}
			app.Project = &application.ProjectTerms{Name: "site", SourceRepos: []string{"https://git.example.com/*", granted.URL}}
			c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Charts: cl, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
			if err != nil {
				t.Fatal(err)
			}
			before := tc.hits.Load()
			res := mustReconcile(t, c, "site")
			if KindOf(res.Err) != Stalled || b.Writes() != 0 {
				t.Fatalf("%+v, %d writes: want a stalled refusal, no write", res, b.Writes())
			}
			for _, w := range append(tc.want, "chart/Chart.yaml", "dependency web", `application "site"`, ErrOutsideProject.Error()) {
				if !strings.Contains(res.Status.LastError, w) {
					t.Errorf("error %q lacks %q", res.Status.LastError, w)
				}
			}
			if n := tc.hits.Load() - before; n != 0 {
				t.Errorf("the refused host got %d requests", n)
			}
		})
	}
	if grantedHits.Load() == 0 {
		t.Error("the granted repository's index was never read: the second case tested nothing")
	}
}

// Without a project, or with a project that lists no sourceRepos, a
// dependency is fetched as before; a granted one is fetched too.
func TestADependencyInsideTheProjectsSourceReposIsFetched(t *testing.T) {
	repo := newServedCharts(t)
	repo.publish("1.0.0")
	for _, pr := range []*application.ProjectTerms{nil, {Name: "site"}, {Name: "site", SourceRepos: []string{repo.srv.URL}}} {
		cl, err := chartrepo.New(chartrepo.Options{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		f := newFakeFetcher()
		f.commit(t, parentWithDependency(repo.srv.URL, "~1.0"))
		app := testApp("site", true)
		app.Source.Path = "chart"
		app.Source.Chart = &application.Chart{Insecure: true}
		app.Project = pr
		c, err := New(Options{ControllerID: "ctl", Backend: chartstest.NewMinimal(), Fetcher: f, Charts: cl, Tick: 10 * time.Millisecond, Logger: quiet}, []application.Application{app})
		if err != nil {
			t.Fatal(err)
		}
		if res := mustReconcile(t, c, "site"); res.Err != nil {
			t.Fatalf("project %+v: %v", pr, res.Err)
		}
	}
}

func TestArchiveAllowedOnlyUnderTheRepositoryOrInSourceRepos(t *testing.T) {
	pr := &application.ProjectTerms{Name: "p", SourceRepos: []string{"https://charts.example.com/stable", "https://github.com/org/charts/releases/download/*/*"}}
	for raw, ok := range map[string]bool{
		"https://charts.example.com/stable/web-1.0.0.tgz":                     true,
		"https://charts.example.com/stable/sub/web-1.0.0.tgz":                 true,
		"https://github.com/org/charts/releases/download/web-1.0.0/web.tgz":   true,
		"https://charts.example.com/stablex/web-1.0.0.tgz":                    false,
		"http://charts.example.com/stable/web-1.0.0.tgz":                      false,
		"https://charts.example.com.evil.test/stable/web-1.0.0.tgz":           false,
		"https://169.254.169.254/latest/meta-data/":                           false,
		"https://github.com/other/charts/releases/download/web-1.0.0/web.tgz": false,
		"https://charts.example.com/stable/%2e%2e/private/web-1.0.0.tgz":      false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := archiveAllowed(pr, "https://charts.example.com/stable/", u); (err == nil) != ok {
			t.Errorf("%s: err %v, want allowed %v", raw, err, ok)
		}
	}
}
