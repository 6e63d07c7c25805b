package application

import (
	"testing"
	"time"
)

const imagesFile = `apiVersion: flotilla/v1
applications:
  - name: shop
    source:
      repoURL: https://git.example.com/shop.git
      revision: main
    imageUpdates:
      author: {name: Flotilla, email: bot@example.com}
      images:
        - image: registry.example.com/shop
          semver: ">=1.2 <2"
          compose:
            - file: compose.yaml
              services: [web, worker]
        - image: registry.example.com/tools
          pattern: 'build-(?P<n>\d+)'
          capture: n
          values:
            - file: values.yaml
              path: tools.image.tag
              form: tag
        - image: nginx
          digest: stable
          compose:
            - file: compose.yaml
              services: [proxy]
`

func TestParse_imageUpdates(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(imagesFile))
	if err != nil {
		t.Fatal(err)
	}
	iu := f.Applications[0].ImageUpdates
	if iu.Branch != "main" || iu.Interval.Duration != 5*time.Minute || iu.Images[1].Order != OrderNumerical || iu.Images[1].Values[0].Form != FormTag {
		t.Fatalf("defaults: %+v", iu)
	}
}

func TestValidate_imageUpdates(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(a *Application)
		field string
	}{
		{"no policy", func(a *Application) { a.ImageUpdates.Images[0].Semver = "" }, "applications[0].imageUpdates.images[0]"},
		{"two policies", func(a *Application) { a.ImageUpdates.Images[0].Digest = "latest" }, "applications[0].imageUpdates.images[0]"},
		{"bad range", func(a *Application) { a.ImageUpdates.Images[0].Semver = "one point two" }, "applications[0].imageUpdates.images[0].semver"},
		{"bad pattern", func(a *Application) { a.ImageUpdates.Images[1].Pattern = "(" }, "applications[0].imageUpdates.images[1].pattern"},
		{"unknown capture", func(a *Application) { a.ImageUpdates.Images[1].Capture = "ts" }, "applications[0].imageUpdates.images[1].capture"},
		{"image with a tag", func(a *Application) { a.ImageUpdates.Images[0].Image += ":1" }, "applications[0].imageUpdates.images[0].image"},
		{"nothing marked", func(a *Application) { a.ImageUpdates.Images[0].Compose = nil }, "applications[0].imageUpdates.images[0]"},
		{"file leaves the repository", func(a *Application) { a.ImageUpdates.Images[0].Compose[0].File = "../x.yaml" }, "applications[0].imageUpdates.images[0].compose[0].file"},
		{"service marked twice", func(a *Application) {
			a.ImageUpdates.Images[2].Compose[0].Services = []string{"web"}
		}, "applications[0].imageUpdates.images[2].compose[0].services"},
		{"bad values path", func(a *Application) { a.ImageUpdates.Images[1].Values[0].Path = "a..b" }, "applications[0].imageUpdates.images[1].values[0].path"},
		{"no author", func(a *Application) { a.ImageUpdates.Author.Email = "" }, "applications[0].imageUpdates.author.email"},
		{"interval too short", func(a *Application) { a.ImageUpdates.Interval.Duration = time.Second }, "applications[0].imageUpdates.interval"},
		{"relative signing key", func(a *Application) { a.ImageUpdates.SigningKeyFile = "keys/id" }, "applications[0].imageUpdates.signingKeyFile"},
		{"no branch to push to", func(a *Application) { a.ImageUpdates.Branch = "HEAD" }, "applications[0].imageUpdates.branch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("apps.yaml", []byte(imagesFile))
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(&f.Applications[0])
			got := problems(t, Validate(f))
			if len(got) != 1 || got[0].Field != tt.field {
				t.Fatalf("problems %v, want one at %s", got, tt.field)
			}
		})
	}
}

func TestValidate_imageUpdatesPullRequest(t *testing.T) {
	withPR := func(a *Application) {
		a.ImageUpdates.PullRequest = &ImagePullRequest{Forge: &Forge{Kind: "gitea", API: "https://git.example.com/api/v1", Repo: "ops/shop", TokenFile: "/run/secrets/forge"}}
	}
	tests := []struct {
		name  string
		edit  func(a *Application)
		field string
	}{
		{"no forge", func(a *Application) { a.ImageUpdates.PullRequest.Forge = nil }, "applications[0].imageUpdates.pullRequest.forge"},
		{"no token", func(a *Application) { a.ImageUpdates.PullRequest.Forge.TokenFile = "" }, "applications[0].imageUpdates.pullRequest.forge.tokenFile"},
		{"relative token", func(a *Application) { a.ImageUpdates.PullRequest.Forge.TokenFile = "forge" }, "applications[0].imageUpdates.pullRequest.forge.tokenFile"},
		{"unknown forge", func(a *Application) { a.ImageUpdates.PullRequest.Forge.Kind = "bitbucket" }, "applications[0].imageUpdates.pullRequest.forge.kind"},
		{"token over http", func(a *Application) { a.ImageUpdates.PullRequest.Forge.API = "http://git.example.com/api/v1" }, "applications[0].imageUpdates.pullRequest.forge.api"},
		{"no repo", func(a *Application) { a.ImageUpdates.PullRequest.Forge.Repo = "" }, "applications[0].imageUpdates.pullRequest.forge.repo"},
		{"bad prefix", func(a *Application) { a.ImageUpdates.PullRequest.BranchPrefix = "a b" }, "applications[0].imageUpdates.pullRequest.branchPrefix"},
		{"head is the base", func(a *Application) {
			a.ImageUpdates.PullRequest.BranchPrefix = "x"
			a.ImageUpdates.Branch = "x/shop"
		}, "applications[0].imageUpdates.pullRequest.branchPrefix"},
	}
	f, err := Parse("apps.yaml", []byte(imagesFile))
	if err != nil {
		t.Fatal(err)
	}
	withPR(&f.Applications[0])
	if got := problems(t, Validate(f)); len(got) != 0 {
		t.Fatalf("a valid pullRequest: %v", got)
	}
	if h := f.Applications[0].ImageUpdates.PullRequest.HeadBranch("shop"); h != "flotilla/images/shop" {
		t.Fatalf("default head branch %q", h)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("apps.yaml", []byte(imagesFile))
			if err != nil {
				t.Fatal(err)
			}
			withPR(&f.Applications[0])
			tt.edit(&f.Applications[0])
			got := problems(t, Validate(f))
			if len(got) != 1 || got[0].Field != tt.field {
				t.Fatalf("problems %v, want one at %s", got, tt.field)
			}
		})
	}
}
