package compose

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/source"
)

// fixture copies testdata/stack into a fresh checkout directory and returns
// the Dir of the project in it (Root is the checkout, Path "stack").
func fixture(t *testing.T) Dir {
	t.Helper()
	root := t.TempDir()
	if err := copyFixture(root); err != nil {
		t.Fatal(err)
	}
	return Dir{
		Root:     root,
		Path:     "stack",
		Files:    []string{"compose.yaml", "compose.prod.yaml"},
		EnvFiles: []string{"app.env"},
	}
}

// copyFixture copies testdata/stack to root/stack.
func copyFixture(root string) error {
	return os.CopyFS(filepath.Join(root, "stack"), os.DirFS("testdata/stack"))
}

func write(t *testing.T, d Dir, name, content string) {
	t.Helper()
	p := filepath.Join(d.Root, d.Path, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRender(t *testing.T, stack string, d Dir) *Rendered {
	t.Helper()
	r, err := Render(stack, d)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return r
}

func mustConvert(t *testing.T, r *Rendered, stack string) *Stack {
	t.Helper()
	st, err := Convert(context.Background(), r.Manifest, stack, nil)
	if err != nil {
		t.Fatalf("Convert: %v\n%s", err, r.Manifest)
	}
	return st
}

// faultOf asserts err is a *fault.Error and returns it.
func faultOf(t *testing.T, err error) *fault.Error {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got none")
	}
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("want *fault.Error, got %T: %v", err, err)
	}
	return fe
}

func TestRenderThenConvertDeclaresWhatStackDeployWould(t *testing.T) {
	d := fixture(t)
	r := mustRender(t, "demo", d)
	st := mustConvert(t, r, "demo")

	conf, _ := os.ReadFile("testdata/stack/config/app.conf")
	pass, _ := os.ReadFile("testdata/stack/secrets/db_password.txt")
	confName, _ := hashedName("demo", "app_conf", conf)
	passName, _ := hashedName("demo", "db_password", pass)

	if got, want := sortedKeys(st.Services), []string{"demo_cache", "demo_web", "demo_worker"}; !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	web := st.Services["demo_web"]
	if web.Labels["com.docker.stack.namespace"] != "demo" || web.Labels["com.docker.stack.image"] != "registry.example.com/team/web:2.3.1" {
		t.Errorf("web labels %v", web.Labels)
	}
	if web.Labels["tier"] != "front" {
		t.Errorf("deploy label lost: %v", web.Labels)
	}
	cs := web.TaskTemplate.ContainerSpec
	if cs.Image != "registry.example.com/team/web:2.3.1" {
		t.Errorf("image %q: env file interpolation", cs.Image)
	}
	wantEnv := []string{"GREETING=hello $USER", "HOME_SEEN=from-default", "LOG_LEVEL=warn", "REGISTRY=registry.example.com/team"}
	if !slices.Equal(cs.Env, wantEnv) {
		t.Errorf("env %q, want %q", cs.Env, wantEnv)
	}
	if len(cs.Configs) != 1 || cs.Configs[0].ConfigName != confName || cs.Configs[0].File.Name != "/etc/app/app.conf" || cs.Configs[0].ConfigID != "" {
		t.Errorf("config refs %+v, want %s", cs.Configs, confName)
	}
	if len(cs.Secrets) != 1 || cs.Secrets[0].SecretName != passName || cs.Secrets[0].File.Name != "db_password" {
		t.Errorf("secret refs %+v, want %s", cs.Secrets, passName)
	}
	if cs.Healthcheck == nil || cs.Healthcheck.Retries != 3 || cs.Healthcheck.Interval.String() != "10s" {
		t.Errorf("healthcheck %+v", cs.Healthcheck)
	}
	if p := web.EndpointSpec.Ports; len(p) != 1 || p[0].PublishMode != "host" || p[0].PublishedPort != 8080 || p[0].TargetPort != 8080 {
		t.Errorf("ports %+v", p)
	}
	if res := web.TaskTemplate.Resources; res.Limits.NanoCPUs != 5e8 || res.Limits.MemoryBytes != 128<<20 || res.Reservations.MemoryBytes != 64<<20 {
		t.Errorf("resources %+v %+v", res.Limits, res.Reservations)
	}
	if c := web.TaskTemplate.Placement.Constraints; !slices.Equal(c, []string{"node.role == worker"}) {
		t.Errorf("placement %v", c)
	}
	if *web.Mode.Replicated.Replicas != 4 {
		t.Errorf("replicas %d, want the override's 4", *web.Mode.Replicated.Replicas)
	}
	var targets []string
	for _, n := range web.TaskTemplate.Networks {
		targets = append(targets, n.Target)
	}
	if !slices.Equal(targets, []string{"demo_back", "demo_front"}) {
		t.Errorf("web networks %v", targets)
	}

	if got := sortedKeys(st.Networks); !slices.Equal(got, []string{"demo_back", "demo_default", "demo_front"}) {
		t.Errorf("networks %v: cache uses none, so the default network is created", got)
	}
	for name, n := range st.Networks {
		if n.Driver != "overlay" || n.Labels["com.docker.stack.namespace"] != "demo" {
			t.Errorf("network %s: %+v", name, n)
		}
	}
	if !st.Networks["demo_back"].Attachable {
		t.Error("demo_back lost attachable")
	}

	c, ok := st.Configs[confName]
	if !ok || string(c.Data) != string(conf) || c.Labels["com.docker.stack.namespace"] != "demo" || c.Name != confName {
		t.Errorf("configs %+v, want %s with the file's data", st.Configs, confName)
	}
	s, ok := st.Secrets[passName]
	if !ok || s.Data != nil || s.Labels["com.docker.stack.namespace"] != "demo" {
		t.Errorf("secrets %+v, want %s without data", st.Secrets, passName)
	}
	if string(r.Secrets[passName]) != string(pass) || len(r.Secrets) != 1 {
		t.Errorf("Rendered.Secrets %v", sortedKeys(r.Secrets))
	}
	if !slices.Equal(st.Volumes, []string{"demo_data"}) || st.ExternalVolumes != nil {
		t.Errorf("volumes %v external %v", st.Volumes, st.ExternalVolumes)
	}
	worker := st.Services["demo_worker"].TaskTemplate.ContainerSpec
	if len(worker.Mounts) != 1 || worker.Mounts[0].Source != "demo_data" {
		t.Errorf("worker mounts %+v", worker.Mounts)
	}
	if len(worker.Secrets) != 1 || worker.Secrets[0].SecretName != passName || worker.Secrets[0].File.Name != "db" {
		t.Errorf("worker secret refs %+v", worker.Secrets)
	}
}

