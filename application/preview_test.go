package application

import (
	"testing"
	"time"
)

func TestParse_aPreviewSetIsBoundedAndGrantsOnlyThroughPreviewAllow(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
applicationSets:
  - name: a
    generators:
      - pullRequest: {repoURL: "https://git.example.com/o/x.git"}
    template:
      name: "a-{{.number}}"
      source: {repoURL: "https://git.example.com/o/x.git", revision: "{{.ref}}"}
      allow: {hostPaths: [/srv]}
  - name: b
    generators:
      - pullRequest:
          repoURL: "https://git.example.com/o/x.git"
          forge: {kind: gitea, api: "http://git.example.com/api/v1", repo: "o/x/y", tokenFile: token}
          labels: [" preview"]
          authors: [""]
          max: 500
          ttl: 5s
    template:
      name: "b-{{.number}}"
      source: {repoURL: "https://git.example.com/o/x.git", revision: "{{.sha}}"}
  - name: c
    preview: {allow: {hostPaths: [relative]}}
    generators:
      - list: {elements: [{n: 1}]}
    template:
      name: "c-{{.n}}"
      source: {repoURL: "https://git.example.com/o/x.git"}
`))
	checkProblems(t, err, []want{
		{line: 5, field: "applicationSets[0].generators[0].pullRequest.forge", kind: ErrRequired, msg: "refs do not"},
		{line: 8, field: "applicationSets[0].template.source.revision", kind: ErrInvalid, msg: "{{.sha}}"},
		{line: 9, field: "applicationSets[0].template.allow", kind: ErrInvalid, msg: "preview.allow"},
		{line: 14, field: "applicationSets[1].generators[0].pullRequest.forge.api", kind: ErrInvalid, msg: "plain http"},
		{line: 14, field: "applicationSets[1].generators[0].pullRequest.forge.repo", kind: ErrInvalid, msg: "owner/name"},
		{line: 14, field: "applicationSets[1].generators[0].pullRequest.forge.tokenFile", kind: ErrInvalid, msg: "absolute"},
		{line: 15, field: "applicationSets[1].generators[0].pullRequest.labels[0]", kind: ErrInvalid},
		{line: 16, field: "applicationSets[1].generators[0].pullRequest.authors[0]", kind: ErrInvalid},
		{line: 17, field: "applicationSets[1].generators[0].pullRequest.max", kind: ErrInvalid, msg: "between 1 and 100"},
		{line: 18, field: "applicationSets[1].generators[0].pullRequest.ttl", kind: ErrInvalid, msg: "a minute or more"},
		{line: 23, field: "applicationSets[2].preview", kind: ErrInvalid, msg: "pullRequest generator"},
		{line: 23, field: "applicationSets[2].preview.allow.hostPaths[0]", kind: ErrInvalid},
	})
}

func TestParse_aGitHubRepositoryNeedsNoForgeAndAPreviewAllowIsKept(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
applicationSets:
  - name: previews
    preview: {allow: {networks: [preview-net]}}
    generators:
      - pullRequest: {repoURL: "https://github.com/shop/web.git", forks: true, labels: [preview], authors: [ann], max: 3, ttl: 72h}
      - pullRequest:
          repoURL: "https://git.example.com/shop/web.git"
          forge: {kind: gitea, api: "http://127.0.0.1:3000/api/v1", repo: shop/web, tokenFile: /run/secrets/gitea}
    template:
      name: "pr-{{.number}}"
      source: {repoURL: "https://github.com/shop/web.git", revision: "{{.sha}}"}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := f.ApplicationSets[0]
	g := s.Generators[0].PullRequest
	if !s.MakesPreviews() || s.Preview.Allow.Networks[0] != "preview-net" || !g.Forks || g.Max != 3 || g.TTL.Duration != 72*time.Hour || g.Labels[0] != "preview" {
		t.Fatalf("%+v %+v", s, g)
	}
}
