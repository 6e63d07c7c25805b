package application

import (
	"strings"
	"testing"
)

// admitFile has a static application platform and a set whose
// applications a directory name decides.
const admitFile = `apiVersion: flotilla/v1
applications:
  - name: platform
    source: {repoURL: "https://h/p.git"}
applicationSets:
  - name: services
    generators:
      - git: {repoURL: "https://h/mono.git", directories: ["apps/*"]}
    template:
      name: "{{.basename}}"
      source: {repoURL: "https://h/mono.git", path: "{{.path}}"}
`

func generatedFrom(dir string, deps ...string) Application {
	base := dir[strings.LastIndex(dir, "/")+1:]
	return Application{Name: base, Source: Source{RepoURL: "https://h/mono.git", Path: dir}, DependsOn: deps,
		Generated: &Generated{Set: "services", Index: 0, Element: "basename=" + base + " path=" + dir}}
}

func TestFile_Admit_leavesOutEachBadElementAndKeepsTheRest(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(admitFile))
	if err != nil {
		t.Fatal(err)
	}
	gen := []Application{
		generatedFrom("apps/web"),
		generatedFrom("apps/Web_2"),         // not a valid name
		generatedFrom("apps/platform"),      // a static application's name
		generatedFrom("apps/shop", "Web_2"), // depends on one left out
		generatedFrom("apps/db"),
	}
	out, refused, err := f.Admit(gen, nil)
	if err != nil {
		t.Fatalf("generated input failed the file: %v", err)
	}
	var names []string
	for _, a := range out.Applications {
		names = append(names, a.Name)
	}
	if got := strings.Join(names, ","); got != "platform,web,db" {
		t.Fatalf("applications %s, want platform,web,db", got)
	}
	if len(refused) != 3 {
		t.Fatalf("refused %d, want 3: %v", len(refused), refused)
	}
	for i, want := range [][]string{
		{`set "services"`, "path=apps/Web_2", `"Web_2".name`},
		{`set "services"`, "path=apps/platform", "already used"},
		{`set "services"`, "path=apps/shop", "dependsOn"},
	} {
		for _, w := range want {
			if !strings.Contains(refused[i].Err.Error(), w) {
				t.Errorf("refusal %d does not say %q: %v", i, w, refused[i])
			}
		}
	}
	if !strings.Contains(refused[0].Err.Error(), "apps.yaml:10") {
		t.Errorf("refusal does not point at the template's name line: %v", refused[0])
	}
	if _, err := f.Expanded(gen); err == nil {
		t.Error("Expanded, the strict form flotilla validate uses, accepted the bad elements")
	}
}

func TestFile_Admit_aNewcomerDoesNotDisplaceTheRunningElement(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(admitFile))
	if err != nil {
		t.Fatal(err)
	}
	running := generatedFrom("apps/web")
	newcomer := generatedFrom("other/web") // sorts first, same name
	known := func(a *Application) bool { return a.Generated.Element == running.Generated.Element }
	out, refused, err := f.Admit([]Application{newcomer, running}, known)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Applications) != 2 || out.Applications[1].Source.Path != "apps/web" {
		t.Fatalf("applications %+v, want platform and the running web", out.Applications)
	}
	if len(refused) != 1 || !strings.Contains(refused[0].Err.Error(), "path=other/web") || !strings.Contains(refused[0].Err.Error(), "another element") {
		t.Fatalf("refused %v, want the newcomer other/web", refused)
	}
	// Without a running one, the first stays.
	out, _, _ = f.Admit([]Application{newcomer, running}, nil)
	if out.Applications[1].Source.Path != "other/web" {
		t.Fatalf("without history the first did not stay: %+v", out.Applications[1])
	}
}

func TestFile_Admit_aStaticProblemStillFailsTheFile(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(strings.Replace(admitFile, `source: {repoURL: "https://h/p.git"}`,
		"source: {repoURL: \"https://h/p.git\"}\n    dependsOn: [web]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = f.Admit(nil, nil)
	if err == nil || !strings.Contains(err.Error(), "platform") {
		t.Fatalf("a static dependency on an application no set produced: %v", err)
	}
}