func TestRenderIsByteIdenticalAcrossRunsAndCheckouts(t *testing.T) {
	a := fixture(t)
	b := fixture(t) // another checkout directory, as on another host
	first := mustRender(t, "demo", a).Manifest
	for range 5 {
		if again := mustRender(t, "demo", a).Manifest; again != first {
			t.Fatalf("second render differs:\n%s\n---\n%s", first, again)
		}
	}
	if other := mustRender(t, "demo", b).Manifest; other != first {
		t.Fatalf("render in another checkout differs:\n%s\n---\n%s", first, other)
	}
	for _, root := range []string{a.Root, b.Root, os.TempDir(), "/flotilla-checkout"} {
		if strings.Contains(first, root) {
			t.Errorf("manifest contains the path %s", root)
		}
	}
}

func TestRenderIgnoresChangesThatDoNotAffectServices(t *testing.T) {
	d := fixture(t)
	before := mustRender(t, "demo", d).Manifest
	// The override rewritten with comments, other key order, another
	// quoting style, and an extension field that nothing uses.
	write(t, d, "compose.prod.yaml", `# production overrides
x-notes: tuned for the big cluster
services:
  web:
    deploy: {replicas: 4}   # more web
    environment:
      - "LOG_LEVEL=warn"
version: '3.8'
`)
	if after := mustRender(t, "demo", d).Manifest; after != before {
		t.Fatalf("cosmetic change altered the manifest:\n%s\n---\n%s", before, after)
	}
}

