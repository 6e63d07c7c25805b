package application

import (
	"strings"
	"testing"
)

// twoMarkers is two applications whose image policies write to one
// repository: shop follows web by semver, shop-pin pins it by digest. With
// {{...}} replaced they mark the same field, or do not.
const twoMarkers = `apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: "https://git.example.com/ops/shop.git", revision: main}
    imageUpdates:
      author: {name: Flotilla, email: bot@example.com}
      images:
        - image: registry.example.com/web
          semver: ">=1.0.0"
          compose:
            - file: compose.yaml
              services: [web]
  - name: shop-pin
    stack: shop-pin
    source: {repoURL: "{{repo}}", revision: "{{revision}}", path: "{{path}}"}
    imageUpdates:
      author: {name: Flotilla, email: bot@example.com}
      images:
        - image: registry.example.com/web
          digest: stable
          {{mark}}
`

func TestValidate_aFieldIsMarkedByOneImagePolicyOnly(t *testing.T) {
	composeWeb := "compose: [{file: compose.yaml, services: [api, web]}]"
	tests := []struct {
		name                       string
		repo, revision, path, mark string
		want                       []want // none: valid
	}{
		{
			name: "the same service of the same file", repo: "https://git.example.com/ops/shop.git", revision: "main", path: ".", mark: composeWeb,
			want: []want{{line: 21, app: "shop-pin", field: "applications[1].imageUpdates.images[0].compose[0].services", kind: ErrDuplicate,
				msg: `the image of service "web" of compose.yaml on branch main is already marked by application "shop" (at applications[0].imageUpdates.images[0].compose[0].services)`}},
		},
		{
			name: "the same repository spelt another way", repo: "git@GIT.example.com:ops/shop", revision: "main", path: ".", mark: composeWeb,
			want: []want{{app: "shop-pin", field: "applications[1].imageUpdates.images[0].compose[0].services", kind: ErrDuplicate, msg: `already marked by application "shop"`}},
		},
		{
			name: "the same file reached from another source path", repo: "https://git.example.com/ops/shop", revision: "main", path: "sub",
			mark: "compose: [{file: ../compose.yaml, services: [web]}]",
			want: []want{{app: "shop-pin", field: "applications[1].imageUpdates.images[0].compose[0].services", kind: ErrDuplicate, msg: "of compose.yaml on branch main"}},
		},
		{
			name: "a values path naming the compose field", repo: "https://git.example.com/ops/shop.git", revision: "main", path: ".",
			mark: "values: [{file: compose.yaml, path: services.web.image}]",
			want: []want{{app: "shop-pin", field: "applications[1].imageUpdates.images[0].values[0].path", kind: ErrDuplicate,
				msg: `path services.web.image of compose.yaml on branch main is already marked by application "shop" (at applications[0].imageUpdates.images[0].compose[0].services, as the image of service "web")`}},
		},
		{name: "another branch", repo: "https://git.example.com/ops/shop.git", revision: "staging", path: ".", mark: composeWeb},
		{name: "another repository", repo: "https://git.example.com/ops/shop-eu.git", revision: "main", path: ".", mark: composeWeb},
		{name: "another file", repo: "https://git.example.com/ops/shop.git", revision: "main", path: "eu", mark: composeWeb},
		{name: "another service", repo: "https://git.example.com/ops/shop.git", revision: "main", path: ".", mark: "compose: [{file: compose.yaml, services: [api]}]"},
		{name: "a values path beside the field", repo: "https://git.example.com/ops/shop.git", revision: "main", path: ".", mark: "values: [{file: compose.yaml, path: services.web.environment.TAG}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.NewReplacer("{{repo}}", tt.repo, "{{revision}}", tt.revision, "{{path}}", tt.path, "{{mark}}", tt.mark).Replace(twoMarkers)
			_, err := Parse("apps.yaml", []byte(text))
			checkProblems(t, err, tt.want)
		})
	}
}

func TestValidate_oneApplicationMarksAFieldOnce(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(imagesFile))
	if err != nil {
		t.Fatal(err)
	}
	// The values path is the compose mark of service web, written as a
	// path: the two policies would fight over one scalar.
	ip := &f.Applications[0].ImageUpdates.Images[1]
	ip.Values = append(ip.Values, ValuesImageTarget{File: "./compose.yaml", Path: "services.web.image", Form: FormReference})
	checkProblems(t, Validate(f), []want{{app: "shop", field: "applications[0].imageUpdates.images[1].values[1].path", kind: ErrDuplicate,
		msg: `path services.web.image of compose.yaml is marked twice (first at applications[0].imageUpdates.images[0].compose[0].services, as the image of service "web")`}})

	// A service whose name holds a dot is one key, not a path of two.
	f, err = Parse("apps.yaml", []byte(imagesFile))
	if err != nil {
		t.Fatal(err)
	}
	f.Applications[0].ImageUpdates.Images[0].Compose[0].Services = []string{"web.v2"}
	ip = &f.Applications[0].ImageUpdates.Images[1]
	ip.Values = append(ip.Values, ValuesImageTarget{File: "compose.yaml", Path: "services.web.v2.image", Form: FormReference})
	checkProblems(t, Validate(f), nil)
}

// A generated application that marks a static application's field is left
// out, and the static one keeps it.
func TestFile_Admit_refusesAGeneratedApplicationMarkingAnotherOnesField(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(strings.NewReplacer("{{repo}}", "https://h/other.git", "{{revision}}", "main", "{{path}}", ".", "{{mark}}", "compose: [{file: compose.yaml, services: [web]}]").Replace(twoMarkers)))
	if err != nil {
		t.Fatal(err)
	}
	gen := Application{
		Name:   "shop-preview",
		Source: Source{RepoURL: "https://git.example.com/ops/shop", Revision: "main"},
		ImageUpdates: &ImageUpdates{
			Author: CommitAuthor{Name: "Flotilla", Email: "bot@example.com"},
			Images: []ImagePolicy{{Image: "registry.example.com/web", Pattern: `pr-(\d+)`,
				Compose: []ComposeImageTarget{{File: "compose.yaml", Services: []string{"web"}}}}},
		},
		Generated: &Generated{Set: "previews", Index: 0, Element: "pr=7"},
	}
	out, refused, err := f.Admit([]Application{gen}, nil)
	if err != nil {
		t.Fatalf("a generated application's problem failed the file: %v", err)
	}
	if len(out.Applications) != 2 {
		t.Fatalf("%d applications, want the two static ones", len(out.Applications))
	}
	if len(refused) != 1 || !strings.Contains(refused[0].Err.Error(), `already marked by application "shop"`) {
		t.Fatalf("refused %v, want shop-preview for marking shop's field", refused)
	}
}
