package compose

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/rollout"
)

const orderedCompose = `services:
  db:
    image: flotilla-test/app:1
    networks: [back]
    secrets: [dbpass]
    x-flotilla: {wave: 0}
  api:
    image: flotilla-test/app:1
    networks: [back, front]
    configs: [apiconf]
    x-flotilla: {wave: 1}
  web:
    image: flotilla-test/app:1
    networks: [front]
    x-flotilla: {wave: 2}
  migrate:
    image: flotilla-test/app:1
    command: ["exit", "0"]
    networks: [back]
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync}
networks:
  back: {}
  front: {}
configs:
  apiconf: {file: ./api.conf}
secrets:
  dbpass: {file: ./dbpass}
`

func renderOrdered(t *testing.T, compose string) *Rendered {
	t.Helper()
	d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
	write(t, d, "compose.yaml", compose)
	write(t, d, "api.conf", "listen 80\n")
	write(t, d, "dbpass", "hunter2")
	return mustRender(t, "shop", d)
}

func TestRenderKeepsXFlotillaInTheManifestAndOutOfTheSwarmSpecs(t *testing.T) {
	r := renderOrdered(t, orderedCompose)
	ord, err := ReadOrdering(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := Ordering{
		"api":     {Wave: 1},
		"web":     {Wave: 2},
		"migrate": {Hook: PreSync, DeletePolicy: BeforeHookCreation},
	}
	if len(ord) != len(want) {
		t.Fatalf("ordering = %+v, want %+v", ord, want)
	}
	for k, v := range want {
		if ord[k] != v {
			t.Errorf("ordering[%s] = %+v, want %+v", k, ord[k], v)
		}
	}
	st := mustConvert(t, r, "shop")
	for name, spec := range st.Services {
		for k, v := range spec.Labels {
			if strings.Contains(k, "flotilla") || strings.Contains(v, "wave") {
				t.Errorf("%s carries label %s=%s from x-flotilla", name, k, v)
			}
		}
		if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
			for k := range cs.Labels {
				if strings.Contains(k, "flotilla") {
					t.Errorf("%s container carries label %s", name, k)
				}
			}
		}
	}
}

func TestRenderGivesTheSameManifestForTwoSpellingsOfOneOrder(t *testing.T) {
	a := renderOrdered(t, orderedCompose)
	b := renderOrdered(t, strings.Replace(orderedCompose, "x-flotilla: {wave: 0}", "x-flotilla: {}", 1))
	c := renderOrdered(t, strings.Replace(orderedCompose, "x-flotilla: {hook: PreSync}", "x-flotilla: {hook: PreSync, deletePolicy: BeforeHookCreation}", 1))
	if a.Manifest != b.Manifest || a.Manifest != c.Manifest {
		t.Error("equivalent x-flotilla fields gave different manifests")
	}
}

func TestRenderRefusesBadXFlotillaNamingFileAndField(t *testing.T) {
	cases := []struct {
		name, from, to, field string
	}{
		{"unknown key", "x-flotilla: {wave: 1}", "x-flotilla: {wav: 1}", "services.api.x-flotilla.wav"},
		{"wave not a number", "x-flotilla: {wave: 1}", "x-flotilla: {wave: soon}", "services.api.x-flotilla.wave"},
		{"fractional wave", "x-flotilla: {wave: 1}", "x-flotilla: {wave: 1.5}", "services.api.x-flotilla.wave"},
		{"unknown hook", "x-flotilla: {hook: PreSync}", "x-flotilla: {hook: BeforeSync}", "services.migrate.x-flotilla.hook"},
		{"hook not a job", "x-flotilla: {wave: 1}", "x-flotilla: {hook: PostSync}", "services.api.x-flotilla.hook"},
		{"hook wave not a number", "x-flotilla: {hook: PreSync}", "x-flotilla: {hook: PreSync, wave: first}", "services.migrate.x-flotilla.wave"},
		{"hook wave out of range", "x-flotilla: {hook: PreSync}", "x-flotilla: {hook: PreSync, wave: 5000}", "services.migrate.x-flotilla.wave"},
		{"policy without hook", "x-flotilla: {wave: 1}", "x-flotilla: {wave: 1, deletePolicy: HookFailed}", "services.api.x-flotilla.deletePolicy"},
		{"unknown policy", "x-flotilla: {hook: PreSync}", "x-flotilla: {hook: PreSync, deletePolicy: Never}", "services.migrate.x-flotilla.deletePolicy"},
		{"not a mapping", "x-flotilla: {wave: 1}", "x-flotilla: 1", "services.api.x-flotilla"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
			write(t, d, "compose.yaml", strings.Replace(orderedCompose, tc.from, tc.to, 1))
			write(t, d, "api.conf", "x")
			write(t, d, "dbpass", "x")
			_, err := Render("shop", d)
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Render = %v, want a fault", err)
			}
			if fe.Field != tc.field || fe.File != "app/compose.yaml" {
				t.Errorf("fault names %s in %s, want %s in app/compose.yaml (%v)", fe.Field, fe.File, tc.field, err)
			}
		})
	}
}