func TestRenderRotatesConfigNameWhenContentChanges(t *testing.T) {
	d := fixture(t)
	r1 := mustRender(t, "demo", d)
	st1 := mustConvert(t, r1, "demo")
	write(t, d, "config/app.conf", "listen = \":9090\"\n")
	r2 := mustRender(t, "demo", d)
	st2 := mustConvert(t, r2, "demo")

	old := sortedKeys(st1.Configs)
	cur := sortedKeys(st2.Configs)
	if len(old) != 1 || len(cur) != 1 || old[0] == cur[0] {
		t.Fatalf("config names %v then %v: want one, renamed", old, cur)
	}
	if !strings.HasPrefix(cur[0], "demo_app_conf-") {
		t.Errorf("name %q lost its scope", cur[0])
	}
	if ref := st2.Services["demo_web"].TaskTemplate.ContainerSpec.Configs[0].ConfigName; ref != cur[0] {
		t.Errorf("web still references %s, want %s", ref, cur[0])
	}
	if strings.Contains(r2.Manifest, old[0]) {
		t.Error("new manifest still mentions the old config")
	}
	// Secrets did not change, so neither did their names.
	if !slices.Equal(sortedKeys(st1.Secrets), sortedKeys(st2.Secrets)) {
		t.Error("secret names changed with a config")
	}
}

func TestRenderMergesFilesInOrder(t *testing.T) {
	d := fixture(t)
	d.Files = []string{"compose.yaml"}
	base := mustConvert(t, mustRender(t, "demo", d), "demo").Services["demo_web"]
	d.Files = []string{"compose.yaml", "compose.prod.yaml"}
	prod := mustConvert(t, mustRender(t, "demo", d), "demo").Services["demo_web"]

	if *base.Mode.Replicated.Replicas != 2 || *prod.Mode.Replicated.Replicas != 4 {
		t.Errorf("replicas %d then %d, want 2 then 4", *base.Mode.Replicated.Replicas, *prod.Mode.Replicated.Replicas)
	}
	if !slices.Contains(base.TaskTemplate.ContainerSpec.Env, "LOG_LEVEL=info") ||
		!slices.Contains(prod.TaskTemplate.ContainerSpec.Env, "LOG_LEVEL=warn") {
		t.Errorf("env %v then %v", base.TaskTemplate.ContainerSpec.Env, prod.TaskTemplate.ContainerSpec.Env)
	}
	// What the override does not mention is kept.
	if prod.TaskTemplate.ContainerSpec.Healthcheck == nil || prod.Labels["tier"] != "front" || len(prod.EndpointSpec.Ports) != 1 {
		t.Errorf("override dropped fields it does not set: %+v", prod)
	}
}

func TestRenderNeverReadsTheControllerEnvironment(t *testing.T) {
	t.Setenv("FLOTILLA_LEAK", "leaked-from-controller")
	t.Setenv("HOME", "/home/leaked")
	d := fixture(t)
	write(t, d, "compose.yaml", `services:
  app:
    image: busybox:${FLOTILLA_LEAK:-1.36}
    env_file: leak.env
    environment:
      PLAIN: ${FLOTILLA_LEAK}
      DEFAULTED: ${FLOTILLA_LEAK:-fallback}
      HOME_DIR: ${HOME}
      BARE:
    volumes:
      - type: bind
        source: /srv/data
        target: /data
`)
	write(t, d, "leak.env", "FLOTILLA_LEAK\nHOME\n")
	d.Files, d.EnvFiles = nil, nil
	r := mustRender(t, "demo", d)
	if strings.Contains(r.Manifest, "leaked") {
		t.Fatalf("controller environment reached the manifest:\n%s", r.Manifest)
	}
	env := mustConvert(t, r, "demo").Services["demo_app"].TaskTemplate.ContainerSpec
	if env.Image != "busybox:1.36" {
		t.Errorf("image %q", env.Image)
	}
	want := []string{"BARE", "DEFAULTED=fallback", "HOME_DIR=", "PLAIN="}
	if !slices.Equal(env.Env, want) {
		t.Errorf("env %q, want %q", env.Env, want)
	}
}

func TestRenderEnvFilesLaterWins(t *testing.T) {
	d := fixture(t)
	write(t, d, "override.env", "WEB_TAG=9.9\nREGISTRY\n")
	d.EnvFiles = []string{"app.env", "override.env"}
	st := mustConvert(t, mustRender(t, "demo", d), "demo")
	if img := st.Services["demo_web"].TaskTemplate.ContainerSpec.Image; img != "registry.example.com/team/web:9.9" {
		t.Errorf("image %q", img)
	}
}

