package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

const exampleChart = "../../examples/chart"

func TestRenderOfAChartAppliesValuesFilesThenSet(t *testing.T) {
	var out, errb bytes.Buffer
	code := runRender(context.Background(), renderOptions{
		Path: exampleChart, Stack: "shop-eu", Output: "yaml",
		chartFlags: chartFlags{ValueFiles: []string{"values-eu.yaml"}, Set: []string{"worker.replicas=0"}, SetString: []string{"image.tag=2"}, Revision: 1},
	}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"APP_MESSAGE: hallo", "image: flotilla-test/app:2", "replicas: 2", "shop-eu_web.conf-"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "worker") {
		t.Error("worker rendered with worker.replicas=0")
	}
}

func TestRenderRefusesChartFlagsForAComposeProjectAndBadSetPairs(t *testing.T) {
	for _, opts := range []renderOptions{
		{Path: renderFixture, Files: []string{"compose.yaml"}, Output: "yaml", chartFlags: chartFlags{Set: []string{"a=1"}}},
		{Path: exampleChart, Output: "yaml", chartFlags: chartFlags{Set: []string{"novalue"}}},
		{Path: exampleChart, Output: "yaml", chartFlags: chartFlags{Set: []string{"a[0]=1"}}},
	} {
		var out, errb bytes.Buffer
		if code := runRender(context.Background(), opts, &out, &errb); code != exitMisuse {
			t.Errorf("%+v: exit %d (%s)", opts.chartFlags, code, errb.String())
		}
	}
}