func TestSubsetDeclaresOnlyItsServicesAndWhatTheyUse(t *testing.T) {
	r := renderOrdered(t, orderedCompose)
	full := mustConvert(t, r, "shop")
	sub, err := Subset(r.Manifest, []string{"db"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sub, Extension) {
		t.Error("a subset still carries x-flotilla")
	}
	st, err := Convert(context.Background(), sub, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(keysOf(st.Services)); !slices.Equal(got, []string{"shop_db"}) {
		t.Errorf("services = %v, want [shop_db]", got)
	}
	if got := slices.Sorted(keysOf(st.Networks)); !slices.Equal(got, []string{"shop_back"}) {
		t.Errorf("networks = %v, want [shop_back]", got)
	}
	if len(st.Configs) != 0 || len(st.Secrets) != 1 {
		t.Errorf("configs %v, secrets %v: want none and dbpass", st.Configs, st.Secrets)
	}
	// The service means exactly what it means in the whole manifest, so a
	// wave's deploy and a later whole deploy agree and write nothing twice.
	if !specEqual(st.Services["shop_db"], full.Services["shop_db"]) {
		t.Error("db converts differently from a subset than from the whole manifest")
	}
}

func TestSubsetGivesAHookWithoutRestartPolicyConditionNone(t *testing.T) {
	r := renderOrdered(t, orderedCompose)
	sub, err := Subset(r.Manifest, []string{"migrate"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Convert(context.Background(), sub, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	rp := st.Services["shop_migrate"].TaskTemplate.RestartPolicy
	if rp == nil || rp.Condition != "none" {
		t.Errorf("restart policy = %+v, want condition none", rp)
	}
	if _, err := Subset(r.Manifest, []string{"nosuch"}); err == nil {
		t.Error("a subset naming an undeclared service was made")
	}
}

func TestReadOrderingOfAManifestWithoutXFlotillaIsEmpty(t *testing.T) {
	r := renderOrdered(t, strings.NewReplacer(
		"    x-flotilla: {wave: 0}\n", "", "    x-flotilla: {wave: 1}\n", "", "    x-flotilla: {wave: 2}\n", "",
		"    x-flotilla: {hook: PreSync}\n", "").Replace(orderedCompose))
	if strings.Contains(r.Manifest, Extension) {
		t.Fatal("manifest mentions x-flotilla")
	}
	ord, err := ReadOrdering(r.Manifest)
	if err != nil || len(ord) != 0 {
		t.Errorf("ReadOrdering = %v, %v; want empty", ord, err)
	}
	nums, waves := ord.Waves([]string{"web", "api"})
	if !slices.Equal(nums, []int{0}) || !slices.Equal(waves[0], []string{"api", "web"}) {
		t.Errorf("waves = %v %v, want one wave 0 of api, web", nums, waves)
	}
}

func keysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func specEqual(a, b any) bool { return reflect.DeepEqual(a, b) }

func TestTheOrderingExampleRendersWithItsWavesAndHooks(t *testing.T) {
	r, err := Render("ordered", Dir{Root: "../examples/ordering/repo", Files: []string{"docker-compose.yml"}})
	if err != nil {
		t.Fatal(err)
	}
	ord, err := ReadOrdering(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	nums, waves := ord.Waves([]string{"api", "db", "migrate", "smoke", "web"})
	if !slices.Equal(nums, []int{0, 1, 2}) || !slices.Equal(waves[0], []string{"db"}) || !slices.Equal(waves[1], []string{"api"}) {
		t.Errorf("waves %v %v", nums, waves)
	}
	if !slices.Equal(ord.Hooks(PreSync), []string{"migrate"}) || ord.Of("smoke") != (Order{Hook: PostSync, DeletePolicy: HookSucceeded}) {
		t.Errorf("hooks %+v", ord)
	}
}

const hookWaves = `services:
  api:
    image: flotilla-test/app:1
  b-seed:
    image: flotilla-test/app:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync, wave: 1}
  a-seed:
    image: flotilla-test/app:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync, wave: 1}
  migrate:
    image: flotilla-test/app:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync, wave: -2}
  smoke:
    image: flotilla-test/app:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PostSync}
`

func TestHooksOfAPhaseRunByWaveThenByName(t *testing.T) {
	r := renderOrdered(t, hookWaves)
	ord, err := ReadOrdering(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	got := ord.HookWaves(PreSync)
	want := []HookWave{{Wave: -2, Names: []string{"migrate"}}, {Wave: 1, Names: []string{"a-seed", "b-seed"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PreSync waves = %+v, want %+v", got, want)
	}
	if h := ord.Hooks(PreSync); !slices.Equal(h, []string{"migrate", "a-seed", "b-seed"}) {
		t.Errorf("PreSync hooks in order = %v", h)
	}
	if got := ord.HookWaves(PostSync); len(got) != 1 || got[0].Wave != 0 {
		t.Errorf("PostSync waves = %+v, want one wave 0", got)
	}
	// A hook's wave is kept in the manifest in one spelling.
	again := renderOrdered(t, strings.Replace(hookWaves, "{hook: PostSync}", "{hook: PostSync, wave: 0}", 1))
	if again.Manifest != r.Manifest {
		t.Error("a hook's wave 0 and no wave gave different manifests")
	}
}

func TestABadHookWaveIsRefusedWithFileLineAndField(t *testing.T) {
	for _, bad := range []string{"wave: soon", "wave: 2.5", "wave: -1001", "wave: [1]"} {
		t.Run(bad, func(t *testing.T) {
			d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
			write(t, d, "compose.yaml", strings.Replace(hookWaves, "{hook: PreSync, wave: -2}", "{hook: PreSync, "+bad+"}", 1))
			_, err := Render("shop", d)
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Render = %v, want a fault", err)
			}
			if fe.File != "app/compose.yaml" || fe.Field != "services.migrate.x-flotilla.wave" || fe.Line != 15 {
				t.Errorf("fault names %s:%d field %s, want app/compose.yaml:15 services.migrate.x-flotilla.wave (%v)", fe.File, fe.Line, fe.Field, err)
			}
			if !strings.Contains(err.Error(), "whole number") {
				t.Errorf("error %q does not say what a wave must be", err)
			}
		})
	}
}

const rolloutCompose = `services:
  web:
    image: flotilla-test/app:1
    deploy: {replicas: 4}
    x-flotilla:
      wave: 1
      rollout:
        strategy: canary
        steps:
          - {weight: 10, pause: 2m}
          - {weight: 50, pause: 5m}
        router: {provider: traefik, rule: "Host(` + "`shop.example`" + `)", entryPoints: [web], port: 8080}
        analysis: {maxErrorRatio: 0.05, maxLatency: 500ms, traefik: {metrics: "http://traefik:8082/metrics"}}
  api:
    image: flotilla-test/app:1
  migrate:
    image: flotilla-test/app:1
    deploy: {mode: replicated-job}
    x-flotilla: {hook: PreSync}
`

func TestRenderKeepsARolloutInOneSpellingAndOutOfTheSwarmSpecs(t *testing.T) {
	r := renderOrdered(t, rolloutCompose)
	ord, err := ReadOrdering(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	o := ord.Of("web")
	if o.Wave != 1 || o.Rollout == nil {
		t.Fatalf("order of web = %+v, want wave 1 with a rollout", o)
	}
	ro := o.Rollout
	if ro.Strategy != rollout.Canary || len(ro.Steps) != 2 || ro.Steps[1] != (rollout.Step{Weight: 50, Pause: 5 * time.Minute}) ||
		ro.Router.Port != 8080 || ro.Analysis == nil || ro.Analysis.Interval != rollout.DefaultInterval {
		t.Errorf("rollout of web = %+v", ro)
	}
	if ord.Of("api").Rollout != nil {
		t.Error("api got a rollout")
	}
	// The same spec spelled otherwise (defaults written out, durations in
	// other units, keys in another order) gives the same manifest.
	other := strings.NewReplacer(
		"{weight: 10, pause: 2m}", "{pause: 120s, weight: 10}",
		"analysis: {maxErrorRatio: 0.05, maxLatency: 500ms, traefik: {metrics: \"http://traefik:8082/metrics\"}}", "analysis: {interval: 30s, traefik: {metrics: \"http://traefik:8082/metrics\"}, minRequests: 20, failureLimit: 1, maxLatency: 0.5s, maxErrorRatio: 0.050}",
	).Replace(rolloutCompose)
	if other == rolloutCompose {
		t.Fatal("the replacements changed nothing")
	}
	if again := renderOrdered(t, other); again.Manifest != r.Manifest {
		t.Errorf("two spellings of one rollout gave different manifests:\n%s\n---\n%s", r.Manifest, again.Manifest)
	}
	st := mustConvert(t, r, "shop")
	for k := range st.Services["shop_web"].Labels {
		if strings.Contains(k, "rollout") {
			t.Errorf("web carries label %s from its rollout", k)
		}
	}
	if _, ok := st.Services["shop_web-canary"]; ok {
		t.Error("rendering created the canary colour; the rollout does that")
	}
}

func TestRenderRefusesABadRolloutNamingTheField(t *testing.T) {
	cases := []struct {
		name, from, to, field, says string
	}{
		{"weight out of range", "{weight: 50, pause: 5m}", "{weight: 500, pause: 5m}", "services.web.x-flotilla.rollout.steps[1].weight", "1 to 100"},
		{"weights not increasing", "{weight: 50, pause: 5m}", "{weight: 5, pause: 5m}", "services.web.x-flotilla.rollout.steps[1].weight", "increase"},
		{"bad pause", "{weight: 10, pause: 2m}", "{weight: 10, pause: two minutes}", "services.web.x-flotilla.rollout.steps[0].pause", "duration"},
		{"unknown key", "strategy: canary", "strategy: canary\n        speed: fast", "services.web.x-flotilla.rollout.speed", "unknown key"},
		{"unknown strategy", "strategy: canary", "strategy: rainbow", "services.web.x-flotilla.rollout.strategy", "canary or blueGreen"},
		{"router port", "port: 8080", "port: http", "services.web.x-flotilla.rollout.router.port", "port"},
		{"global service", "deploy: {replicas: 4}", "deploy: {mode: global}", "services.web.x-flotilla.rollout", "replicated"},
		{"job", "deploy: {replicas: 4}", "deploy: {mode: replicated-job}", "services.web.x-flotilla.rollout", "replicated"},
		{"hook", "x-flotilla: {hook: PreSync}", "x-flotilla: {hook: PreSync, rollout: {strategy: canary, steps: [{weight: 10}]}}", "services.migrate.x-flotilla.rollout", "hook"},
		{"colour name taken", "  api:\n", "  web-canary:\n", "services.web.x-flotilla.rollout", "web-canary"},
		{"colour name too long", "  web:\n", "  web" + strings.Repeat("b", 54) + ":\n", "services.web" + strings.Repeat("b", 54) + ".x-flotilla.rollout", "-canary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(rolloutCompose, tc.from, tc.to, 1)
			if text == rolloutCompose {
				t.Fatal("the replacement changed nothing")
			}
			d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
			write(t, d, "compose.yaml", text)
			_, err := Render("shop", d)
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Render = %v, want a fault", err)
			}
			if fe.Field != tc.field || fe.File != "app/compose.yaml" || fe.Line == 0 {
				t.Errorf("fault names %s:%d field %s, want %s in app/compose.yaml (%v)", fe.File, fe.Line, fe.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

func TestARolloutRefusalNamesTheLineOfTheListItem(t *testing.T) {
	d := Dir{Root: t.TempDir(), Path: "app", Files: []string{"compose.yaml"}}
	write(t, d, "compose.yaml", strings.Replace(rolloutCompose, "{weight: 50, pause: 5m}", "{weight: 5, pause: 5m}", 1))
	_, err := Render("shop", d)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Line != 11 {
		t.Errorf("Render = %v, want a fault at line 11, the second step's", err)
	}
}
