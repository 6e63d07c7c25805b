package compose

import (
	"strings"
	"testing"
)

const refConfigEnvCompose = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    configs: [app_conf]
    environment:
      PLAIN: visible
    x-flotilla:
      wave: 1
      env:
        DB_PASSWORD:
          secretRef: {store: vault, path: kv/data/shop/db, key: password}
  web:
    image: flotilla-test/app:1
    environment:
      PLAIN: visible
  worker:
    image: flotilla-test/app:1
    x-flotilla:
      env:
        DB_PASSWORD:
          secretRef: {store: vault, path: kv/data/shop/db, key: password}
configs:
  app_conf:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/shop/app, key: conf}
`

func TestRenderTakesConfigsAndEnvironmentValuesFromTheStoreAndRecordsNoValue(t *testing.T) {
	const pw, conf = "store-env-pw-81b2-plaintext", "store-config-c0f3-plaintext"
	d := refProject(t, refConfigEnvCompose)
	refs := &fixedRefs{values: map[string]string{"vault:kv/data/shop/db#password": pw, "vault:kv/data/shop/app#conf": conf}}
	d.SecretRef = refs.resolve
	r, err := Render(refStack, d)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"configs.app_conf=vault:kv/data/shop/app#conf",
		"services.api.environment.DB_PASSWORD=vault:kv/data/shop/db#password",
		"services.worker.environment.DB_PASSWORD=vault:kv/data/shop/db#password",
	}
	if strings.Join(refs.asked, " ") != strings.Join(want, " ") {
		t.Fatalf("asked %q, want %q", refs.asked, want)
	}
	if len(r.Refs) != 3 || r.Refs[0].Kind != RefConfig || r.Refs[1].Kind != RefEnv || r.Refs[1].Service != "api" || r.Refs[2].Service != "worker" {
		t.Fatalf("refs %+v", r.Refs)
	}
	for _, s := range []string{pw, conf, "x-flotilla:\n        env", "secretRef"} {
		if strings.Contains(r.Manifest, s) {
			t.Fatalf("manifest holds %q:\n%s", s, r.Manifest)
		}
	}
	if !strings.Contains(r.Manifest, "from: vault:kv/data/shop/app#conf") {
		t.Fatalf("manifest does not name the config's reference:\n%s", r.Manifest)
	}
	for _, v := range []string{pw, conf} {
		for _, dg := range []string{digest([]byte(v)), (&project{}).keyedDigest("name", v), (&project{}).keyedDigest("sealed", "config", r.Refs[0].Name, v)} {
			if strings.Contains(r.Manifest, dg[:hashLen]) {
				t.Fatalf("a digest of a value is in the manifest:\n%s", r.Manifest)
			}
		}
	}
	confName := r.Refs[0].Name
	if !strings.HasPrefix(confName, refStack+"_app_conf-") {
		t.Fatalf("config name %s", confName)
	}

	st := mustConvert(t, r, refStack)
	if err := Unseal(st, r.Sealed); err != nil {
		t.Fatal(err)
	}
	if got := string(st.Configs[confName].Data); got != conf {
		t.Fatalf("unsealed config data %q", got)
	}
	env := func(st *Stack, svc string) map[string]string {
		out := map[string]string{}
		for _, e := range st.Services[refStack+"_"+svc].TaskTemplate.ContainerSpec.Env {
			k, v, _ := strings.Cut(e, "=")
			out[k] = v
		}
		return out
	}
	for _, svc := range []string{"api", "worker"} {
		if env(st, svc)["DB_PASSWORD"] != pw {
			t.Fatalf("%s env %v", svc, env(st, svc))
		}
	}
	if env(st, "api")["PLAIN"] != "visible" {
		t.Fatal("api lost its plain variable")
	}
	ord, err := ReadOrdering(r.Manifest)
	if err != nil || ord.Of("api").Wave != 1 {
		t.Fatalf("api's wave is lost beside env: %v %+v", err, ord)
	}

	// The environment value rotates: only the services using it change,
	// each in its environment; the config keeps its name.
	refs.values["vault:kv/data/shop/db#password"] = pw + "-2"
	r2, err := Render(refStack, d)
	if err != nil {
		t.Fatal(err)
	}
	st1, st2 := mustConvert(t, r, refStack), mustConvert(t, r2, refStack)
	for _, svc := range []string{"api", "worker", "web"} {
		a, b := st1.Services[refStack+"_"+svc].TaskTemplate.ContainerSpec.Env, st2.Services[refStack+"_"+svc].TaskTemplate.ContainerSpec.Env
		changed := strings.Join(a, ",") != strings.Join(b, ",")
		if changed != (svc != "web") {
			t.Fatalf("%s: env changed=%v after the rotation: %q → %q", svc, changed, a, b)
		}
	}
	if r2.Refs[0].Name != confName {
		t.Fatal("the config was renamed though its value did not change")
	}

	// The config rotates: a new name, mounted by api only.
	refs.values["vault:kv/data/shop/app#conf"] = conf + "-2"
	r3, err := Render(refStack, d)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Refs[0].Name == confName {
		t.Fatal("a rotated config kept its name")
	}
	st3 := mustConvert(t, r3, refStack)
	if got := st3.Services[refStack+"_api"].TaskTemplate.ContainerSpec.Configs[0].ConfigName; got != r3.Refs[0].Name {
		t.Fatalf("api mounts %s, want %s", got, r3.Refs[0].Name)
	}
}

func TestRenderRefusesBadStoreConfigsAndEnvironmentRefs(t *testing.T) {
	ok := func(string, SecretRef) ([]byte, string, error) { return []byte("v"), "t", nil }
	for _, tc := range []struct {
		name, compose, field, want string
		fn                         SecretRefFunc
	}{
		{"config without a store", `configs:
  c:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/a, key: k}
`, "configs.c", "no secret store is granted", nil},
		{"config with a file", `configs:
  c:
    file: ./plain.txt
    x-flotilla:
      secretRef: {store: vault, path: kv/data/a, key: k}
`, "configs.c", "not both", ok},
		{"config with a name", `configs:
  c:
    name: fixed
    x-flotilla:
      secretRef: {store: vault, path: kv/data/a, key: k}
`, "configs.c.name", "a config taken from a store", ok},
		{"env also in environment", `    environment: {DB: x}
    x-flotilla:
      env:
        DB: {secretRef: {store: vault, path: kv/data/a, key: k}}
`, "services.api.x-flotilla.env.DB", "also set by environment", ok},
		{"env without secretRef", `    x-flotilla:
      env:
        DB: {}
`, "services.api.x-flotilla.env.DB", "secretRef: {store, path, key} required", ok},
		{"env unknown field", `    x-flotilla:
      env:
        DB: {secretRef: {store: vault, path: kv/data/a, key: k}, default: x}
`, "services.api.x-flotilla.env.DB", "unknown field", ok},
		{"env not a mapping", `    x-flotilla:
      env: [DB]
`, "services.api.x-flotilla.env", "must be a mapping", ok},
		{"env without a store", `    x-flotilla:
      env:
        DB: {secretRef: {store: vault, path: kv/data/a, key: k}}
`, "services.api.x-flotilla.env.DB", "no secret store is granted", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "version: \"3.8\"\nservices:\n  api:\n    image: flotilla-test/app:1\n"
			if strings.HasPrefix(tc.compose, "configs:") {
				body += "    configs: [c]\n" + tc.compose
			} else {
				body += tc.compose
			}
			d := refProject(t, body)
			d.SecretRef = tc.fn
			_, err := Render(refStack, d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err %v, want one naming %s and %q", err, tc.field, tc.want)
			}
		})
	}
}
