package chartengine

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/source"
)

// tree writes files (repository paths) into a fresh repository root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		if err := writeFile(filepath.Join(root, filepath.FromSlash(name)), content); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// cacheChart is a subchart with its own values, a global, a file and a
// schema, placed under dir.
func cacheChart(dir, version string) map[string]string {
	return map[string]string{
		dir + "/Chart.yaml":         "apiVersion: v2\nname: cache\nversion: " + version + "\n",
		dir + "/values.yaml":        "replicas: 1\nmessage: cache-default\nglobal:\n  region: none\n  tier: small\n",
		dir + "/values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer","maximum":5}}}`,
		dir + "/files/cache.conf":   "cache " + version + "\n",
		dir + "/templates/_helpers.tpl": `{{- define "cache.name" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}
`,
		dir + "/templates/cache.yaml": `services:
  {{ .Values.service | default "cache" }}:
    image: flotilla-test/app:1
    environment:
      NAME: {{ include "cache.name" . }}
      MESSAGE: {{ .Values.message | quote }}
      REGION: {{ .Values.global.region }}
      TIER: {{ .Values.global.tier }}
      VERSION: {{ .Chart.Version | quote }}
    configs: [{source: {{ .Values.service | default "cache" }}.conf, target: /etc/cache.conf}]
    deploy:
      replicas: {{ .Values.replicas }}
configs:
  {{ .Values.service | default "cache" }}.conf:
    file: files/cache.conf
`,
	}
}

// shopWith is a parent chart at "shop" whose web service reads a value of
// its subchart, with deps as its dependencies and values as values.yaml.
func shopWith(deps, values string, extra ...map[string]string) map[string]string {
	files := map[string]string{
		"shop/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n" + deps,
		"shop/values.yaml": values,
		"shop/templates/web.yaml": `services:
  web:
    image: flotilla-test/app:1
    environment:
      CACHE_REPLICAS: "{{ with .Values.cache }}{{ .replicas }}{{ end }}"
      REGION: "{{ with .Values.global }}{{ .region }}{{ end }}"
`,
	}
	for _, e := range extra {
		for k, v := range e {
			files[k] = v
		}
	}
	return files
}

func renderShop(t *testing.T, root string, d Dir) (*Rendered, error) {
	t.Helper()
	d.Root, d.Path = root, "shop"
	return Render(d, Release{Name: "shop", Revision: 1})
}

func env(t *testing.T, manifest, service string) string {
	t.Helper()
	st, err := compose.Convert(t.Context(), manifest, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := st.Services["shop_"+service]
	if !ok {
		t.Fatalf("no service %s in\n%s", service, manifest)
	}
	return strings.Join(s.TaskTemplate.ContainerSpec.Env, ",")
}

func TestSubchartSeesItsOwnValuesUnderItsKeyAndTheParentsGlobals(t *testing.T) {
	root := tree(t, shopWith("  - name: cache\n    version: ~1.0\n",
		"cache:\n  message: from-parent\nglobal:\n  region: eu\n", cacheChart("shop/charts/cache", "1.0.2")))
	r, err := renderShop(t, root, Dir{Set: map[string]any{"cache.replicas": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := env(t, r.Manifest, "cache"); got != "MESSAGE=from-parent,NAME=shop-cache,REGION=eu,TIER=small,VERSION=1.0.2" {
		t.Errorf("cache env %s", got)
	}
	// The parent sees the subchart's values merged, defaults included.
	if got := env(t, r.Manifest, "web"); got != "CACHE_REPLICAS=3,REGION=eu" {
		t.Errorf("web env %s", got)
	}
	// The subchart's config is its own files/cache.conf.
	st, err := compose.Convert(t.Context(), r.Manifest, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Configs) != 1 {
		t.Fatalf("configs %v", st.Configs)
	}
	for _, c := range st.Configs {
		if string(c.Data) != "cache 1.0.2\n" {
			t.Errorf("config data %q", c.Data)
		}
	}
	again, err := renderShop(t, root, Dir{Set: map[string]any{"cache.replicas": 3}})
	if err != nil || again.Manifest != r.Manifest || again.ValuesDigest != r.ValuesDigest {
		t.Fatalf("second render differs: %v", err)
	}
}

func TestSubchartsComeFromAnArchiveInChartsAFilePathAndAnAlias(t *testing.T) {
	files := shopWith(`  - name: cache
    version: ~1.2
  - name: cache
    alias: sessions
    version: ">=2"
    repository: file://../common/cache
`, "sessions:\n  service: sessions\n  message: sessions\n", cacheChart("common/cache", "2.1.0"))
	for _, v := range []string{"1.2.4", "1.3.0"} {
		c, err := Load(tree(t, cacheChart("cache", v)), "cache")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := c.Package(&b); err != nil {
			t.Fatal(err)
		}
		files["shop/charts/cache-"+v+".tgz"] = b.String()
	}
	root := tree(t, files)
	r, err := renderShop(t, root, Dir{})
	if err != nil {
		t.Fatal(err)
	}
	if got := env(t, r.Manifest, "cache"); !strings.Contains(got, "VERSION=1.2.4") {
		t.Errorf("cache from the archive matching ~1.2: %s", got)
	}
	if got := env(t, r.Manifest, "sessions"); !strings.Contains(got, "VERSION=2.1.0") || !strings.Contains(got, "MESSAGE=sessions") {
		t.Errorf("sessions, the alias from file://: %s", got)
	}
}

func TestAConditionSwitchesASubchartOff(t *testing.T) {
	root := tree(t, shopWith("  - name: cache\n    version: ~1.0\n    condition: cache.enabled,global.cache\n",
		"global:\n  cache: false\n", cacheChart("shop/charts/cache", "1.0.0")))
	r, err := renderShop(t, root, Dir{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Manifest, "cache") {
		t.Fatalf("switched-off subchart rendered:\n%s", r.Manifest)
	}
	// The first path that is set decides.
	r, err = renderShop(t, root, Dir{Set: map[string]any{"cache.enabled": true}})
	if err != nil || !strings.Contains(r.Manifest, "cache") {
		t.Fatalf("cache.enabled=true: %v\n%v", err, r)
	}
	_, err = renderShop(t, root, Dir{Set: map[string]any{"cache.enabled": "yes"}})
	wantFault(t, err, "shop/Chart.yaml", "condition cache.enabled is a string, not true or false")
}

func TestADependencyFromAChartRepositoryIsFetchedThroughTheResolver(t *testing.T) {
	root := tree(t, shopWith("  - name: cache\n    version: ~1.0\n    repository: https://charts.example.com/stable\n", ""))
	_, err := renderShop(t, root, Dir{})
	wantFault(t, err, "shop/Chart.yaml", "dependency cache", "no chart repository client", "https://charts.example.com/stable")

	fetched := tree(t, cacheChart("cache", "1.0.7"))
	var asked []string
	resolve := func(repo, name, constraint string) (*Chart, error) {
		asked = append(asked, repo+" "+name+" "+constraint)
		return LoadFetched(fetched, name, "chart cache 1.0.7 from "+repo)
	}
	r, err := renderShop(t, root, Dir{Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != "https://charts.example.com/stable cache ~1.0" {
		t.Errorf("resolver asked %q", asked)
	}
	if got := env(t, r.Manifest, "cache"); !strings.Contains(got, "VERSION=1.0.7") {
		t.Errorf("cache env %s", got)
	}
	// An error in a fetched chart names where it came from.
	bad := tree(t, cacheChart("cache", "1.0.7"))
	if err := writeFile(filepath.Join(bad, "cache/templates/cache.yaml"), "services:\n  x: {{ .Values.nope.deeper }}\n"); err != nil {
		t.Fatal(err)
	}
	_, err = renderShop(t, root, Dir{Resolve: func(repo, name, _ string) (*Chart, error) {
		return LoadFetched(bad, name, "chart cache 1.0.7 from "+repo)
	}})
	wantFault(t, err, "chart cache 1.0.7 from https://charts.example.com/stable/templates/cache.yaml", "chart cache", "nil pointer")
}

func TestBadSubchartsAreNamed(t *testing.T) {
	for _, c := range []struct {
		name, deps, values string
		extra              map[string]string
		file               string
		wants              []string
	}{
		{"version outside the constraint", "  - name: cache\n    version: ~2.0\n", "", cacheChart("shop/charts/cache", "1.0.0"),
			"shop/Chart.yaml", []string{"dependency cache", "version 1.0.0", `"~2.0"`}},
		{"not vendored", "  - name: cache\n    version: ~1.0\n", "", nil,
			"shop/Chart.yaml", []string{"dependency cache", "not found in shop/charts/"}},
		{"file path leaving the repository", "  - name: cache\n    version: ~1.0\n    repository: file://../../elsewhere\n", "", nil,
			"../elsewhere", []string{source.ErrOutsideRepository.Error()}},
		{"template error in the subchart", "  - name: cache\n    version: ~1.0\n", "", map[string]string{
			"shop/charts/cache/Chart.yaml":         "apiVersion: v2\nname: cache\nversion: 1.0.0\n",
			"shop/charts/cache/templates/bad.yaml": "services:\n\n  c: {{ .Values.x | nosuch }}\n"},
			"shop/charts/cache/templates/bad.yaml", []string{"chart cache", `"nosuch" not defined`}},
		{"schema violation in the subchart", "  - name: cache\n    version: ~1.0\n", "cache:\n  replicas: 9\n", cacheChart("shop/charts/cache", "1.0.0"),
			"shop/charts/cache/values.schema.json", []string{"value cache.replicas breaks rule \"maximum\""}},
		{"subchart values not a mapping", "  - name: cache\n    version: ~1.0\n", "cache: 3\n", cacheChart("shop/charts/cache", "1.0.0"),
			"shop/values.yaml", []string{"value cache is a int;", "must be a mapping"}},
		{"subchart file leaving it", "  - name: cache\n    version: ~1.0\n", "", map[string]string{
			"shop/charts/cache/Chart.yaml":         "apiVersion: v2\nname: cache\nversion: 1.0.0\n",
			"shop/charts/cache/templates/bad.yaml": "configs:\n  c: {file: ../../files/x}\n"},
			"shop/charts/cache/templates/bad.yaml", []string{"configs.c.file", "leaves the subchart"}},
		{"unsupported repository", "  - name: cache\n    version: ~1.0\n    repository: oci://r.example.com/c\n", "", nil,
			"shop/Chart.yaml", []string{"only https://, http:// and file://"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := tree(t, shopWith(c.deps, c.values, c.extra))
			_, err := renderShop(t, root, Dir{})
			wantFault(t, err, c.file, c.wants...)
		})
	}
}

func TestSubchartsNestAndAnArchiveNamesItsEntries(t *testing.T) {
	files := shopWith("  - name: cache\n    version: ~1.0\n", "", cacheChart("shop/charts/cache", "1.0.0"))
	files["shop/charts/cache/Chart.yaml"] += "dependencies:\n  - name: inner\n    version: \"1.0.0\"\n"
	files["shop/charts/cache/charts/inner/Chart.yaml"] = "apiVersion: v2\nname: inner\nversion: 1.0.0\n"
	files["shop/charts/cache/charts/inner/values.yaml"] = "message: inner\n"
	files["shop/charts/cache/charts/inner/templates/inner.yaml"] = "services:\n  inner:\n    image: flotilla-test/app:1\n    environment: {MESSAGE: '{{ .Values.message }}', REGION: '{{ .Values.global.region }}'}\n"
	files["shop/values.yaml"] = "global:\n  region: eu\ncache:\n  inner:\n    message: from-the-top\n"
	root := tree(t, files)
	r, err := renderShop(t, root, Dir{})
	if err != nil {
		t.Fatal(err)
	}
	if got := env(t, r.Manifest, "inner"); got != "MESSAGE=from-the-top,REGION=eu" {
		t.Errorf("inner env %s", got)
	}

	// A package of the parent holds the subcharts and renders the same.
	c, err := Load(root, "shop")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := c.Package(&b); err != nil {
		t.Fatal(err)
	}
	pc, err := LoadArchive(bytes.NewReader(b.Bytes()), "shop-1.0.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := pc.Render(Dir{}, Release{Name: "shop", Revision: 1})
	if err != nil || pr.Manifest != r.Manifest {
		t.Fatalf("packaged render differs: %v", err)
	}
}

func TestLoadArchiveRefusesWhatCouldLeaveTheChart(t *testing.T) {
	_, err := LoadArchive(strings.NewReader("not gzip"), "x.tgz")
	if !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), "x.tgz") {
		t.Fatal(err)
	}
}

func TestAPackageVendorsAFilePathDependency(t *testing.T) {
	files := shopWith("  - name: cache\n    version: ~2.0\n    repository: file://../common/cache\n", "cache:\n  message: packaged\n", cacheChart("common/cache", "2.0.1"))
	root := tree(t, files)
	fromGit, err := renderShop(t, root, Dir{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(root, "shop")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := c.Package(&b); err != nil {
		t.Fatal(err)
	}
	// The package alone, with no repository around it, renders the same.
	pc, err := LoadArchive(bytes.NewReader(b.Bytes()), "shop-1.0.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	if pc.File("charts/cache/Chart.yaml") == nil {
		t.Fatalf("package holds %v", pc.Files())
	}
	r, err := pc.Render(Dir{}, Release{Name: "shop", Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Manifest != fromGit.Manifest || !strings.Contains(r.Manifest, "packaged") {
		t.Fatalf("packaged render differs:\n%s\nvs\n%s", r.Manifest, fromGit.Manifest)
	}
}