func TestRenderOfAChartWithABadValueNamesTheSchemaRule(t *testing.T) {
	var out, errb bytes.Buffer
	code := runRender(context.Background(), renderOptions{
		Path: exampleChart, Output: "yaml", chartFlags: chartFlags{Set: []string{"image.tag=2"}},
	}, &out, &errb)
	if code != exitFailed || !strings.Contains(errb.String(), `value image.tag breaks rule "type"`) {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestChartLintAcceptsTheExampleAndRefusesABrokenTemplate(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runChartLint(t.Context(), chartLintOptions{Dir: exampleChart}, &out, &errb); code != exitOK {
		t.Fatalf("example: exit %d: %s", code, errb.String())
	}
	dir := copyChart(t)
	if err := os.WriteFile(filepath.Join(dir, "templates/web.yaml"), []byte("services:\n  web:\n    image: {{ .Values.image.tag | nosuch }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := runChartLint(t.Context(), chartLintOptions{Dir: dir}, &out, &errb); code != exitFailed || !strings.Contains(errb.String(), filepath.Base(dir)+"/templates/web.yaml:3") {
		t.Fatalf("broken: exit %d: %s", code, errb.String())
	}
}

func TestChartPackageWritesTheSameArchiveEveryTime(t *testing.T) {
	sums := map[string]bool{}
	var data []byte
	for range 2 {
		dest := t.TempDir()
		var out, errb bytes.Buffer
		if code := runChartPackage(t.Context(), chartPackageOptions{Dir: copyChart(t), Destination: dest}, &out, &errb); code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || lines[0] != filepath.Join(dest, "shop-0.1.0.tgz") || !strings.HasPrefix(lines[1], "sha256:") {
			t.Fatalf("output %q", out.String())
		}
		sums[lines[1]] = true
		b, err := os.ReadFile(lines[0])
		if err != nil {
			t.Fatal(err)
		}
		if data != nil && !bytes.Equal(data, b) {
			t.Fatal("archives differ")
		}
		data = b
	}
	if len(sums) != 1 {
		t.Fatalf("sha256 differs: %v", sums)
	}
}

func TestHistoryAndGetShowTheChartOfARevision(t *testing.T) {
	got := chartCell(&charts.ChartRef{Name: "shop", Version: "0.1.0", ValuesDigest: "sha256:0123456789abcdef0123"})
	if got != "shop-0.1.0 (values 0123456789ab)" || chartCell(nil) != "-" {
		t.Fatalf("history cell %q", got)
	}
	got = chartCell(&charts.ChartRef{Name: "shop", Version: "0.1.0", ValuesDigest: "sha256:0123456789abcdef0123", ValuesCommit: "97fb0e242a6c38addba0cdd5bee8e532554712fb"})
	if got != "shop-0.1.0 (values 0123456789ab from 97fb0e24)" {
		t.Fatalf("history cell with a values repository %q", got)
	}
	var out bytes.Buffer
	if err := printStatus(&out, application.Status{Name: "shop", Chart: "shop 0.1.0, values sha256:0123"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Chart:") || !strings.Contains(out.String(), "shop 0.1.0, values sha256:0123") {
		t.Fatalf("get output:\n%s", out.String())
	}
}

// copyChart copies the example chart to a new directory (fresh mtimes).
func copyChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(exampleChart)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestChartIndexListsThePackagesTheSameWayEveryTime(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := runChartPackage(t.Context(), chartPackageOptions{Dir: copyChart(t), Destination: dir}, &out, &errb); code != exitOK {
		t.Fatalf("package: exit %d: %s", code, errb.String())
	}
	sum := strings.TrimPrefix(strings.Split(strings.TrimSpace(out.String()), "\n")[1], "sha256:")
	var first []byte
	for range 2 {
		out.Reset()
		if code := runChartIndex(chartIndexOptions{Dir: dir, URL: "https://charts.example.com/stable"}, &out, &errb); code != exitOK {
			t.Fatalf("index: exit %d: %s", code, errb.String())
		}
		b, err := os.ReadFile(filepath.Join(dir, "index.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if first != nil && !bytes.Equal(first, b) {
			t.Fatal("two indexes of the same packages differ")
		}
		first = b
	}
	for _, want := range []string{"name: shop", "version: 0.1.0", "digest: " + sum, "https://charts.example.com/stable/shop-0.1.0.tgz", "created: \"2000-01-01T00:00:00Z\""} {
		if !strings.Contains(string(first), want) {
			t.Errorf("index lacks %q:\n%s", want, first)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "broken-1.0.0.tgz"), []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := runChartIndex(chartIndexOptions{Dir: dir}, &out, &errb); code != exitFailed || !strings.Contains(errb.String(), "broken-1.0.0.tgz") {
		t.Fatalf("broken archive: exit %d: %s", code, errb.String())
	}
}

func TestAChartRepositoryRevisionIsShownWhole(t *testing.T) {
	if got := shortSHA("greeter@1.0.3-rc.1"); got != "greeter@1.0.3-rc.1" {
		t.Errorf("shortSHA of a chart version: %q", got)
	}
	if got := shortSHA("0123456789abcdef0123456789abcdef01234567"); got != "01234567" {
		t.Errorf("shortSHA of a commit: %q", got)
	}
}

func TestDiffShowsTheChartAndValuesDigestOfBothSides(t *testing.T) {
	var out bytes.Buffer
	printDiff(&out, api.Diff{App: "shop", Revision: "shop@0.2.0", Deployed: "shop@0.1.0",
		Chart:         &charts.ChartRef{Name: "shop", Version: "0.2.0", ValuesDigest: "sha256:bbbbbbbbbbbbbbbb"},
		DeployedChart: &charts.ChartRef{Name: "shop", Version: "0.1.0", ValuesDigest: "sha256:aaaaaaaaaaaaaaaa"}})
	if !strings.Contains(out.String(), "chart: deployed shop-0.1.0 (values aaaaaaaaaaaa), repository at shop-0.2.0 (values bbbbbbbbbbbb)\n") {
		t.Fatalf("diff output:\n%s", out.String())
	}
}

// TestTheChartSiteExampleValidatesAndRendersEachApplication checks the
// worked example: its applications file is valid, and each application
// whose chart is in this repository renders as the controller would render
// it, with the subchart switched on in one region and off in the other.
func TestTheChartSiteExampleValidatesAndRendersEachApplication(t *testing.T) {
	const file = "../../examples/chart-site/applications.yaml"
	var out, errb bytes.Buffer
	if code := runValidate(validateOptions{File: file}, &out, &errb); code != exitOK {
		t.Fatalf("validate: exit %d: %s", code, errb.String())
	}
	f, err := application.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"site-eu": {"APP_MESSAGE=hallo", "CACHE_ADDR=cache:6379", "REGION=eu", "x2", "cache: MAX_MEMORY=64mb,REGION=eu"},
		"site-us": {"APP_MESSAGE=howdy", "REGION=us", "x3"},
	}
	rendered := 0
	for _, app := range f.Applications {
		if app.Source.FromRepository() {
			continue
		}
		ch := app.Source.Chart
		r, err := chartengine.Render(chartengine.Dir{Root: "../..", Path: app.Source.Path, ValueFiles: ch.ValueFiles, Values: ch.Values, Set: ch.Set},
			chartengine.Release{Name: app.Stack, Revision: 1})
		if err != nil {
			t.Fatalf("%s: %v", app.Name, err)
		}
		st, err := compose.Convert(t.Context(), r.Manifest, app.Stack, nil)
		if err != nil {
			t.Fatalf("%s: %v", app.Name, err)
		}
		web := st.Services[app.Stack+"_web"]
		desc := strings.Join(web.TaskTemplate.ContainerSpec.Env, ",") + fmt.Sprintf(" x%d", *web.Mode.Replicated.Replicas)
		if c, ok := st.Services[app.Stack+"_cache"]; ok {
			desc += " cache: " + strings.Join(c.TaskTemplate.ContainerSpec.Env, ",")
		}
		for _, w := range want[app.Name] {
			if !strings.Contains(desc, w) {
				t.Errorf("%s: %q lacks %q", app.Name, desc, w)
			}
		}
		if app.Name == "site-us" && strings.Contains(desc, "cache") {
			t.Errorf("site-us runs the cache it switched off: %s", desc)
		}
		rendered++
	}
	if rendered != len(want) {
		t.Fatalf("rendered %d applications, want %d", rendered, len(want))
	}
}