func TestRenderRefusesPathsOutsideTheCheckout(t *testing.T) {
	// Each case gets a checkout next to a readable file it must not read.
	type setup func(t *testing.T, d *Dir, outside string)
	composeWith := func(extra string) setup {
		return func(t *testing.T, d *Dir, outside string) {
			write(t, *d, "compose.yaml", "services:\n  web:\n    image: nginx\n"+extra)
			d.Files, d.EnvFiles = nil, nil
		}
	}
	cases := []struct {
		name  string
		setup setup
		file  string
		field string
	}{
		{"config file climbing out", composeWith("configs:\n  app_conf:\n    file: ../../outside.txt\n"),
			"stack/compose.yaml", "configs.app_conf.file"},
		{"config file absolute", composeWith("configs:\n  app_conf:\n    file: /etc/passwd\n"),
			"stack/compose.yaml", "configs.app_conf.file"},
		{"config file far up", composeWith("configs:\n  app_conf:\n    file: ../../../../../../../../etc/passwd\n"),
			"stack/compose.yaml", "configs.app_conf.file"},
		{"secret file through a symlink", func(t *testing.T, d *Dir, outside string) {
			composeWith("secrets:\n  key:\n    file: ./link.txt\n")(t, d, outside)
			if err := os.Symlink(outside, filepath.Join(d.Root, d.Path, "link.txt")); err != nil {
				t.Fatal(err)
			}
		}, "stack/compose.yaml", "secrets.key.file"},
		{"config in a symlinked directory", func(t *testing.T, d *Dir, outside string) {
			composeWith("configs:\n  c:\n    file: ./dir/outside.txt\n")(t, d, outside)
			if err := os.Symlink(filepath.Dir(outside), filepath.Join(d.Root, d.Path, "dir")); err != nil {
				t.Fatal(err)
			}
		}, "stack/compose.yaml", "configs.c.file"},
		{"service env_file climbing out", func(t *testing.T, d *Dir, outside string) {
			write(t, *d, "compose.yaml", "services:\n  web:\n    image: nginx\n    env_file:\n      - ok.env\n      - ../../outside.txt\n")
			write(t, *d, "ok.env", "A=1\n")
			d.Files, d.EnvFiles = nil, nil
		}, "stack/compose.yaml", "services.web.env_file"},
		{"service env_file through a symlink", func(t *testing.T, d *Dir, outside string) {
			composeWith("")(t, d, outside)
			write(t, *d, "compose.yaml", "services:\n  web:\n    image: nginx\n    env_file: link.env\n")
			if err := os.Symlink(outside, filepath.Join(d.Root, d.Path, "link.env")); err != nil {
				t.Fatal(err)
			}
		}, "stack/compose.yaml", "services.web.env_file"},
		{"compose file outside", func(t *testing.T, d *Dir, outside string) {
			d.Files = []string{"../../outside.txt"}
		}, "../outside.txt", ""},
		{"interpolation env file outside", func(t *testing.T, d *Dir, outside string) {
			d.EnvFiles = []string{"/etc/hostname"}
		}, "/etc/hostname", ""},
		{"project path outside", func(t *testing.T, d *Dir, outside string) {
			d.Path = "../"
		}, "..", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			outside := filepath.Join(parent, "outside.txt")
			if err := os.WriteFile(outside, []byte("SECRET_OUTSIDE=do-not-read\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			d := fixture(t)
			// Put the checkout inside parent so "../../outside.txt" from
			// the project exists and would be readable.
			checkout := filepath.Join(parent, "checkout")
			if err := os.Rename(d.Root, checkout); err != nil {
				t.Fatal(err)
			}
			d.Root = checkout
			c.setup(t, &d, outside)

			_, err := Render("demo", d)
			fe := faultOf(t, err)
			if !errors.Is(err, source.ErrOutsideRepository) {
				t.Errorf("error does not wrap ErrOutsideRepository: %v", err)
			}
			if fe.File != c.file || fe.Field != c.field {
				t.Errorf("File %q Field %q, want %q %q (%v)", fe.File, fe.Field, c.file, c.field, err)
			}
			if strings.Contains(err.Error(), "do-not-read") {
				t.Errorf("the outside file was read: %v", err)
			}
		})
	}
}

func TestRenderReportsBadInputWithFileAndField(t *testing.T) {
	cases := []struct {
		name    string
		compose string
		extra   map[string]string
		files   []string
		env     []string
		file    string
		field   string
		line    int
		is      error
		msg     string
	}{
		{name: "yaml syntax", compose: "services:\n  web:\n\timage: nginx\n", file: "stack/compose.yaml", line: 3},
		{name: "unknown service key", compose: "services:\n  web:\n    image: nginx\n    colour: blue\n",
			file: "stack/compose.yaml", field: "services.web.colour", line: 4, msg: "colour"},
		{name: "two unknown service keys", compose: "services:\n  web:\n    image: nginx\n    colour: blue\n    flavour: mint\n",
			file: "stack/compose.yaml", field: "services.web.colour", line: 4, msg: "flavour"},
		{name: "name server not an address", compose: "services:\n  web:\n    image: nginx\n    dns: [1.1.1.1, dns.example]\n",
			file: "stack/compose.yaml", field: "services.web.dns", line: 4, msg: "dns.example"},
		{name: "subnet not a prefix", compose: "services:\n  web:\n    image: nginx\nnetworks:\n  n:\n    ipam:\n      config:\n        - subnet: 10.1.0.0/33\n",
			file: "stack/compose.yaml", field: "networks.n.ipam.config.0.subnet", line: 8, msg: "10.1.0.0/33"},
		{name: "unknown top-level key", compose: "services:\n  web:\n    image: nginx\nextras: {}\n",
			file: "stack/compose.yaml", field: "extras", line: 4},
		{name: "wrong type", compose: "services:\n  web:\n    image: nginx\n    deploy:\n      replicas: many\n",
			file: "stack/compose.yaml", field: "services.web.deploy.replicas", line: 5},
		{name: "missing compose file", files: []string{"nope.yaml"}, file: "stack/nope.yaml", is: fs.ErrNotExist},
		{name: "missing config file", compose: "services:\n  web:\n    image: nginx\nconfigs:\n  c:\n    file: ./none.conf\n",
			file: "stack/compose.yaml", field: "configs.c.file", line: 6, is: fs.ErrNotExist},
		{name: "missing env_file", compose: "services:\n  web:\n    image: nginx\n    env_file: none.env\n",
			file: "stack/compose.yaml", field: "services.web.env_file", line: 4, is: fs.ErrNotExist},
		{name: "missing interpolation env file", compose: "services:\n  web:\n    image: nginx\n", env: []string{"none.env"},
			file: "stack/none.env", is: fs.ErrNotExist},
		{name: "env file syntax", compose: "services:\n  web:\n    image: nginx\n", env: []string{"bad.env"},
			extra: map[string]string{"bad.env": "OK=1\nBAD KEY=2\n"}, file: "stack/bad.env", line: 2},
		{name: "no image", compose: "services:\n  web:\n    command: [run]\n", file: "stack/compose.yaml", field: "services.web", line: 2},
		{name: "bad image", compose: "services:\n  web:\n    image: \"UPPER:case:x\"\n", file: "stack/compose.yaml", field: "services.web.image", line: 3},
		{name: "relative bind mount", compose: "services:\n  web:\n    image: nginx\n    volumes:\n      - ./data:/data\n",
			file: "stack/compose.yaml", field: "services.web.volumes", line: 4, is: ErrUnsupported, msg: "./data"},
		{name: "inline config content", compose: "services:\n  web:\n    image: nginx\nconfigs:\n  c:\n    content: hello\n",
			file: "stack/compose.yaml", field: "configs.c.content", line: 6, is: ErrUnsupported},
		{name: "config without file", compose: "services:\n  web:\n    image: nginx\nconfigs:\n  c:\n    labels: {a: b}\n",
			file: "stack/compose.yaml", field: "configs.c", line: 5},
		{name: "required variable", compose: "services:\n  web:\n    image: nginx:${TAG:?set TAG}\n",
			file: "stack/compose.yaml", field: "services.web.image", line: 3, msg: "set TAG"},
		{name: "forbidden option", compose: "services:\n  web:\n    image: nginx\n    extends: base\n",
			file: "stack/compose.yaml", field: "services.web.extends", line: 4, msg: "extends"},
		{name: "undeclared network", compose: "services:\n  web:\n    image: nginx\n    networks: [nowhere]\n",
			file: "stack/compose.yaml", field: "services.web", line: 2, msg: "nowhere"},
		{name: "undeclared config", compose: "services:\n  web:\n    image: nginx\n    configs: [nothing]\n",
			file: "stack/compose.yaml", field: "services.web", line: 2, msg: "nothing"},
		{name: "not a mapping", compose: "- just\n- a list\n", file: "stack/compose.yaml"},
		{name: "bad override", compose: "services:\n  web:\n    image: nginx\n", files: []string{"compose.yaml", "over.yaml"},
			extra: map[string]string{"over.yaml": "services:\n  web:\n    ports: [\"x:y\"]\n"}, file: "stack/over.yaml", field: "services.web.ports.0", line: 3},
		{name: "version mismatch", compose: "version: '3.8'\nservices:\n  web:\n    image: nginx\n", files: []string{"compose.yaml", "over.yaml"},
			extra: map[string]string{"over.yaml": "services:\n  web:\n    image: nginx:2\n"}, file: "stack/over.yaml", field: "version", msg: "3.8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := fixture(t)
			d.Files, d.EnvFiles = c.files, c.env
			if c.compose != "" {
				write(t, d, "compose.yaml", c.compose)
			}
			for name, content := range c.extra {
				write(t, d, name, content)
			}
			_, err := Render("demo", d)
			fe := faultOf(t, err)
			if fe.File != c.file || fe.Field != c.field || (c.line != 0 && fe.Line != c.line) {
				t.Errorf("got File %q Field %q Line %d, want %q %q %d: %v", fe.File, fe.Field, fe.Line, c.file, c.field, c.line, err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error does not wrap %v: %v", c.is, err)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not mention %q", err, c.msg)
			}
			if strings.Contains(err.Error(), d.Root) || strings.Contains(err.Error(), "/flotilla-checkout") {
				t.Errorf("error shows a machine path: %v", err)
			}
		})
	}
}

