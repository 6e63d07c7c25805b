package compose

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// renderBoth renders d whole and incrementally (reusing whatever the
// previous incremental render of the same scope left), and fails unless
// both give the same manifest, secrets, warnings and conversion, or the
// same error. It returns the incremental run, nil when the render was
// whole or failed.
func renderBoth(t *testing.T, stack string, d Dir) *incRun {
	t.Helper()
	whole, werr := render(stack, d, renderOpts{inc: incOff})
	var run *incRun
	inc, ierr := render(stack, d, renderOpts{inc: incOn, done: func(r *incRun) { run = r }})
	if werr != nil || ierr != nil {
		if fmt.Sprint(werr) != fmt.Sprint(ierr) {
			t.Fatalf("whole render: %v\nincremental render: %v", werr, ierr)
		}
		return nil
	}
	if whole.Manifest != inc.Manifest {
		t.Fatalf("manifests differ:\nwhole:\n%s\nincremental:\n%s", whole.Manifest, inc.Manifest)
	}
	if !reflect.DeepEqual(whole.Secrets, inc.Secrets) || !reflect.DeepEqual(whole.Warnings, inc.Warnings) || !reflect.DeepEqual(whole.Sealed, inc.Sealed) {
		t.Fatalf("secrets, sealed or warnings differ:\n%v %v %v\n%v %v %v", whole.Secrets, whole.Sealed, whole.Warnings, inc.Secrets, inc.Sealed, inc.Warnings)
	}
	ctx := context.Background()
	fresh, err := newConvertTemplate(ctx, whole.Manifest, stack)
	if err != nil {
		t.Fatalf("fresh conversion: %v", err)
	}
	want, err := fresh.instantiate(ctx, whole.Manifest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run == nil {
		return nil
	}
	if run.tmpl == nil {
		t.Fatal("incremental render made no conversion")
	}
	got, err := run.tmpl.instantiate(ctx, inc.Manifest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fresh.configNames, run.tmpl.configNames) || !reflect.DeepEqual(fresh.secretNames, run.tmpl.secretNames) {
		t.Fatalf("reference names differ: %v %v, want %v %v", run.tmpl.configNames, run.tmpl.secretNames, fresh.configNames, fresh.secretNames)
	}
	if !reflect.DeepEqual(want, got) {
		for name, spec := range want.Services {
			if !reflect.DeepEqual(spec, got.Services[name]) {
				t.Errorf("service %s:\nwhole:       %+v\nincremental: %+v", name, spec, got.Services[name])
			}
		}
		t.Fatalf("conversions differ:\nwhole:       %+v\nincremental: %+v", want, got)
	}
	return run
}

// copyTree copies the directory src into a new temporary directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// Every project of the compatibility corpus, the examples and the test
// data renders and converts to the same manifest and the same service specs
// incrementally as whole, both from nothing and from the pieces of its own
// previous render.
func TestIncrementalRenderOfEveryFixtureEqualsAWholeRender(t *testing.T) {
	var dirs []string
	for _, root := range []string{"testdata", "../examples"} {
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && slices.Contains(defaultFiles, e.Name()) {
				dirs = append(dirs, filepath.Dir(p))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) < 15 {
		t.Fatalf("only %d fixtures found: %v", len(dirs), dirs)
	}
	incremental := 0
	for i, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			root := copyTree(t, dir)
			env := "EXT_NET=ext-net\nEXT_CONFIG=ext-config\nEXT_SECRET=ext-secret\nSELF=self\n"
			if err := os.WriteFile(filepath.Join(root, "incremental-test.env"), []byte(env), 0o644); err != nil {
				t.Fatal(err)
			}
			d := Dir{Root: root, EnvFiles: []string{"incremental-test.env"}}
			stack := fmt.Sprintf("fixture%d", i)
			if renderBoth(t, stack, d) != nil {
				incremental++
			}
			if run := renderBoth(t, stack, d); run != nil && (run.loaded != 0 || run.converted != 0) {
				t.Errorf("unchanged project loaded %d and converted %d services again", run.loaded, run.converted)
			}
		})
	}
	if incremental < 10 {
		t.Errorf("only %d of %d fixtures rendered incrementally", incremental, len(dirs))
	}
}

