package chartengine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/internal/chartfixture"
	"github.com/flotilla-gitops/flotilla/source"
)

const exampleChart = "../examples/chart"

// copyExample copies the example chart into a fresh repository directory at
// "chart" and applies edits (path from the root → content, "" deletes).
func copyExample(t testing.TB, edits map[string]string) string {
	t.Helper()
	return chartfixture.Copy(t, exampleChart, edits)
}

func writeFile(p, content string) error { return chartfixture.Write(p, content) }

func render(t *testing.T, root string, d Dir) (*Rendered, error) {
	t.Helper()
	d.Root, d.Path = root, "chart"
	return Render(d, Release{Name: "shop", Revision: 1})
}

func mustRender(t *testing.T, root string, d Dir) *Rendered {
	t.Helper()
	r, err := render(t, root, d)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// services converts a manifest and returns each service's spec env and
// replica count, keyed by unscoped name.
func services(t *testing.T, manifest string) map[string]string {
	t.Helper()
	st, err := compose.Convert(t.Context(), manifest, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, s := range st.Services {
		desc := s.TaskTemplate.ContainerSpec.Image + " " + strings.Join(s.TaskTemplate.ContainerSpec.Env, ",")
		if s.Mode.Replicated != nil && s.Mode.Replicated.Replicas != nil {
			desc += " x" + strconv.Itoa(int(*s.Mode.Replicated.Replicas))
		}
		out[strings.TrimPrefix(name, "shop_")] = desc
	}
	return out
}

func wantFault(t *testing.T, err error, file string, parts ...string) *fault.Error {
	t.Helper()
	if err == nil {
		t.Fatal("render succeeded")
	}
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *fault.Error: %v", err, err)
	}
	if fe.File != file {
		t.Errorf("error names file %q, want %q (%v)", fe.File, file, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
	return fe
}

func TestExampleChartRendersToTheSameManifestEveryTime(t *testing.T) {
	root := copyExample(t, nil)
	a := mustRender(t, root, Dir{ValueFiles: []string{"values-eu.yaml"}})
	b := mustRender(t, root, Dir{ValueFiles: []string{"values-eu.yaml"}})
	if a.Manifest != b.Manifest || a.ValuesDigest != b.ValuesDigest {
		t.Fatal("two renders of the same chart and values differ")
	}
	if a.Chart.Name != "shop" || a.Chart.Version != "0.1.0" || !strings.HasPrefix(a.ValuesDigest, "sha256:") {
		t.Fatalf("chart info: %+v %s", a.Chart, a.ValuesDigest)
	}
	svcs := services(t, a.Manifest)
	if got := svcs["web"]; got != "flotilla-test/app:1 APP_MESSAGE=hallo x2" {
		t.Errorf("web: %s", got)
	}
	if got := svcs["worker"]; got != "flotilla-test/app:1 QUEUE=jobs-eu x1" {
		t.Errorf("worker: %s", got)
	}
	if !strings.Contains(a.Manifest, "listen 8080") || !strings.Contains(a.Manifest, "shop_web.conf-") {
		t.Errorf("config from files/ missing or not content-hashed:\n%s", a.Manifest)
	}
}

func TestChartOutputIsTheManifestComposeWouldRender(t *testing.T) {
	root := copyExample(t, nil)
	got := mustRender(t, root, Dir{})
	// The same document written by hand as a compose project.
	proj := t.TempDir()
	writeFile(filepath.Join(proj, "files/web.conf"), "listen 8080\n")
	writeFile(filepath.Join(proj, "compose.yaml"), `version: "3.8"
networks: {back: {driver: overlay}}
configs:
  web.conf: {file: files/web.conf}
services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ":8080"]
    environment: {APP_MESSAGE: "hello"}
    networks: [back]
    configs: [{source: web.conf, target: /etc/web.conf}]
    deploy: {replicas: 1, labels: {app.kubernetes.io/name: shop, app.kubernetes.io/version: "1.4.2"}}
    stop_grace_period: 1s
  worker:
    image: flotilla-test/app:1
    environment: {QUEUE: "jobs"}
    networks: [back]
    deploy: {replicas: 1, labels: {app.kubernetes.io/name: shop, app.kubernetes.io/version: "1.4.2"}}
    stop_grace_period: 1s
`)
	want, err := compose.Render("shop", compose.Dir{Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest != want.Manifest {
		t.Fatalf("chart manifest differs from compose's:\n--- chart\n%s\n--- compose\n%s", got.Manifest, want.Manifest)
	}
}

func TestValuesPrecedenceIsDefaultsThenFilesThenInlineThenSet(t *testing.T) {
	root := copyExample(t, map[string]string{
		"chart/a.yaml":      "web: {message: from-a, replicas: 3}\nworker: {queue: qa}\n",
		"shared/b.yaml":     "web: {message: from-b}\n",
		"chart/nulled.yaml": "env: {X: one}\n",
	})
	r := mustRender(t, root, Dir{
		ValueFiles: []string{"a.yaml", "../shared/b.yaml", "nulled.yaml"},
		Values:     map[string]any{"web": map[string]any{"message": "inline"}, "worker": map[string]any{"queue": "qi"}},
		Set:        map[string]any{"web.message": "set", "image.tag": "2"},
	})
	svcs := services(t, r.Manifest)
	if got := svcs["web"]; got != "flotilla-test/app:2 APP_MESSAGE=set,X=one x3" {
		t.Errorf("web: %s", got)
	}
	if got := svcs["worker"]; got != "flotilla-test/app:2 QUEUE=qi,X=one x1" {
		t.Errorf("worker: %s", got)
	}
	// A null removes a default; a template switched off adds nothing.
	r = mustRender(t, root, Dir{Set: map[string]any{"worker.replicas": 0}})
	if _, ok := services(t, r.Manifest)["worker"]; ok {
		t.Error("worker rendered with replicas 0")
	}
}

func TestChangingOneValueChangesOnlyTheServiceThatUsesIt(t *testing.T) {
	root := copyExample(t, nil)
	a := services(t, mustRender(t, root, Dir{}).Manifest)
	b := services(t, mustRender(t, root, Dir{Set: map[string]any{"worker.queue": "other"}}).Manifest)
	if a["web"] != b["web"] || a["worker"] == b["worker"] {
		t.Fatalf("before %v after %v", a, b)
	}
}

func TestTemplateErrorNamesChartFileAndLine(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/templates/worker.yaml": "services:\n  worker:\n    image: {{ .Values.image.tag | nosuchfunc }}\n"})
	fe := wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/worker.yaml", "chart shop", "nosuchfunc")
	if fe.Line != 3 || !errors.Is(fe, ErrTemplate) {
		t.Fatalf("line %d, kind %v", fe.Line, fe.Err)
	}
	// An execution error inside an included helper names the helper's line.
	root = copyExample(t, map[string]string{"chart/templates/_helpers.tpl": "{{ define \"shop.image\" }}\n{{ .Values.image.repository.nope.deeper }}{{ end }}\n{{ define \"shop.labels\" }}a: b{{ end }}\n"})
	fe = wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/_helpers.tpl", "chart shop")
	if fe.Line != 2 {
		t.Fatalf("line %d: %v", fe.Line, fe)
	}
}

func mustFail(_ *Rendered, err error) error { return err }

func TestRequiredValueIsNamed(t *testing.T) {
	root := copyExample(t, nil)
	fe := wantFault(t, mustFail(render(t, root, Dir{Set: map[string]any{"worker.queue": nil}})), "chart/templates/worker.yaml", "worker.queue is required")
	if fe.Line == 0 {
		t.Error("no line")
	}
}

func TestSchemaViolationNamesValuePathAndRule(t *testing.T) {
	root := copyExample(t, nil)
	err := mustFail(render(t, root, Dir{Set: map[string]any{"web.replicas": "many", "worker.replicas": 99}}))
	fe := wantFault(t, err, "chart/values.schema.json", "web.replicas", `"type"`, "worker.replicas", `"maximum"`)
	var se *SchemaError
	if !errors.As(err, &se) || len(se.Violations) != 2 || fe.Field != "web.replicas" {
		t.Fatalf("violations %+v field %q", se, fe.Field)
	}
}

func TestSchemaThatReferencesAFileIsRefused(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/values.schema.json": `{"$ref": "file:///etc/passwd"}`})
	wantFault(t, mustFail(render(t, root, Dir{})), "chart/values.schema.json", "only references inside")
}

func TestOutputThatIsNotAComposeMappingNamesItsTemplate(t *testing.T) {
	for name, text := range map[string]string{
		"list":     "- a\n- b\n",
		"scalar":   "just text\n",
		"not yaml": "services: [oops\n",
	} {
		root := copyExample(t, map[string]string{"chart/templates/extra.yaml": text})
		fe := wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/extra.yaml", "chart shop")
		if !errors.Is(fe, ErrOutput) {
			t.Errorf("%s: %v", name, fe)
		}
	}
}

func TestTwoTemplatesSettingOneFieldDifferentlyIsAnError(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/templates/zz.yaml": "services:\n  web:\n    image: other:1\n"})
	wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/zz.yaml", "services.web.image", "templates/web.yaml")
	// Agreeing is fine.
	root = copyExample(t, map[string]string{"chart/templates/zz.yaml": "version: \"3.8\"\n"})
	mustRender(t, root, Dir{})
}

func TestComposeErrorInTheOutputNamesTheTemplate(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/templates/zz.yaml": "services:\n  extra:\n    image: flotilla-test/app:1\n    replicaz: 2\n"})
	wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/zz.yaml", "replicaz", "rendered compose")
}

func TestFilePathEscapingTheChartIsRefused(t *testing.T) {
	root := copyExample(t, map[string]string{
		"secret.txt":                   "outside\n",
		"chart/templates/zz.yaml":      "configs:\n  stolen:\n    file: ../secret.txt\n",
		"chart/templates/network.yaml": "version: \"3.8\"\nnetworks: {back: {driver: overlay}}\n",
	})
	err := mustFail(render(t, root, Dir{}))
	wantFault(t, err, "chart/templates/zz.yaml", "configs.stolen.file")
	if !errors.Is(err, source.ErrOutsideRepository) {
		t.Fatalf("not an outside-repository refusal: %v", err)
	}
}

func TestSymlinkInTheChartIsRefused(t *testing.T) {
	root := copyExample(t, nil)
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "chart/files/passwd.conf")); err != nil {
		t.Fatal(err)
	}
	err := mustFail(render(t, root, Dir{}))
	wantFault(t, err, "chart/files/passwd.conf", "symlink")
	if !errors.Is(err, ErrSymlink) {
		t.Fatal(err)
	}
}

func TestValueFileOutsideTheRepositoryIsRefused(t *testing.T) {
	root := copyExample(t, nil)
	err := mustFail(render(t, root, Dir{ValueFiles: []string{"../../etc/passwd"}}))
	if !errors.Is(err, source.ErrOutsideRepository) {
		t.Fatalf("got %v", err)
	}
}

func TestChartYAMLIsValidatedStrictly(t *testing.T) {
	for _, c := range []struct{ text, field, want string }{
		{"apiVersion: v2\nname: shop\nversion: 0.1.0\nkeywords: [a]\n", "", "keywords"},
		{"apiVersion: v1\nname: shop\nversion: 0.1.0\n", "apiVersion", "v1"},
		{"apiVersion: v2\nversion: 0.1.0\n", "name", "required"},
		{"apiVersion: v2\nname: Shop!\nversion: 0.1.0\n", "name", "lowercase"},
		{"apiVersion: v2\nname: shop\nversion: one\n", "version", "SemVer"},
		{"apiVersion: v2\nname: shop\nversion: 0.1.0\ndependencies:\n  - name: redis\n    version: \"~~7\"\n", "dependencies[0].version", "constraint"},
		{"apiVersion: v2\nname: shop\nversion: 0.1.0\ndependencies:\n  - name: redis\n    verzion: 7\n", "", "verzion"},
	} {
		root := copyExample(t, map[string]string{"chart/Chart.yaml": c.text})
		fe := wantFault(t, mustFail(render(t, root, Dir{})), "chart/Chart.yaml", c.want)
		if fe.Field != c.field || (fe.Line == 0) != (c.want == "required") || !errors.Is(fe, ErrInvalidChart) {
			t.Errorf("%q: field %q line %d (%v)", c.text, fe.Field, fe.Line, fe)
		}
	}
}

func TestHelperFileWithOutputIsRefused(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/templates/_extra.tpl": "services: {}\n"})
	wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/_extra.tpl", "only define")
}

func TestTemplatesCannotReadTheEnvironmentOrTheClock(t *testing.T) {
	for _, fn := range []string{`env "HOME"`, `expandenv "$HOME"`, `getHostByName "localhost"`, `now`, `randAlpha 5`, `uuidv4`} {
		root := copyExample(t, map[string]string{"chart/templates/zz.yaml": "x-probe: {{ " + fn + " }}\n"})
		wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/zz.yaml", "not defined")
	}
}

func TestIncludeTplToYamlFromYamlToJson(t *testing.T) {
	root := copyExample(t, map[string]string{
		"chart/templates/zz.yaml": `{{- $m := fromYaml "a: 1\nb: [x, y]" -}}
x-json: {{ toJson $m | quote }}
x-yaml: {{ toYaml $m | quote }}
x-tpl: {{ tpl "{{ .Values.web.message }}-{{ .Release.Name }}-{{ .Release.Revision }}" . | quote }}
x-dollar: "$HOME"
`,
	})
	r := mustRender(t, root, Dir{})
	// x- extensions never reach the manifest; render the document alone.
	if r.Manifest == "" {
		t.Fatal("empty manifest")
	}
	c, err := Load(root, "chart")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := newRenderSet([]*unit{{chart: c, vals: copyValues(c.Values)}}).execute(Release{Name: "shop", Revision: 4})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"x-json": `{"a":1,"b":["x","y"]}`, "x-yaml": "a: 1\nb:\n    - x\n    - \"y\"", "x-tpl": "hello-shop-4", "x-dollar": "$HOME",
	} {
		if doc[k] != want {
			t.Errorf("%s = %q, want %q", k, doc[k], want)
		}
	}
}

func TestDollarInOutputReachesTheServiceLiterally(t *testing.T) {
	root := copyExample(t, nil)
	r := mustRender(t, root, Dir{Set: map[string]any{"web.message": "costs $5 ${HOME}"}})
	if got := services(t, r.Manifest)["web"]; !strings.Contains(got, "APP_MESSAGE=costs $5 ${HOME}") {
		t.Fatalf("web: %s", got)
	}
}

func TestSplitKeyAndSetValues(t *testing.T) {
	parts, err := SplitKey(`a.b\.c.d`)
	if err != nil || strings.Join(parts, "|") != "a|b.c|d" {
		t.Fatalf("%q %v", parts, err)
	}
	for _, bad := range []string{"", "a..b", ".a", "a[0]"} {
		if _, err := SplitKey(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for in, want := range map[string]any{"3": 3, "true": true, "null": nil, "1.5": "1.5", "0123": "0123", "x": "x"} {
		if got := ParseSetValue(in); got != want {
			t.Errorf("ParseSetValue(%q) = %#v", in, got)
		}
	}
	if _, err := setValues(map[string]any{"a": map[string]any{"b": 1}}); err == nil {
		t.Error("a mapping accepted as a set value")
	}
}

func TestPackageIsDeterministic(t *testing.T) {
	root := copyExample(t, nil)
	c, err := Load(root, "chart")
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	sa, err := c.Package(&a)
	if err != nil {
		t.Fatal(err)
	}
	// Touching every file (new mtimes) and loading again changes nothing.
	later := copyExample(t, nil)
	c2, err := Load(later, "chart")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c2.Package(&b)
	if err != nil {
		t.Fatal(err)
	}
	if sa != sb || !bytes.Equal(a.Bytes(), b.Bytes()) || len(sa) != 64 {
		t.Fatalf("packages differ: %s %s", sa, sb)
	}
	if ArchiveName(c.Meta) != "shop-0.1.0.tgz" {
		t.Fatal(ArchiveName(c.Meta))
	}
}

func TestLintAcceptsTheExampleAndRefusesABrokenChart(t *testing.T) {
	if _, err := Lint("../examples", "chart", nil); err != nil {
		t.Fatalf("example chart: %v", err)
	}
	root := copyExample(t, map[string]string{"chart/values.yaml": "image: {repository: x, tag: 1}\nweb: {}\nworker: {}\n"})
	if _, err := Lint(root, "chart", nil); err == nil || !strings.Contains(err.Error(), "image.tag") {
		t.Fatalf("lint of a chart whose defaults break its schema: %v", err)
	}
}

func TestDecryptedValuesNeverReachAnErrorMessage(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/secret.enc.yaml": "ciphertext\n"})
	const secret = "bad tag!hunter2-s3cr3t"
	decrypt := func(file string, data []byte) ([]byte, error) {
		if file == "chart/secret.enc.yaml" {
			return []byte("image: {tag: \"" + secret + "\"}\n"), nil
		}
		return data, nil
	}
	err := mustFail(render(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decrypt}))
	wantFault(t, err, "chart/values.schema.json", "image.tag", `"pattern"`, "***")
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("decrypted value in the message: %v", err)
	}
	// The same value from a plain file is quoted: nothing to hide.
	root = copyExample(t, map[string]string{"chart/plain.yaml": "image: {tag: \"" + secret + "\"}\n"})
	if err := mustFail(render(t, root, Dir{ValueFiles: []string{"plain.yaml"}, Decrypt: decrypt})); !strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("plain value withheld: %v", err)
	}
}

func TestHostileTemplatesAreBounded(t *testing.T) {
	defer func(n int) { maxIncludeCalls = n }(maxIncludeCalls)
	maxIncludeCalls = 2000
	for name, text := range map[string]string{
		"huge list":         "x: {{ len (until 1000000000) }}\n",
		"huge seq":          "x: {{ seq 1 1000000000 }}\n",
		"huge repeat":       "x: {{ repeat 1000000000 \"abcdefgh\" }}\n",
		"self include":      "{{ define \"loop\" }}{{ include \"loop\" . }}{{ end }}x: {{ include \"loop\" . }}\n",
		"exponential":       "{{ define \"a\" }}{{ if lt (len .) 60 }}{{ include \"a\" (append . 1) }}{{ include \"a\" (append . 1) }}{{ end }}{{ end }}x: {{ include \"a\" (list) }}\n",
		"output over limit": "x: {{ range until 20 }}{{ repeat 1000000 \"y\" }}{{ end }}\n",
	} {
		t.Run(name, func(t *testing.T) {
			root := copyExample(t, map[string]string{"chart/templates/zz.yaml": text})
			fe := wantFault(t, mustFail(render(t, root, Dir{})), "chart/templates/zz.yaml")
			if !errors.Is(fe, ErrTemplate) {
				t.Errorf("%s: %v", name, fe)
			}
		})
	}
}

func TestNotesFileIsIgnored(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/templates/NOTES.txt": "Thank you for installing {{ .Chart.Name }}.\n"})
	if a, b := mustRender(t, root, Dir{}), mustRender(t, copyExample(t, nil), Dir{}); a.Manifest != b.Manifest {
		t.Fatal("NOTES.txt changed the manifest")
	}
}

func TestValuesJSONCannotHoldAreRefusedAsBadInput(t *testing.T) {
	// Without a schema, nothing refuses NaN before the values digest.
	root := copyExample(t, map[string]string{"chart/nan.yaml": "web: {ratio: .nan}\n"})
	os.Remove(filepath.Join(root, "chart/values.schema.json"))
	fe := wantFault(t, mustFail(render(t, root, Dir{ValueFiles: []string{"nan.yaml"}})), "chart")
	if !errors.Is(fe, ErrValues) {
		t.Fatal(fe)
	}
}

// A value from an encrypted value file that a template copies into the
// manifest would be stored in plaintext in the release record: the render
// is refused. One used only to decide something (here the replica count)
// never appears, renders, and the values digest is then keyed, so the
// record cannot be used to guess the secret.
func TestADecryptedValueCopiedIntoTheManifestIsRefused(t *testing.T) {
	const secret = "hunter2-s3cr3t-message"
	decrypt := func(file string, data []byte) ([]byte, error) {
		if file == "chart/secret.enc.yaml" {
			return []byte("web: {message: \"" + secret + "\"}\n"), nil
		}
		return data, nil
	}
	root := copyExample(t, map[string]string{"chart/secret.enc.yaml": "ciphertext\n"})
	err := mustFail(render(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decrypt}))
	fe := wantFault(t, err, "chart/templates/web.yaml", "services.web.environment.APP_MESSAGE", "value web.message", "plaintext")
	if !errors.Is(fe, ErrPlaintextSecret) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("want ErrPlaintextSecret without the value, got %v", err)
	}

	decideOnly := func(file string, data []byte) ([]byte, error) {
		if file == "chart/secret.enc.yaml" {
			return []byte("worker: {replicas: 3}\nunused: \"" + secret + "\"\n"), nil
		}
		return data, nil
	}
	key := []byte("seal key of the identities")
	r := mustRender(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decideOnly, SealKey: key})
	if strings.Contains(r.Manifest, secret) || !strings.HasPrefix(r.ValuesDigest, "hmacSHA256:") {
		t.Fatalf("manifest holds the secret or the digest %q is not keyed", r.ValuesDigest)
	}
	other := mustRender(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decideOnly, SealKey: []byte("another key")})
	if other.ValuesDigest == r.ValuesDigest {
		t.Fatal("the values digest does not depend on the seal key")
	}
}