func TestRenderKeepsSecretPlaintextOutOfTheManifest(t *testing.T) {
	d := fixture(t)
	const plain = "s3cr3t-Pl41nt3xt-value"
	write(t, d, "secrets/other.txt", plain+"-2")
	write(t, d, "compose.prod.yaml", "version: '3.8'\nservices:\n  web:\n    secrets: [other]\nsecrets:\n  other:\n    file: ./secrets/other.txt\n    name: fixed_other\n")
	r := mustRender(t, "demo", d)
	if strings.Contains(r.Manifest, plain) {
		t.Fatalf("secret plaintext in manifest:\n%s", r.Manifest)
	}
	if string(r.Secrets["fixed_other"]) != plain+"-2" || len(r.Secrets) != 2 {
		t.Errorf("Rendered.Secrets has %v", sortedKeys(r.Secrets))
	}
	st := mustConvert(t, r, "demo")
	for name, s := range st.Secrets {
		if s.Data != nil {
			t.Errorf("secret %s converted with data", name)
		}
	}
}

func TestRenderKeepsAnExplicitName(t *testing.T) {
	d := fixture(t)
	write(t, d, "compose.prod.yaml", "version: '3.8'\nconfigs:\n  app_conf:\n    name: app-conf-pinned\n    file: ./config/app.conf\n")
	r := mustRender(t, "demo", d)
	st := mustConvert(t, r, "demo")
	if _, ok := st.Configs["app-conf-pinned"]; !ok || len(st.Configs) != 1 {
		t.Fatalf("configs %v, want the explicit name", sortedKeys(st.Configs))
	}
	if ref := st.Services["demo_web"].TaskTemplate.ContainerSpec.Configs[0].ConfigName; ref != "app-conf-pinned" {
		t.Errorf("reference %q", ref)
	}
	// The content still reaches the manifest, so a change is still a change.
	write(t, d, "config/app.conf", "other\n")
	if mustRender(t, "demo", d).Manifest == r.Manifest {
		t.Error("changed content of a pinned config left the manifest unchanged")
	}
}

