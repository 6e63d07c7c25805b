package compose

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// mapResolver knows a fixed set of ids and records what it was asked.
type mapResolver struct {
	configs, secrets map[string]string
	asked            []string
}

func (m *mapResolver) ConfigIDs(_ context.Context, names []string) (map[string]string, error) {
	m.asked = append(m.asked, names...)
	return m.configs, nil
}

func (m *mapResolver) SecretIDs(_ context.Context, names []string) (map[string]string, error) {
	m.asked = append(m.asked, names...)
	return m.secrets, nil
}

func TestConvertWithoutResolverNeedsNoObjectToExist(t *testing.T) {
	// A stored revision: its configs have long been swept, and nothing here
	// could resolve them anyway.
	r := mustRender(t, "demo", fixture(t))
	st, err := Convert(context.Background(), r.Manifest, "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, svc := range st.Services {
		for _, c := range svc.TaskTemplate.ContainerSpec.Configs {
			if c.ConfigID != "" || c.ConfigName == "" {
				t.Errorf("%s: config ref %+v", name, c)
			}
		}
		for _, s := range svc.TaskTemplate.ContainerSpec.Secrets {
			if s.SecretID != "" || s.SecretName == "" {
				t.Errorf("%s: secret ref %+v", name, s)
			}
		}
	}
}

func TestConvertFillsIdsFromTheResolver(t *testing.T) {
	r := mustRender(t, "demo", fixture(t))
	decl := mustConvert(t, r, "demo")
	conf, pass := sortedKeys(decl.Configs)[0], sortedKeys(decl.Secrets)[0]

	res := &mapResolver{
		configs: map[string]string{conf: "cfg-id-1"},
		secrets: map[string]string{pass: "sec-id-1"},
	}
	st, err := Convert(context.Background(), r.Manifest, "demo", res)
	if err != nil {
		t.Fatal(err)
	}
	web := st.Services["demo_web"].TaskTemplate.ContainerSpec
	if web.Configs[0].ConfigID != "cfg-id-1" || web.Secrets[0].SecretID != "sec-id-1" {
		t.Errorf("refs %+v %+v", web.Configs[0], web.Secrets[0])
	}
	if !slices.Equal(res.asked, []string{conf, pass}) {
		t.Errorf("resolver asked %v: want each name once", res.asked)
	}

	res = &mapResolver{configs: map[string]string{}, secrets: map[string]string{pass: "sec-id-1"}}
	_, err = Convert(context.Background(), r.Manifest, "demo", res)
	if err == nil || !strings.Contains(err.Error(), `config "`+conf+`" not found`) {
		t.Errorf("unknown config: %v", err)
	}
}

func TestConvertRefusesAManifestOfAnotherStack(t *testing.T) {
	r := mustRender(t, "demo", fixture(t))
	if _, err := Convert(context.Background(), r.Manifest, "other", nil); err == nil {
		t.Fatal("converted demo's manifest as stack other")
	}
	if s, err := ManifestStack(r.Manifest); err != nil || s != "demo" {
		t.Errorf("ManifestStack %q %v", s, err)
	}
}

func TestConvertRefusesBrokenManifests(t *testing.T) {
	good := mustRender(t, "demo", fixture(t)).Manifest
	conf := sortedKeys(mustConvert(t, &Rendered{Manifest: good}, "demo").Configs)[0]
	cases := map[string]string{
		"empty":          "",
		"not yaml":       "{{{",
		"other kind":     strings.Replace(good, manifestKind, "something/v9", 1),
		"unknown field":  good + "extra: 1\n",
		"no config data": strings.Replace(good, "  "+conf+":\n    key: app_conf", "  unrelated:\n    key: app_conf", 1),
		"bad compose":    strings.Replace(good, "replicas: 4", "replicas: lots", 1),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			if m == good {
				t.Fatal("case did not change the manifest")
			}
			if _, err := Convert(context.Background(), m, "demo", nil); err == nil {
				t.Error("converted")
			}
		})
	}
}

func TestConvertKeepsBinaryConfigData(t *testing.T) {
	d := fixture(t)
	bin := string([]byte{0xff, 0x00, 0xfe, 'x'})
	write(t, d, "config/app.conf", bin)
	r := mustRender(t, "demo", d)
	st := mustConvert(t, r, "demo")
	for _, c := range st.Configs {
		if string(c.Data) != bin {
			t.Errorf("data %q, want %q", c.Data, bin)
		}
	}
	if !strings.Contains(r.Manifest, "base64:") {
		t.Error("binary config not stored as base64")
	}
}

func TestHashedName(t *testing.T) {
	content := []byte("x")
	short, err := hashedName("demo", "app", content)
	if err != nil || short != "demo_app-"+digest(content)[:10] {
		t.Errorf("short name %q %v", short, err)
	}

	stack := strings.Repeat("s", 30)
	keyA := strings.Repeat("k", 40) + "_alpha"
	keyB := strings.Repeat("k", 40) + "_beta"
	a, err := hashedName(stack, keyA, content)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := hashedName(stack, keyB, content)
	again, _ := hashedName(stack, keyA, content)
	for _, n := range []string{a, b} {
		if len(n) > maxObjectName {
			t.Errorf("%q is %d characters", n, len(n))
		}
		if !strings.HasPrefix(n, stack+"_") || !strings.HasSuffix(n, "-"+digest(content)[:10]) {
			t.Errorf("%q lost its stack prefix or content hash", n)
		}
	}
	if a == b {
		t.Errorf("two keys share the name %q", a)
	}
	if a != again {
		t.Errorf("not deterministic: %q then %q", a, again)
	}
	if len(a) != maxObjectName {
		t.Errorf("%q does not use the room it has", a)
	}

	if _, err := hashedName(strings.Repeat("s", 60), "k", content); err == nil {
		t.Error("a stack too long for any name was accepted")
	}
}

func TestRenderShortensLongNamesEndToEnd(t *testing.T) {
	d := fixture(t)
	key := "a_really_long_configuration_key_for_the_application"
	write(t, d, "compose.prod.yaml", "version: '3.8'\nservices:\n  web:\n    configs: [{source: "+key+", target: /x}]\nconfigs:\n  "+key+":\n    file: ./config/app.conf\n")
	stack := "production-europe-west"
	st := mustConvert(t, mustRender(t, stack, d), stack)
	for name := range st.Configs {
		if len(name) > maxObjectName {
			t.Errorf("config %q is %d characters", name, len(name))
		}
	}
	if len(st.Configs) != 2 {
		t.Errorf("configs %v", sortedKeys(st.Configs))
	}
}

func TestServiceNames(t *testing.T) {
	names, err := ServiceNames(mustRender(t, "demo", fixture(t)).Manifest)
	if err != nil || !slices.Equal(names, []string{"cache", "web", "worker"}) {
		t.Errorf("%v %v", names, err)
	}
	if _, err := ServiceNames("kind: nope\n"); err == nil {
		t.Error("foreign document accepted")
	}
}