// genService is one service of a generated stack.
type genService struct {
	image   string
	env     string
	wave    int
	nets    []string
	depends string
	common  bool // merges the x-common anchor
	gone    bool
}

// genStack is a generated stack: services and the shared sections they
// reach (an anchor, interpolation, networks, a config and a secret).
type genStack struct {
	services []genService
	netLabel string
	conf     string
	tag      string // interpolated through the env file
	restart  string // in x-common
	// anchors makes x-common an anchor the services merge; without, its
	// fields are written into them.
	anchors bool
}

func (g *genStack) write(t *testing.T, dir string) {
	t.Helper()
	var b strings.Builder
	anchor := ""
	if g.anchors {
		anchor = " &common"
	}
	fmt.Fprintf(&b, "version: \"3.8\"\nx-common:%s\n  restart: %s\n  labels: {tier: generated}\nservices:\n", anchor, g.restart)
	for i, s := range g.services {
		if s.gone {
			continue
		}
		fmt.Fprintf(&b, "  svc%03d:\n", i)
		switch {
		case s.common && g.anchors:
			b.WriteString("    <<: *common\n")
		case s.common:
			fmt.Fprintf(&b, "    restart: %s\n    labels: {tier: generated}\n", g.restart)
		}
		fmt.Fprintf(&b, "    image: %s:${TAG}\n    environment:\n      VALUE: %q\n", s.image, s.env)
		if len(s.nets) > 0 {
			fmt.Fprintf(&b, "    networks: [%s]\n", strings.Join(s.nets, ", "))
		}
		if s.depends != "" {
			fmt.Fprintf(&b, "    depends_on: [%s]\n", s.depends)
		}
		if s.wave != 0 {
			fmt.Fprintf(&b, "    x-flotilla: {wave: %d}\n", s.wave)
		}
		if i%5 == 0 {
			b.WriteString("    configs: [{source: app, target: /etc/app.conf}]\n    secrets: [token]\n")
		}
		if i%7 == 0 {
			fmt.Fprintf(&b, "    ports: [\"%d:80\"]\n    volumes: [\"data:/data\"]\n", 20000+i)
		}
		b.WriteString("    deploy: {replicas: 0}\n")
	}
	fmt.Fprintf(&b, "networks:\n  front: {driver: overlay, labels: {l: %q}}\n  back: {}\n  ext: {external: true, name: ext-net}\n", g.netLabel)
	b.WriteString("volumes:\n  data: {}\nconfigs:\n  app: {file: ./app.conf}\nsecrets:\n  token: {file: ./token}\n")
	for name, body := range map[string]string{
		"docker-compose.yml": b.String(),
		"app.conf":           g.conf,
		"token":              "t0ken\n",
		".env":               "TAG=" + g.tag + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A large generated stack edited one service at a time at random — its
// image, environment, wave, networks, dependencies, anchor merge, removal
// or a new service — renders and converts incrementally to what a whole
// render gives, running the loader and convert on that service only, and a
// bad edit fails both alike; an
// edit to what services share (a network, the anchor, an interpolated
// variable, a config's content) does the same with every service.
func TestIncrementalRenderOfRandomEditsEqualsAWholeRender(t *testing.T) {
	for _, anchors := range []bool{false, true} {
		t.Run(fmt.Sprintf("anchors=%v", anchors), func(t *testing.T) { testRandomEdits(t, anchors) })
	}
}

func testRandomEdits(t *testing.T, anchors bool) {
	rng := rand.New(rand.NewPCG(11, 17))
	g := &genStack{netLabel: "a", conf: "listen 80\n", tag: "1", restart: "always", anchors: anchors}
	allNets := []string{"front", "back", "ext"}
	for i := range 40 {
		g.services = append(g.services, genService{
			image: fmt.Sprintf("example/app%d", i%4), env: "v0", wave: i % 3,
			nets: allNets[:i%4], common: i%2 == 0,
		})
	}
	dir := t.TempDir()
	d := Dir{Root: dir, EnvFiles: []string{".env"}, APIVersion: "1.41"}
	g.write(t, dir)
	src, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, cut := chunked(src, true); !cut {
		t.Fatal("file parsed whole, want piece by piece")
	}
	if run := renderBoth(t, fmt.Sprintf("gen%v", anchors), d); run == nil || run.loaded != len(g.services) {
		t.Fatalf("first render: %+v", run)
	}
	for step := range 40 {
		i := rng.IntN(len(g.services))
		before := g.services[i]
		before.nets = slices.Clone(before.nets)
		s := &g.services[i]
		var what string
		bad := ""
		switch k := rng.IntN(14); k {
		case 12:
			bad, what = "image", "bad image"
		case 13:
			bad, what = "wave", "bad wave"
		case 0:
			s.image, what = s.image+"x", "image"
		case 1:
			s.env, what = fmt.Sprintf("v%d", step+1), "environment"
		case 2:
			s.wave, what = (s.wave+1)%4, "wave"
		case 3:
			s.nets, what = allNets[:rng.IntN(4)], "networks"
		case 4:
			s.depends, what = fmt.Sprintf("svc%03d", rng.IntN(len(g.services))), "depends_on"
		case 5:
			s.common, what = !s.common, "anchor merge"
		case 6:
			s.gone, what = !s.gone, "removal"
		case 7:
			g.services = append(g.services, genService{image: "example/new", env: "new"})
			i, what = len(g.services)-1, "new service"
			before = genService{gone: true}
		case 8:
			g.netLabel, what = fmt.Sprintf("l%d", step), "network label"
		case 9:
			g.restart, what = map[string]string{"always": "on-failure", "on-failure": "no", "no": "always"}[g.restart], "anchor"
		case 10:
			g.tag, what = fmt.Sprint(step), "interpolated tag"
		default:
			g.conf, what = fmt.Sprintf("listen %d\n", step), "config content"
		}
		shared := isShared(what)
		if bad != "" {
			// A bad edit fails both renders alike and leaves nothing.
			saved := *s
			if bad == "image" {
				s.image = "Bad Image"
			} else {
				s.wave = 5000
			}
			s.gone = false
			g.write(t, dir)
			if run := renderBoth(t, fmt.Sprintf("gen%v", anchors), d); run != nil {
				t.Fatalf("step %d (%s): rendered", step, what)
			}
			*s = saved
			if !s.gone {
				s.env = fmt.Sprintf("fixed%d", step)
			}
		}
		g.write(t, dir)
		run := renderBoth(t, fmt.Sprintf("gen%v", anchors), d)
		if run == nil {
			t.Fatalf("step %d (%s): not rendered incrementally", step, what)
		}
		live := 0
		for _, s := range g.services {
			if !s.gone {
				live++
			}
		}
		wantLoaded, wantConverted := 0, 0
		switch {
		case what == "config content":
			// The files are the same; the config's name in the manifest,
			// which every service is converted against, is not.
			wantLoaded, wantConverted = 0, live
		case shared:
			wantLoaded, wantConverted = live, live
		case !g.services[i].gone && !reflect.DeepEqual(before, g.services[i]):
			wantLoaded, wantConverted = 1, 1
		}
		if run.loaded != wantLoaded || run.converted != wantConverted {
			t.Errorf("step %d (%s of svc%03d): loaded %d and converted %d services, want %d and %d", step, what, i, run.loaded, run.converted, wantLoaded, wantConverted)
		}
	}
}

// isShared reports whether an edit is to what every service shares.
func isShared(what string) bool {
	switch what {
	case "network label", "anchor", "interpolated tag", "config content":
		return true
	}
	return false
}

// Renders of one application running at once, each from a different
// edit, share the pieces of earlier renders without changing them: each
// gives what a whole render of its own files gives.
func TestConcurrentIncrementalRendersOfOneApplicationDoNotMix(t *testing.T) {
	g := &genStack{netLabel: "a", conf: "listen 80\n", tag: "1", restart: "always"}
	for range 30 {
		g.services = append(g.services, genService{image: "example/app", env: "v0", nets: []string{"front"}})
	}
	base := t.TempDir()
	g.write(t, base)
	if _, err := render("conc", Dir{Root: base, EnvFiles: []string{".env"}}, renderOpts{inc: incOn}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for w := range 8 {
		dir := t.TempDir()
		gw := *g
		gw.services = slices.Clone(g.services)
		gw.services[w].env = fmt.Sprintf("worker-%d", w)
		if w%3 == 0 {
			gw.netLabel = fmt.Sprintf("w%d", w)
		}
		gw.write(t, dir)
		go func() {
			d := Dir{Root: dir, EnvFiles: []string{".env"}}
			for range 3 {
				inc, err := render("conc", d, renderOpts{inc: incOn})
				if err != nil {
					errs <- err
					return
				}
				whole, err := render("conc", d, renderOpts{inc: incOff})
				if err != nil {
					errs <- err
					return
				}
				if inc.Manifest != whole.Manifest {
					errs <- fmt.Errorf("worker %d: incremental manifest differs from the whole one", w)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The memo of incremental renders keeps within its bounds, dropping other
// applications' states to make room and never one larger than it all.
func TestIncrementalMemoKeepsWithinItsBounds(t *testing.T) {
	c := &incMemo{maxBytes: 100, maxEntries: 3}
	state := func(scope string) *project {
		return &project{inc: &incRun{scope: scope, next: &incState{}, tmpl: &convertTemplate{}}}
	}
	for i := range 10 {
		c.store(state(fmt.Sprint(i)), 40)
		if c.bytes > 100 || len(c.m) > 3 {
			t.Fatalf("after %d stores: %d bytes in %d entries", i+1, c.bytes, len(c.m))
		}
	}
	if c.get("9") == nil {
		t.Error("latest state dropped")
	}
	c.store(state("big"), 101)
	if c.get("big") != nil {
		t.Error("state larger than the memo kept")
	}
	c.store(state("9"), 10)
	if got := c.bytes; got != 50 {
		t.Errorf("replacing a state counts %d bytes", got)
	}
}

// A service whose env_file changed is loaded again though its own text did
// not change: its environment is part of what it is.
func TestIncrementalRenderLoadsAServiceWhoseEnvFileChanged(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	write(t, d, "docker-compose.yml", "version: \"3.8\"\nservices:\n  web:\n    image: nginx:1.25\n    env_file: web.env\n  db:\n    image: postgres:16\n")
	write(t, d, "web.env", "MODE=one\n")
	renderBoth(t, "envfile", d)
	write(t, d, "web.env", "MODE=two\n")
	run := renderBoth(t, "envfile", d)
	if run == nil || run.loaded != 1 || run.converted != 1 {
		t.Fatalf("after the env file changed: %+v, want web loaded and converted again", run)
	}
}

// A manifest rendered incrementally is known to be valid, as one rendered
// whole is, so reading it again (for its services or its order) does not
// validate it again.
func TestIncrementallyRenderedManifestNeedsNoValidationToRead(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	write(t, d, "docker-compose.yml", "version: \"3.8\"\nservices:\n  web:\n    image: nginx:1.25\n  db:\n    image: postgres:16\n    x-flotilla: {wave: 1}\n")
	var run *incRun
	r, err := render("validated", d, renderOpts{inc: incOn, done: func(x *incRun) { run = x }})
	if err != nil || run == nil {
		t.Fatalf("render: %v (incremental: %v)", err, run != nil)
	}
	if !memo.validated.has(manifestSum(r.Manifest)) {
		t.Fatal("manifest not marked validated")
	}
	if names, err := ServiceNames(r.Manifest); err != nil || strings.Join(names, ",") != "db,web" {
		t.Fatalf("ServiceNames: %v %v", names, err)
	}
}
