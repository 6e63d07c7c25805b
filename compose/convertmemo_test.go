package compose

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/docker/cli/cli/compose/convert"
	composetypes "github.com/docker/cli/cli/compose/types"
)

// idResolver knows every name but those in missing, and counts its calls.
type idResolver struct {
	missing map[string]bool
	calls   int
}

func (r *idResolver) ids(names []string) map[string]string {
	r.calls++
	out := map[string]string{}
	for _, n := range names {
		if !r.missing[n] {
			out[n] = "id-" + n
		}
	}
	return out
}

func (r *idResolver) ConfigIDs(_ context.Context, names []string) (map[string]string, error) {
	return r.ids(names), nil
}

func (r *idResolver) SecretIDs(_ context.Context, names []string) (map[string]string, error) {
	return r.ids(names), nil
}

// slowConvert is the conversion without the memo: decode, load and
// convert, with references resolved as Convert did before it had one.
func slowConvert(ctx context.Context, manifest, stack string, r Resolver) (*Stack, error) {
	st, _, err := convertManifest(ctx, manifest, stack, func(ns convert.Namespace, cfg *composetypes.Config) (*refClient, error) {
		return newRefClient(ctx, ns, cfg, r)
	})
	return st, err
}

// corpusManifests renders every project of the compatibility corpus, and a
// shape it lacks (a credential spec from a config), as the compatibility test renders them.
func corpusManifests(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	dirs, err := filepath.Glob("testdata/compat/*/docker-compose.yml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range dirs {
		name := filepath.Base(filepath.Dir(f))
		root := t.TempDir()
		if err := os.CopyFS(root, os.DirFS(filepath.Dir(f))); err != nil {
			t.Fatal(err)
		}
		env := "EXT_NET=ext-net\nEXT_CONFIG=ext-conf\nEXT_SECRET=ext-secret\nSELF=self\n"
		if err := os.WriteFile(filepath.Join(root, "compat.env"), []byte(env), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Render("compat", Dir{Root: root, EnvFiles: []string{"compat.env"}})
		if err != nil {
			t.Fatalf("%s: render: %v", name, err)
		}
		out[name] = r.Manifest
	}
	d := Dir{Root: t.TempDir()}
	write(t, d, "docker-compose.yml", `version: "3.8"
services:
  win:
    image: example/win:1
    credential_spec: {config: cred}
    configs: [cred, {source: app, target: /etc/a}]
    secrets: [token]
  plain:
    image: example/app:1
configs:
  cred: {file: ./cred.json, name: compat_cred}
  app: {file: ./app.conf}
secrets:
  token: {file: ./token}
`)
	write(t, d, "cred.json", `{"CredentialSpec": {}}`)
	write(t, d, "app.conf", "a = 1\n")
	write(t, d, "token", "t0ken")
	out["credential-spec"] = mustRender(t, "compat", d).Manifest
	return out
}

// The memo changes what a conversion costs, never what it gives: over the
// whole compatibility corpus, the first conversion of a manifest and every
// later one give exactly the specs a conversion without the memo gives,
// with ids from a resolver and without, and a name the resolver does not
// know fails with the error convert itself reports.
func TestConvert_memoisedConversionGivesExactlyTheSpecsOfAFullOne(t *testing.T) {
	ctx := context.Background()
	for name, manifest := range corpusManifests(t) {
		t.Run(name, func(t *testing.T) {
			for _, r := range []Resolver{nil, &idResolver{}} {
				want, err := slowConvert(ctx, manifest, "compat", r)
				if err != nil {
					t.Fatal(err)
				}
				memo.conversions.reset()
				for i, what := range []string{"first", "memoised"} {
					got, err := Convert(ctx, manifest, "compat", r)
					if err != nil {
						t.Fatalf("%s conversion: %v", what, err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s conversion (resolver %v) differs from a full one:\n got %+v\nwant %+v", what, r != nil, got.Services, want.Services)
					}
					if _, ok := memo.conversions.get(manifest); !ok && i == 0 {
						t.Fatal("conversion was not memoised")
					}
				}
			}
			st, err := slowConvert(ctx, manifest, "compat", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, spec := range st.Services {
				cs := spec.TaskTemplate.ContainerSpec
				if cs == nil || len(cs.Secrets)+len(cs.Configs) == 0 {
					continue
				}
				var ref string
				if len(cs.Secrets) > 0 {
					ref = cs.Secrets[0].SecretName
				} else {
					ref = cs.Configs[0].ConfigName
				}
				r := &idResolver{missing: map[string]bool{ref: true}}
				_, want := slowConvert(ctx, manifest, "compat", r)
				_, got := Convert(ctx, manifest, "compat", &idResolver{missing: map[string]bool{ref: true}})
				if want == nil || got == nil || got.Error() != want.Error() {
					t.Errorf("resolver without %q: memoised conversion says %v, a full one %v", ref, got, want)
				}
				break
			}
		})
	}
}

// What Convert returns is the caller's: changing it (as a deploy does when
// it adds labels or plaintext) changes nothing the next conversion gives.
func TestConvert_resultIsTheCallersToChange(t *testing.T) {
	ctx := context.Background()
	manifest := corpusManifests(t)["credential-spec"]
	first, err := Convert(ctx, manifest, "compat", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := slowConvert(ctx, manifest, "compat", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range first.Services {
		spec.Labels["changed"] = "yes"
		spec.TaskTemplate.ContainerSpec.Env = append(spec.TaskTemplate.ContainerSpec.Env, "X=1")
		for _, s := range spec.TaskTemplate.ContainerSpec.Secrets {
			s.SecretID = "changed"
		}
		first.Services[name] = spec
	}
	for name, c := range first.Configs {
		c.Data[0] = 'X'
		first.Configs[name] = c
	}
	again, err := Convert(ctx, manifest, "compat", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Errorf("a change to one conversion's result reached the next:\n got %+v\nwant %+v", again.Services, want.Services)
	}
}

// A memoised manifest asks the resolver once per conversion, as a full
// conversion does, so an id that moved on the swarm is the one a deploy
// writes.
func TestConvert_memoisedConversionAsksTheResolverForTodaysIDs(t *testing.T) {
	ctx := context.Background()
	manifest := corpusManifests(t)["credential-spec"]
	if _, err := Convert(ctx, manifest, "compat", &idResolver{}); err != nil {
		t.Fatal(err)
	}
	r := &moved{}
	st, err := Convert(ctx, manifest, "compat", r)
	if err != nil {
		t.Fatal(err)
	}
	if r.calls != 2 {
		t.Errorf("resolver asked %d times, want once for configs and once for secrets", r.calls)
	}
	win := st.Services["compat_win"].TaskTemplate.ContainerSpec
	for _, c := range win.Configs {
		if !strings.HasPrefix(c.ConfigID, "moved-") {
			t.Errorf("config %s has id %q, not today's", c.ConfigName, c.ConfigID)
		}
	}
	if cred := win.Privileges.CredentialSpec.Config; !strings.HasPrefix(cred, "moved-") {
		t.Errorf("credential spec names config %q, not today's id", cred)
	}
	for _, s := range win.Secrets {
		if !strings.HasPrefix(s.SecretID, "moved-") {
			t.Errorf("secret %s has id %q, not today's", s.SecretName, s.SecretID)
		}
	}
	if _, err := Convert(ctx, manifest, "compat", failing{}); !errors.Is(err, errResolve) {
		t.Errorf("a failing resolver gave %v", err)
	}
}

type moved struct{ calls int }

func (m *moved) ConfigIDs(_ context.Context, names []string) (map[string]string, error) {
	return m.ids(names), nil
}
func (m *moved) SecretIDs(_ context.Context, names []string) (map[string]string, error) {
	return m.ids(names), nil
}
func (m *moved) ids(names []string) map[string]string {
	m.calls++
	out := map[string]string{}
	for _, n := range names {
		out[n] = "moved-" + n
	}
	return out
}

var errResolve = errors.New("daemon unreachable")

type failing struct{}

func (failing) ConfigIDs(context.Context, []string) (map[string]string, error) {
	return nil, errResolve
}
func (failing) SecretIDs(context.Context, []string) (map[string]string, error) {
	return nil, errResolve
}

// A deploy takes what a manifest declares and, after reading the swarm, the
// same specs with ids, from one Conversion. Each is what the conversion
// without any memo gives, and each is a copy: changing the first must not
// reach the second, even with the memo emptied in between.
func TestOneConversionServesADeclarationAndAResolvedCopy(t *testing.T) {
	ctx := context.Background()
	for name, manifest := range corpusManifests(t) {
		c, err := Prepare(ctx, manifest, "compat")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		decl, err := c.Stack(ctx, nil)
		if err != nil {
			t.Fatalf("%s: declared: %v", name, err)
		}
		want, err := slowConvert(ctx, manifest, "compat", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(decl, want) {
			t.Errorf("%s: the declaration differs from the conversion itself", name)
		}
		for svc, spec := range decl.Services {
			spec.Labels["changed"] = "by the caller"
			if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
				if len(cs.Env) > 0 {
					cs.Env[0] = "CHANGED=0" // in place: a shallow copy would share it
				}
				cs.Args = append(cs.Args, "changed")
			}
			decl.Services[svc] = spec
		}
		memo.conversions.reset()
		got, err := c.Stack(ctx, &idResolver{})
		if err != nil {
			t.Fatalf("%s: resolved: %v", name, err)
		}
		want, err = slowConvert(ctx, manifest, "compat", &idResolver{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the resolved copy differs from the conversion itself (a change to the declaration reached it?)", name)
		}
	}
}

// A backend uses a handed conversion only for the manifest and stack it was
// made of; anything else, or none, it converts itself.
func TestAConversionIsOfOnlyItsManifestAndStack(t *testing.T) {
	ctx := context.Background()
	r := mustRender(t, "demo", fixture(t))
	c, err := Prepare(ctx, r.Manifest, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Of(r.Manifest, "demo") {
		t.Error("not of its own manifest and stack")
	}
	if c.Of(r.Manifest+"\n", "demo") || c.Of(r.Manifest, "other") {
		t.Error("of another manifest or stack")
	}
	var none *Conversion
	if none.Of(r.Manifest, "demo") {
		t.Error("a nil conversion is of something")
	}
}
