package application

import (
	"strings"
	"testing"
)

const projectsBase = `apiVersion: flotilla/v1
projects:
  - name: shop
    applications: ["shop-*"]
    sourceRepos: ["https://git.example.com/shop/*"]
    stacks: ["shop-*"]
    roles:
      - {role: operator, tokens: [ci-shop]}
      - {role: viewer, tokens: [dashboard]}
applications:
`

func TestParse_projectMemberWithinLimitsIsAccepted(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(projectsBase+`  - name: shop-web
    source: {repoURL: "https://git.example.com/shop/web.git"}
  - name: other
    source: {repoURL: "https://elsewhere.example.com/x.git"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := ProjectOf(f.Projects, "shop-web"); p == nil || p.Name != "shop" {
		t.Fatalf("ProjectOf(shop-web) = %v, want shop", p)
	}
	if p := ProjectOf(f.Projects, "other"); p != nil {
		t.Fatalf("ProjectOf(other) = %v, want none", p.Name)
	}
	if got := f.Projects[0].Roles[0]; got.Role != "operator" || got.Tokens[0] != "ci-shop" {
		t.Fatalf("binding = %+v", got)
	}
}

func TestParse_applicationFromARepoOutsideItsProjectIsRefused(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(projectsBase+`  - name: shop-web
    source: {repoURL: "https://git.example.com/billing/web.git"}
`))
	checkProblems(t, err, []want{{line: 12, app: "shop-web", field: "applications[0].source.repoURL", kind: ErrInvalid, msg: `outside project "shop"`}})
}

func TestParse_applicationOnAStackOutsideItsProjectIsRefused(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(projectsBase+`  - name: shop-web
    stack: billing
    source: {repoURL: "https://git.example.com/shop/web.git"}
`))
	checkProblems(t, err, []want{{line: 12, app: "shop-web", field: "applications[0].stack", kind: ErrInvalid, msg: `stack "billing" is outside project "shop"`}})
}

func TestParse_refusedRepoIsNotQuotedInTheMessage(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(projectsBase+`  - name: shop-web
    source: {repoURL: "https://git.example.com/billing/private-name.git"}
`))
	if err == nil || strings.Contains(err.Error(), "private-name") {
		t.Fatalf("err = %v, want a refusal that does not quote the URL", err)
	}
}

func TestParse_projectProblemsNameFileLineAndField(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
projects:
  - name: shop
    applications: ["shop-["]
    roles:
      - {role: owner, tokens: []}
  - name: shop
    applications: ["*"]
    colour: blue
applications: []
`))
	checkProblems(t, err, []want{
		{line: 4, field: "projects[0].applications[0]", kind: ErrInvalid, msg: "not a valid glob"},
		{line: 6, field: "projects[0].roles[0].role", kind: ErrInvalid, msg: `"owner" is not a role`},
		{line: 6, field: "projects[0].roles[0].tokens", kind: ErrRequired},
		{line: 7, field: "projects[1].name", kind: ErrDuplicate},
		{line: 9, field: "projects[1].colour", kind: ErrUnknownField},
	})
}

