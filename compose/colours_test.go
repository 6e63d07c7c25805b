package compose

import (
	"slices"
	"strings"
	"testing"
)

func renderColoured(t *testing.T, image, conf string) *Rendered {
	t.Helper()
	d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
	write(t, d, "compose.yaml", `version: "3.8"
services:
  web:
    image: `+image+`
    deploy:
      replicas: 3
      labels: {team: shop}
    configs: [{source: conf, target: /etc/app.conf}]
    ports: ["8080:80"]
    x-flotilla:
      wave: 1
      rollout:
        strategy: canary
        steps: [{weight: 10, pause: 1m}]
configs:
  conf:
    file: ./app.conf
`)
	write(t, d, "app.conf", conf)
	return mustRender(t, "shop", d)
}

func TestWithColours_addsTheColourAndKeepsTheStableDefinition(t *testing.T) {
	v1 := renderColoured(t, "example/web:1", "one\n")
	v2 := renderColoured(t, "example/web:2", "two\n")
	c := Colour{Service: "web", Name: "web-canary", StableFrom: v1.Manifest, Replicas: 1, Alias: "web",
		Labels: map[string]string{"io.flotilla.rollout.phase": "Progressing"}}
	m, err := WithColours(v2.Manifest, []Colour{c})
	if err != nil {
		t.Fatal(err)
	}
	again, err := WithColours(v2.Manifest, []Colour{c})
	if err != nil || again != m {
		t.Fatalf("not deterministic: %v", err)
	}
	st, err := Convert(t.Context(), m, "shop", nil)
	if err != nil {
		t.Fatalf("Convert: %v\n%s", err, m)
	}
	web, canary := st.Services["shop_web"], st.Services["shop_web-canary"]
	if got := web.TaskTemplate.ContainerSpec.Image; got != "example/web:1" {
		t.Fatalf("stable image %s", got)
	}
	if got := canary.TaskTemplate.ContainerSpec.Image; got != "example/web:2" {
		t.Fatalf("canary image %s", got)
	}
	if n := *canary.Mode.Replicated.Replicas; n != 1 {
		t.Fatalf("canary replicas %d", n)
	}
	if canary.Labels["io.flotilla.rollout.phase"] != "Progressing" || canary.Labels["team"] != "shop" {
		t.Fatalf("canary labels %v", canary.Labels)
	}
	if canary.EndpointSpec != nil && len(canary.EndpointSpec.Ports) > 0 {
		t.Fatalf("the colour publishes %v: two services cannot publish one port", canary.EndpointSpec.Ports)
	}
	if web.EndpointSpec == nil || len(web.EndpointSpec.Ports) != 1 {
		t.Fatal("the stable service lost its published port")
	}
	if nets := canary.TaskTemplate.Networks; len(nets) != 1 || !slices.Contains(nets[0].Aliases, "web") {
		t.Fatalf("the colour is not reachable as web: %+v", nets)
	}
	if _, ok := canary.TaskTemplate.ContainerSpec.Labels["io.flotilla.rollout.phase"]; ok {
		t.Fatal("rollout state on the task template")
	}
	if web.Labels["io.flotilla.rollout.phase"] != "" {
		t.Fatal("rollout state on the stable service")
	}
	// Each colour keeps the config of its own definition.
	ref := func(s string) string { return st.Services[s].TaskTemplate.ContainerSpec.Configs[0].ConfigName }
	if ref("shop_web") == ref("shop_web-canary") {
		t.Fatalf("both colours use config %s", ref("shop_web"))
	}
	for _, name := range []string{ref("shop_web"), ref("shop_web-canary")} {
		if _, ok := st.Configs[name]; !ok {
			t.Fatalf("config %s not declared", name)
		}
	}
	ord, err := ReadOrdering(m)
	if err != nil {
		t.Fatal(err)
	}
	if ord.Of("web").Rollout == nil || ord.Of("web").Wave != 1 {
		t.Fatalf("stable lost its x-flotilla: %+v", ord.Of("web"))
	}
	if o, ok := ord["web-canary"]; ok {
		t.Fatalf("the colour has an x-flotilla field: %+v", o)
	}
	d1, _, _ := ServiceDigest(v1.Manifest, "web")
	if d, _, _ := ServiceDigest(m, "web"); d != d1 {
		t.Fatal("the kept stable definition's digest is not the one it had")
	}
	// Without Alias (a preview, or a canary behind a router) the colour
	// answers only to its own name.
	c.Alias, c.Name = "", "web-preview"
	m, err = WithColours(v2.Manifest, []Colour{c})
	if err != nil {
		t.Fatal(err)
	}
	st, err = Convert(t.Context(), m, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if nets := st.Services["shop_web-preview"].TaskTemplate.Networks; len(nets) != 1 || len(nets[0].Aliases) != 1 || nets[0].Aliases[0] != "web-preview" {
		t.Fatalf("the preview's aliases: %+v", nets)
	}
	if !strings.Contains(m, "web-preview") {
		t.Fatal("no colour in the manifest")
	}
}

func TestServiceDigest_followsTheDefinitionNotItsRolloutField(t *testing.T) {
	v1 := renderColoured(t, "example/web:1", "one\n")
	d1, ok, err := ServiceDigest(v1.Manifest, "web")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for name, other := range map[string]*Rendered{
		"image":  renderColoured(t, "example/web:2", "one\n"),
		"config": renderColoured(t, "example/web:1", "two\n"),
	} {
		d, _, err := ServiceDigest(other.Manifest, "web")
		if err != nil || d == d1 {
			t.Fatalf("%s change: digest unchanged (%v)", name, err)
		}
	}
	m, err := WithColours(v1.Manifest, []Colour{{Service: "web", Name: "web-canary"}})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := ServiceDigest(m, "web"); d != d1 {
		t.Fatal("adding a colour changed the stable service's digest")
	}
	if _, ok, _ := ServiceDigest(m, "api"); ok {
		t.Fatal("an absent service has a digest")
	}
}

func TestWithColours_keepsTheStableMountPathsWhenANewSecretTakesItsKey(t *testing.T) {
	render := func(secret, conf string) *Rendered {
		d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
		write(t, d, "compose.yaml", `version: "3.8"
services:
  web:
    image: example/web:1
    secrets: [db_password]
    configs: [app_conf]
    x-flotilla:
      rollout:
        strategy: canary
        steps: [{weight: 50}]
secrets:
  db_password: {file: ./db_password.txt}
configs:
  app_conf: {file: ./app.conf}
`)
		write(t, d, "db_password.txt", secret)
		write(t, d, "app.conf", conf)
		return mustRender(t, "shop", d)
	}
	v1, v2 := render("one\n", "a\n"), render("two\n", "b\n")
	m, err := WithColours(v2.Manifest, []Colour{{Service: "web", Name: "web-canary", StableFrom: v1.Manifest, Replicas: 1, Alias: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Convert(t.Context(), m, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := Convert(t.Context(), v1.Manifest, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The stable service is the one v1 deployed: the same secret and
	// config, at the same paths, so it is not written.
	was, kept := before.Services["shop_web"].TaskTemplate.ContainerSpec, st.Services["shop_web"].TaskTemplate.ContainerSpec
	if kept.Secrets[0].SecretName != was.Secrets[0].SecretName || *kept.Secrets[0].File != *was.Secrets[0].File {
		t.Fatalf("stable secret %+v %+v, v1 deployed %+v %+v", *kept.Secrets[0], *kept.Secrets[0].File, *was.Secrets[0], *was.Secrets[0].File)
	}
	if kept.Configs[0].ConfigName != was.Configs[0].ConfigName || *kept.Configs[0].File != *was.Configs[0].File {
		t.Fatalf("stable config %+v %+v, v1 deployed %+v %+v", *kept.Configs[0], *kept.Configs[0].File, *was.Configs[0], *was.Configs[0].File)
	}
	// The canary mounts the new ones at the same paths.
	canary := st.Services["shop_web-canary"].TaskTemplate.ContainerSpec
	if canary.Secrets[0].SecretName == was.Secrets[0].SecretName || canary.Secrets[0].File.Name != "db_password" {
		t.Fatalf("canary secret %+v %+v", *canary.Secrets[0], *canary.Secrets[0].File)
	}
	if canary.Configs[0].ConfigName == was.Configs[0].ConfigName || canary.Configs[0].File.Name != "app_conf" {
		t.Fatalf("canary config %+v %+v", *canary.Configs[0], *canary.Configs[0].File)
	}
}
