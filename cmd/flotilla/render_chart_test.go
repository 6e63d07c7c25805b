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
	if code := runChartPackage(chartPackageOptions{Dir: copyChart(t), Destination: dest}, &out, &errb); code != exitOK {
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