func TestParse_applicationInTwoProjectsIsRefused(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
projects:
  - {name: a, applications: ["web-*"]}
  - {name: b, applications: ["*-prod"]}
applications:
  - name: web-prod
    source: {repoURL: "https://h/x.git"}
`))
	checkProblems(t, err, []want{{line: 6, app: "web-prod", field: "applications[0].name", kind: ErrInvalid, msg: "one project only"}})
}

func TestParse_valuesRepositoryOutsideTheProjectIsRefused(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(projectsBase+`  - name: shop-web
    source:
      repoURL: "https://git.example.com/shop/web.git"
      chart: {}
      values: {repoURL: "https://git.example.com/billing/values.git", files: [a.yaml]}
`))
	checkProblems(t, err, []want{{line: 15, app: "shop-web", field: "applications[0].source.values.repoURL", kind: ErrInvalid, msg: `values repository is outside project "shop"`}})
}

func TestParse_bindingByGroupsAloneIsAcceptedAndOneWithNeitherIsRefused(t *testing.T) {
	const base = `apiVersion: flotilla/v1
projects:
  - name: shop
    applications: ["shop-*"]
    roles:
`
	f, err := Parse("apps.yaml", []byte(base+"      - {role: operator, groups: [shop-devs]}\napplications: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := f.Projects[0].Roles[0].Groups; len(g) != 1 || g[0] != "shop-devs" {
		t.Fatalf("groups = %v", g)
	}
	for body, want := range map[string]string{
		"      - {role: operator}\n":                 "projects[0].roles[0].tokens",
		"      - {role: operator, groups: [\"\"]}\n": "projects[0].roles[0].groups[0]",
	} {
		_, err := Parse("apps.yaml", []byte(base+body+"applications: []\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error naming %s", body, err, want)
		}
	}
}

func TestParse_projectViewerLogsIsReadAndOffByDefault(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(strings.Replace(projectsBase, `    stacks: ["shop-*"]`, "    stacks: [\"shop-*\"]\n    viewerLogs: true", 1)+`  - name: shop-web
    source: {repoURL: "https://git.example.com/shop/web.git"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Projects[0].ViewerLogs {
		t.Fatal("viewerLogs: true was not read")
	}
	f, err = Parse("apps.yaml", []byte(projectsBase))
	if err != nil {
		t.Fatal(err)
	}
	if f.Projects[0].ViewerLogs {
		t.Fatal("viewerLogs defaults to true")
	}
}

func TestParse_projectDestinationsLimitTheSwarmsAndTheirStacks(t *testing.T) {
	const file = `apiVersion: flotilla/v1
swarms:
  - name: eu-1
    hosts: [tcp://10.1.0.10:2376]
  - name: us-1
    hosts: [tcp://10.2.0.10:2376]
projects:
  - name: shop
    applications: ["shop-*"]
    destinations:
      - {swarm: "eu-*", stacks: ["shop-*"]}
      - {swarm: local}
applications:
`
	f, err := Parse("apps.yaml", []byte(file+`  - name: shop-eu
    destination: eu-1
    source: {repoURL: https://git.example.com/shop.git}
  - name: shop-dev
    stack: anything
    source: {repoURL: https://git.example.com/shop.git}
`))
	if err != nil {
		t.Fatalf("within the destinations: %v", err)
	}
	if len(f.Projects[0].Destinations) != 2 {
		t.Fatalf("destinations = %+v", f.Projects[0].Destinations)
	}
	_, err = Parse("apps.yaml", []byte(file+`  - name: shop-us
    destination: us-1
    source: {repoURL: https://git.example.com/shop.git}
  - name: shop-eu
    destination: eu-1
    stack: billing
    source: {repoURL: https://git.example.com/shop.git}
`))
	checkProblems(t, err, []want{
		{line: 15, app: "shop-us", field: "applications[0].destination", kind: ErrInvalid, msg: `stack "shop-us" on swarm "us-1" is outside project "shop"'s destinations`},
		{line: 18, app: "shop-eu", field: "applications[1].destination", kind: ErrInvalid, msg: `stack "billing" on swarm "eu-1" is outside project "shop"'s destinations`},
	})
	_, err = Parse("apps.yaml", []byte(strings.Replace(file, `{swarm: local}`, `{stacks: ["x"]}`, 1)))
	if err == nil || !strings.Contains(err.Error(), "projects[0].destinations[1].swarm") {
		t.Fatalf("a destination without a swarm: %v", err)
	}
}

const keyedProjects = `apiVersion: flotilla/v1
projects:
  - name: shop
    applications: ["shop-*"]
    sourceRepos: ["https://git.example.com/shop/*"]
    sops: {ageKeyFile: /run/secrets/shop-age-key}
  - name: billing
    applications: ["billing-*"]
applications:
  - name: shop-web
    source: {repoURL: "https://git.example.com/shop/web.git"}
  - name: shop-api
    source: {repoURL: "https://git.example.com/shop/api.git"}
    sops: {ageKeyFile: /run/secrets/shop-api-age-key}
  - name: billing-web
    source: {repoURL: "https://git.example.com/billing/web.git"}
  - name: other
    source: {repoURL: "https://git.example.com/other.git"}
`

func TestParse_aProjectKeyGoesToItsMembersWithoutAKeyOfTheirOwn(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(keyedProjects))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range f.Applications {
		if a.Project != nil && a.Project.SOPS != nil {
			got[a.Name] = a.Project.SOPS.AgeKeyFile
		}
	}
	// shop-api keeps its project's key too, but its own key wins where keys are
	// chosen (reconcile); billing has no key; other has no project.
	want := map[string]string{"shop-web": "/run/secrets/shop-age-key", "shop-api": "/run/secrets/shop-age-key"}
	if len(got) != len(want) || got["shop-web"] != want["shop-web"] || got["shop-api"] != want["shop-api"] {
		t.Fatalf("project keys %v, want %v", got, want)
	}
	// A generated application is placed by its name too.
	out, err := f.Expanded([]Application{{Name: "shop-preview", Source: Source{RepoURL: "https://git.example.com/shop/web.git"}}})
	if err != nil {
		t.Fatal(err)
	}
	if a := out.Applications[len(out.Applications)-1]; a.Project == nil || a.Project.SOPS == nil || a.Project.SOPS.AgeKeyFile != "/run/secrets/shop-age-key" {
		t.Fatalf("generated shop-preview: project %+v", a.Project)
	}
	// One that takes a member's name but comes from another repository is
	// refused: the key is bound to the project's repositories.
	_, err = f.Expanded([]Application{{Name: "shop-evil", Source: Source{RepoURL: "https://git.example.com/billing/web.git"}}})
	if err == nil || !strings.Contains(err.Error(), `outside project "shop"`) {
		t.Fatalf("a member from outside the project's repositories: %v", err)
	}
}

