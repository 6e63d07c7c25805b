package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/chartrepo/chartrepotest"
)

// renderOut runs `flotilla render` with opts and returns stdout, failing
// the test on a non-zero exit.
func renderOut(t *testing.T, opts renderOptions) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if opts.Output == "" {
		opts.Output = "yaml"
	}
	if opts.Revision == 0 {
		opts.Revision = 1
	}
	if code := runRender(context.Background(), opts, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	return out.String(), errb.String()
}

func TestRenderOfAPackagedChartPrintsWhatTheChartDirectoryDoes(t *testing.T) {
	flags := chartFlags{ValueFiles: []string{"values-eu.yaml"}, Set: []string{"web.replicas=3"}}
	fromDir, _ := renderOut(t, renderOptions{Path: exampleChart, Stack: "shop-eu", chartFlags: flags})

	dest := t.TempDir()
	var out, errb bytes.Buffer
	if code := runChartPackage(t.Context(), chartPackageOptions{Dir: copyChart(t), Destination: dest}, &out, &errb); code != exitOK {
		t.Fatalf("package: %s", errb.String())
	}
	pkg := filepath.Join(dest, "shop-0.1.0.tgz")
	fromPkg, _ := renderOut(t, renderOptions{Path: pkg, Stack: "shop-eu", chartFlags: flags})
	if fromPkg != fromDir {
		t.Fatalf("package renders differently:\n%s\nvs\n%s", fromPkg, fromDir)
	}
	if !strings.Contains(fromPkg, "replicas: 3") || !strings.Contains(fromPkg, "APP_MESSAGE: hallo") {
		t.Fatalf("values not applied:\n%s", fromPkg)
	}
	// Without --stack a package is named for its chart, not its file.
	named, _ := renderOut(t, renderOptions{Path: pkg})
	if !strings.Contains(named, "# manifest of stack shop\n") {
		t.Fatalf("stack name: %s", named[:60])
	}

	// A local values file from elsewhere goes after --values.
	extra := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(extra, []byte("web:\n  message: mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mine, _ := renderOut(t, renderOptions{Path: pkg, chartFlags: chartFlags{ValueFiles: []string{"values-eu.yaml"}, ExtraValues: []string{extra}}})
	if !strings.Contains(mine, "APP_MESSAGE: mine") {
		t.Fatal("--extra-values not applied")
	}

	// A value file that is not in the package is named with the package.
	errb.Reset()
	code := runRender(context.Background(), renderOptions{Path: pkg, Output: "yaml", chartFlags: chartFlags{ValueFiles: []string{"../x.yaml"}, Revision: 1}}, &out, &errb)
	if code != exitFailed || !strings.Contains(errb.String(), "shop-0.1.0.tgz") || !strings.Contains(errb.String(), "must be inside it") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestRenderOfAChartFromARepositoryFallsBackOnTheCacheOffline(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for _, name := range []string{"Chart.yaml", "values.yaml", "values.schema.json", "values-eu.yaml", "files/web.conf",
		"templates/_helpers.tpl", "templates/web.yaml", "templates/worker.yaml", "templates/network.yaml"} {
		data, err := os.ReadFile(filepath.Join(exampleChart, name))
		if err != nil {
			t.Fatal(err)
		}
		files["shop/"+name] = string(data)
	}
	chartrepotest.Publish(t, dir, "shop", files)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	cache := t.TempDir()
	flags := chartFlags{Repo: srv.URL, Chart: "shop", Version: "~0.1", Insecure: true, CacheDir: cache, ValueFiles: []string{"values-eu.yaml"}}
	fromRepo, notes := renderOut(t, renderOptions{Stack: "shop-eu", chartFlags: flags})
	fromDir, _ := renderOut(t, renderOptions{Path: exampleChart, Stack: "shop-eu", chartFlags: chartFlags{ValueFiles: []string{"values-eu.yaml"}}})
	if fromRepo != fromDir || !strings.Contains(notes, "chart shop 0.1.0 (sha256:") {
		t.Fatalf("repository render differs or no note (%s):\n%s", notes, fromRepo)
	}

	srv.Close()
	offline, notes := renderOut(t, renderOptions{Stack: "shop-eu", chartFlags: flags})
	if offline != fromDir || !strings.Contains(notes, "from the chart cache") || !strings.Contains(notes, chartrepo.ErrUnreachable.Error()) {
		t.Fatalf("offline render (%s)", notes)
	}
	flags.CacheDir = t.TempDir()
	var out, errb bytes.Buffer
	if code := runRender(context.Background(), renderOptions{Output: "yaml", chartFlags: flags}, &out, &errb); code != exitFailed || !strings.Contains(errb.String(), "repository unreachable") {
		t.Fatalf("offline with an empty cache: exit %d: %s", code, errb.String())
	}
	if code := runRender(context.Background(), renderOptions{Output: "yaml", chartFlags: chartFlags{Chart: "shop"}}, &out, &errb); code != exitMisuse {
		t.Fatalf("--chart without --repo: exit %d", code)
	}
}

func TestChartToolsFetchRepositoryDependenciesAndVendorFilePaths(t *testing.T) {
	served := t.TempDir()
	chartrepotest.Publish(t, served, "cache", map[string]string{
		"cache/Chart.yaml":           "apiVersion: v2\nname: cache\nversion: 0.3.1\n",
		"cache/values.yaml":          "port: 6379\n",
		"cache/templates/cache.yaml": "services:\n  cache:\n    image: flotilla-test/app:1\n    command: [serve, ':{{ .Values.port }}']\n",
	})
	srv := httptest.NewServer(http.FileServer(http.Dir(served)))
	defer srv.Close()

	repo := t.TempDir()
	for name, text := range map[string]string{
		"site/Chart.yaml": "apiVersion: v2\nname: site\nversion: 1.0.0\ndependencies:\n" +
			"  - {name: cache, version: ~0.3, repository: " + srv.URL + "}\n" +
			"  - {name: common, version: \"1.0.0\", repository: \"file://../common\"}\n",
		"site/values.yaml":            "cache:\n  port: 7000\n",
		"site/templates/web.yaml":     "services:\n  web:\n    image: flotilla-test/app:1\n    environment: {CACHE: 'cache:{{ .Values.cache.port }}'}\n",
		"common/Chart.yaml":           "apiVersion: v2\nname: common\nversion: 1.0.0\n",
		"common/templates/_names.tpl": "{{- define \"common.name\" -}}{{ .Release.Name }}{{- end -}}\n",
		"common/templates/side.yaml":  "services:\n  side:\n    image: flotilla-test/app:1\n    environment: {NAME: '{{ include \"common.name\" . }}'}\n",
	} {
		p := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	site, cache := filepath.Join(repo, "site"), t.TempDir()
	var out, errb bytes.Buffer
	// The chart's parent is the root by default: common/ is inside it.
	if code := runChartLint(t.Context(), chartLintOptions{Dir: site, CacheDir: cache, Insecure: true}, &out, &errb); code != exitOK {
		t.Fatalf("lint: exit %d: %s", code, errb.String())
	}
	if code := runChartLint(t.Context(), chartLintOptions{Dir: site, Root: site, CacheDir: cache, Insecure: true}, &out, &errb); code != exitFailed ||
		!strings.Contains(errb.String(), "leaves the repository") {
		t.Fatalf("lint with the root at the chart: exit %d: %s", code, errb.String())
	}
	dest := t.TempDir()
	errb.Reset()
	if code := runChartPackage(t.Context(), chartPackageOptions{Dir: site, Destination: dest, CacheDir: cache, Insecure: true}, &out, &errb); code != exitOK {
		t.Fatalf("package: exit %d: %s", code, errb.String())
	}
	fromDir, _ := renderOut(t, renderOptions{Path: site, Root: repo, Stack: "site", chartFlags: chartFlags{CacheDir: cache, Insecure: true}})
	// The package holds common (vendored from file://) but not cache, which
	// the render fetches from the repository again.
	fromPkg, _ := renderOut(t, renderOptions{Path: filepath.Join(dest, "site-1.0.0.tgz"), Stack: "site", chartFlags: chartFlags{CacheDir: t.TempDir(), Insecure: true}})
	if fromPkg != fromDir {
		t.Fatalf("package renders differently:\n%s\nvs\n%s", fromPkg, fromDir)
	}
	for _, want := range []string{"CACHE: cache:7000", "NAME: site", ":7000"} {
		if !strings.Contains(fromPkg, want) {
			t.Errorf("render lacks %q:\n%s", want, fromPkg)
		}
	}
}

func TestRenderOfAChartNamesFieldsTheDeclaredAPIVersionDrops(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
		"templates/web.yaml": "services:\n  probe:\n    image: nginx:1.25\n    healthcheck:\n      test: [CMD, 'true']\n      start_interval: 2s\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr := renderOut(t, renderOptions{Path: dir, Stack: "x", APIVersion: "1.41"})
	if !strings.Contains(stderr, "warning: service probe: healthcheck.start_interval needs engine API 1.44") {
		t.Fatalf("stderr:\n%s", stderr)
	}
}