func TestRenderLeavesExternalObjectsAlone(t *testing.T) {
	d := fixture(t)
	write(t, d, "compose.yaml", `services:
  web:
    image: nginx
    networks: [edge]
    configs: [shared]
    secrets: [tls]
    volumes: [certs:/certs]
networks:
  edge:
    external: true
    name: traefik_public
configs:
  shared:
    external: true
secrets:
  tls:
    external: true
    name: site_tls
volumes:
  certs:
    external: true
`)
	d.Files, d.EnvFiles = nil, nil
	r := mustRender(t, "demo", d)
	if len(r.Secrets) != 0 {
		t.Errorf("external secret got plaintext: %v", sortedKeys(r.Secrets))
	}
	st := mustConvert(t, r, "demo")
	if len(st.Networks) != 0 || !slices.Equal(st.ExternalNetworks, []string{"traefik_public"}) {
		t.Errorf("networks %v external %v", sortedKeys(st.Networks), st.ExternalNetworks)
	}
	if len(st.Configs) != 0 || !slices.Equal(st.ExternalConfigs, []string{"shared"}) {
		t.Errorf("configs %v external %v", sortedKeys(st.Configs), st.ExternalConfigs)
	}
	if len(st.Secrets) != 0 || !slices.Equal(st.ExternalSecrets, []string{"site_tls"}) {
		t.Errorf("secrets %v external %v", sortedKeys(st.Secrets), st.ExternalSecrets)
	}
	if st.Volumes != nil || !slices.Equal(st.ExternalVolumes, []string{"certs"}) {
		t.Errorf("volumes %v external %v", st.Volumes, st.ExternalVolumes)
	}
	cs := st.Services["demo_web"].TaskTemplate.ContainerSpec
	if cs.Configs[0].ConfigName != "shared" || cs.Secrets[0].SecretName != "site_tls" || cs.Mounts[0].Source != "certs" {
		t.Errorf("references %+v %+v %+v", cs.Configs, cs.Secrets, cs.Mounts)
	}
}