func TestParse_aProjectKeyMustBeAnAbsoluteCleanPath(t *testing.T) {
	for _, tc := range []struct{ key, msg string }{
		{`""`, "required: the absolute path"},
		{"run/secrets/shop", "must be an absolute path"},
		{"/run/secrets/../shop", "not a clean path"},
	} {
		_, err := Parse("apps.yaml", []byte(strings.Replace(keyedProjects, "/run/secrets/shop-age-key", tc.key, 1)))
		kind := ErrInvalid
		if tc.key == `""` {
			kind = ErrRequired
		}
		checkProblems(t, err, []want{{line: 6, field: "projects[0].sops.ageKeyFile", kind: kind, msg: tc.msg}})
	}
	_, err := Parse("apps.yaml", []byte(strings.Replace(keyedProjects, "sops: {ageKeyFile: /run/secrets/shop-age-key}", "sops: {ageKeyFil: /x}", 1)))
	if err == nil || !strings.Contains(err.Error(), "ageKeyFil") {
		t.Fatalf("unknown field: err = %v", err)
	}
}

// An application set's template names a fixed key: a directory name or a
// pull request must not choose which key decrypts.
func TestParse_aSetTemplateKeyMustNotBeTemplated(t *testing.T) {
	templated := strings.Replace(setFile, `      dependsOn: [platform, "{{.basename}}-db"]`, `      sops: {ageKeyFile: "/run/secrets/{{.basename}}-age-key"}`, 1)
	_, err := Parse("apps.yaml", []byte(templated))
	checkProblems(t, err, []want{{line: 15, field: "applicationSets[0].template.sops.ageKeyFile", kind: ErrInvalid, msg: "not a template"}})
	fixed := strings.Replace(templated, "{{.basename}}-age-key", "svc-age-key", 1)
	if _, err := Parse("apps.yaml", []byte(fixed)); err != nil {
		t.Fatalf("a fixed key: %v", err)
	}
}

func TestParse_aProjectKeyNeedsSourceRepos(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(strings.Replace(keyedProjects, `    sourceRepos: ["https://git.example.com/shop/*"]
`, "", 1)))
	checkProblems(t, err, []want{{line: 5, field: "projects[0].sops", kind: ErrInvalid, msg: "needs sourceRepos"}})
}
