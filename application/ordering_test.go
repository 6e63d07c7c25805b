package application

import (
	"strings"
	"testing"
	"time"
)

const orderingHead = `apiVersion: flotilla/v1
applications:
  - name: platform
    source: {repoURL: "https://h/p.git"}
  - name: db
    source: {repoURL: "https://h/d.git"}
    dependsOn: [platform]
  - name: api
    source: {repoURL: "https://h/a.git"}
    dependsOn: [platform, db]
`

func TestParse_dependsOnAcceptsKnownApplications(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(orderingHead))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Applications[2].DependsOn; len(got) != 2 || got[0] != "platform" || got[1] != "db" {
		t.Fatalf("dependsOn = %v", got)
	}
}

func TestParse_dependsOnRefusesAnUnknownName(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(orderingHead+`    # end
  - name: web
    source: {repoURL: "https://h/w.git"}
    dependsOn: [cache]
`))
	checkProblems(t, err, []want{{line: 14, app: "web", field: "applications[3].dependsOn[0]", kind: ErrInvalid, msg: `"cache" is not an application`}})
}

func TestParse_dependsOnCycleIsRefusedNamingEveryMember(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
applications:
  - name: a
    source: {repoURL: "https://h/a.git"}
    dependsOn: [b]
  - name: b
    source: {repoURL: "https://h/b.git"}
    dependsOn: [c]
  - name: c
    source: {repoURL: "https://h/c.git"}
    dependsOn: [a]
  - name: d
    source: {repoURL: "https://h/d.git"}
    dependsOn: [d]
`))
	ps := problems(t, err)
	var cycle string
	for _, p := range ps {
		if strings.Contains(p.Error(), "cycle") {
			if cycle != "" {
				t.Fatalf("one cycle reported twice: %v", ps)
			}
			cycle = p.Error()
		}
	}
	for _, n := range []string{"a → b → c → a"} {
		if !strings.Contains(cycle, n) {
			t.Fatalf("cycle message %q does not name %s", cycle, n)
		}
	}
	if !strings.Contains(err.Error(), "cannot depend on itself") {
		t.Fatalf("self-dependency not refused: %v", err)
	}
}

func TestParse_syncWindowsAreCheckedFieldByField(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(orderingHead+`syncWindows:
  - kind: deny
    schedule: "0 18 * * 5"
    duration: 60h
    applications: ["*"]
    manualSync: true
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := f.Windows()
	if err != nil {
		t.Fatal(err)
	}
	if v := set.Check("api", time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)); !v.Blocked || !v.ManualAllowed {
		t.Fatalf("the freeze does not hold on Saturday: %+v", v)
	}
	_, err = Parse("apps.yaml", []byte(orderingHead+`syncWindows:
  - kind: pause
    schedule: "61 * * * *"
    applications: []
`))
	checkProblems(t, err, []want{
		{line: 12, field: "syncWindows[0].kind", kind: ErrInvalid, msg: "pause"},
		{line: 12, field: "syncWindows[0].duration", kind: ErrRequired},
		{line: 13, field: "syncWindows[0].schedule", kind: ErrInvalid, msg: "61"},
		{line: 14, field: "syncWindows[0].applications", kind: ErrRequired},
	})
}

const setFile = `apiVersion: flotilla/v1
applications:
  - name: platform
    source: {repoURL: "https://h/p.git"}
applicationSets:
  - name: services
    generators:
      - git:
          repoURL: "https://h/mono.git"
          directories: ["apps/*"]
          exclude: ["apps/legacy"]
    template:
      name: "svc-{{.basename}}"
      source: {repoURL: "https://h/mono.git", path: "{{.path}}"}
      dependsOn: [platform, "{{.basename}}-db"]
`

func TestParse_applicationSetDefersDependenciesOnGeneratedNames(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(setFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.ApplicationSets) != 1 || f.ApplicationSets[0].Template.Name != "svc-{{.basename}}" {
		t.Fatalf("set not parsed: %+v", f.ApplicationSets)
	}
}

func TestParse_applicationSetRefusesBadGeneratorsAndTemplates(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
applicationSets:
  - name: bad
    generators:
      - list: {elements: [{a: 1}]}
        swarms: {}
      - matrix:
          generators:
            - list: {elements: [{a: 1}]}
      - pullRequest: {repoURL: "https://h/x.git", forge: {kind: gitlab, api: "https://h/api/v4", repo: o/x}}
    template:
      name: "{{.a"
`))
	checkProblems(t, err, []want{
		{line: 5, field: "applicationSets[0].generators[0]", kind: ErrInvalid, msg: "exactly one"},
		{line: 8, field: "applicationSets[0].generators[1].matrix.generators", kind: ErrInvalid, msg: "exactly two"},
		{line: 10, field: "applicationSets[0].generators[2].pullRequest.forge.kind", kind: ErrInvalid},
		{line: 12, field: "applicationSets[0].template.name", kind: ErrInvalid, msg: "template"},
	})
}

func TestFile_Expanded_validatesGeneratedApplicationsWithTheStaticOnes(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(setFile))
	if err != nil {
		t.Fatal(err)
	}
	gen := func(name string, deps ...string) Application {
		return Application{Name: name, Source: Source{RepoURL: "https://h/mono.git"}, DependsOn: deps,
			Generated: &Generated{Set: "services", Index: 0}}
	}
	out, err := f.Expanded([]Application{gen("svc-web", "platform"), gen("svc-db", "platform")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Applications) != 3 || out.Applications[1].Stack != "svc-web" || len(f.Applications) != 1 {
		t.Fatalf("expanded = %+v (original now %d applications)", out.Applications, len(f.Applications))
	}
	_, err = f.Expanded([]Application{gen("svc-web", "svc-db"), gen("svc-db", "svc-web"), gen("platform")})
	if err == nil {
		t.Fatal("a cycle and a duplicate name among generated applications were accepted")
	}
	for _, s := range []string{`set "services"`, "cycle", "svc-web", "svc-db", `name "platform" is already used`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q: %v", s, err)
		}
	}
}

func TestWalkStrings_visitsNestedStringsAndNeverChangesTheTemplate(t *testing.T) {
	tpl := Application{Name: "n", Source: Source{Path: "p", Chart: &Chart{Values: Values{"image": map[string]any{"tag": "t"}}}}, DependsOn: []string{"d"}}
	got := tpl
	var fields []string
	err := WalkStrings(&got, func(field, v string) (string, error) {
		fields = append(fields, field)
		return v + "!", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(fields, " ")
	for _, f := range []string{".name", ".source.path", ".source.chart.values.image.tag", ".dependsOn[0]"} {
		if !strings.Contains(joined, f) {
			t.Errorf("field %s not visited: %s", f, joined)
		}
	}
	if got.Source.Chart.Values["image"].(map[string]any)["tag"] != "t!" {
		t.Errorf("nested value not replaced: %v", got.Source.Chart.Values)
	}
	if tpl.Source.Chart.Values["image"].(map[string]any)["tag"] != "t" {
		t.Error("the template's own map was changed")
	}
}
