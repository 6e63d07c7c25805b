package application

import "testing"

func TestParse_feedbackNamesAForgeWithATokenAndSaysSomething(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
applications:
  - name: a
    source: {repoURL: "https://git.example.com/o/x.git"}
    feedback: {statuses: true}
  - name: b
    source: {repoURL: "https://git.example.com/o/x.git"}
    feedback:
      forge: {kind: bitbucket, api: "http://git.example.com/api/v1", repo: "o", tokenFile: token}
      pullRequest: "seven"
  - name: c
    source: {repoURL: "https://git.example.com/o/x.git"}
    feedback:
      forge: {kind: gitea, api: "https://git.example.com/api/v1", repo: o/x}
applicationSets:
  - name: p
    generators:
      - pullRequest:
          repoURL: "https://git.example.com/o/x.git"
          forge: {kind: gitea, api: "https://git.example.com/api/v1", repo: o/x}
    template:
      name: "p-{{.number}}"
      source: {repoURL: "https://git.example.com/o/x.git", revision: "{{.sha}}"}
      feedback:
        forge: {kind: gitea, api: "https://{{.author}}.example.com/api/v1", repo: o/x, tokenFile: /t}
        statuses: true
`))
	checkProblems(t, err, []want{
		{line: 5, field: "applications[0].feedback.forge", kind: ErrRequired, msg: "tokenFile"},
		{line: 9, field: "applications[1].feedback.forge.kind", kind: ErrInvalid, msg: "gitlab"},
		{line: 9, field: "applications[1].feedback.forge.api", kind: ErrInvalid, msg: "plain http"},
		{line: 9, field: "applications[1].feedback.forge.repo", kind: ErrInvalid, msg: "owner/name"},
		{line: 9, field: "applications[1].feedback.forge.tokenFile", kind: ErrInvalid, msg: "absolute"},
		{line: 10, field: "applications[1].feedback.pullRequest", kind: ErrInvalid, msg: "number"},
		{line: 13, field: "applications[2].feedback", kind: ErrInvalid, msg: "nothing to post"},
		{line: 14, field: "applications[2].feedback.forge.tokenFile", kind: ErrRequired},
		{line: 25, field: "applicationSets[0].template.feedback.forge.api", kind: ErrInvalid, msg: "not a template"},
	})
}

func TestParse_feedbackOnGitLabTakesASubgroupAndAGitHubRepoIsDerived(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
applications:
  - name: a
    source: {repoURL: "https://gitlab.example.com/grp/sub/x.git"}
    feedback:
      forge: {kind: gitlab, api: "https://gitlab.example.com/api/v4", repo: grp/sub/x, tokenFile: /run/secrets/gl}
      statuses: true
      pullRequest: "12"
  - name: b
    source: {repoURL: "https://github.com/o/x.git"}
    feedback:
      forge: {kind: github, api: "https://api.github.com", tokenFile: /run/secrets/gh}
      statuses: true
`))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Applications[0].Feedback.PullRequestNumber(); n != 12 {
		t.Fatalf("pull request %d", n)
	}
	if r := f.Applications[1].Feedback.ForgeRepo(f.Applications[1].Source.RepoURL); r != "o/x" {
		t.Fatalf("derived repo %q", r)
	}
}