func TestRenderFindsTheDefaultComposeFile(t *testing.T) {
	d := fixture(t)
	write(t, d, "docker-compose.yml", "services:\n  other:\n    image: nginx\n")
	d.Files, d.EnvFiles = nil, []string{"app.env"}
	// compose.yaml comes first in the search order.
	names, err := ServiceNames(mustRender(t, "demo", d).Manifest)
	if err != nil || !slices.Equal(names, []string{"cache", "web", "worker"}) {
		t.Errorf("ServiceNames %v %v", names, err)
	}
	if err := os.Remove(filepath.Join(d.Root, d.Path, "compose.yaml")); err != nil {
		t.Fatal(err)
	}
	names, _ = ServiceNames(mustRender(t, "demo", d).Manifest)
	if !slices.Equal(names, []string{"other"}) {
		t.Errorf("ServiceNames %v, want docker-compose.yml's", names)
	}
	d.Path, d.EnvFiles = "stack/config", nil
	fe := faultOf(t, func() error { _, err := Render("demo", d); return err }())
	if fe.File != "stack/config" || !errors.Is(fe, fs.ErrNotExist) {
		t.Errorf("no compose file: %v", fe)
	}
}

func TestRenderRejectsBadStackNames(t *testing.T) {
	for _, s := range []string{"", "-x", "a b", "a/b", "a.b"} {
		if _, err := Render(s, fixture(t)); err == nil {
			t.Errorf("stack %q accepted", s)
		}
	}
}

func TestRenderResolvesPathsFromTheFirstFilesDirectory(t *testing.T) {
	d := fixture(t)
	want := mustRender(t, "demo", d).Manifest
	// The same files named from the repository root: config, secret and
	// env_file paths still resolve next to compose.yaml, as with
	// `docker stack deploy -c stack/compose.yaml`.
	d.Path = ""
	d.Files = []string{"stack/compose.yaml", "stack/compose.prod.yaml"}
	d.EnvFiles = []string{"stack/app.env"}
	if got := mustRender(t, "demo", d).Manifest; got != want {
		t.Errorf("manifest differs:\n%s\n---\n%s", want, got)
	}
}

func TestRenderWarnsAboutIgnoredOptions(t *testing.T) {
	d := fixture(t)
	write(t, d, "compose.yaml", "services:\n  web:\n    image: nginx\n    privileged: true\n    container_name: web1\n")
	d.Files, d.EnvFiles = nil, nil
	r := mustRender(t, "demo", d)
	want := []string{
		"ignoring unsupported service option privileged",
		"ignoring deprecated service option container_name: Setting the container name is not supported.",
	}
	if !slices.Equal(r.Warnings, want) {
		t.Errorf("warnings %q, want %q", r.Warnings, want)
	}
}
