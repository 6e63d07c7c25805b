package appset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/source"
)

const previewSet = `apiVersion: flotilla/v1
applicationSets:
  - name: previews
    generators:
      - pullRequest:
          repoURL: REPO
          forge: {kind: gitea, api: API, repo: shop/web}
    template:
      name: "preview-{{.number}}"
      stack: "pr-{{.number}}"
      source: {repoURL: REPO, revision: "{{.sha}}"}
`

// GitHub keeps refs/pull/N/head after a pull request closes and creates it
// for forks: the refs below are all there, and only the forge's open,
// same-repository pull request becomes a preview; closing it removes the
// preview although its ref stays.
func TestPreviewsAreTheForgesOpenPullRequestsNotEveryRef(t *testing.T) {
	repo := newGitRepo(t)
	repo.commit(map[string]string{"compose.yaml": "services: {}\n"})
	head := repo.commit(map[string]string{"compose.yaml": "services: {web: {image: x}}\n"})
	for _, n := range []int{7, 8, 9, 10} {
		repo.git("update-ref", fmt.Sprintf("refs/pull/%d/head", n), head)
	}
	srv := forgetest.New(t, "shop/web")
	srv.Set(
		forgetest.PR{Number: 7, HeadSHA: head, HeadRepo: "shop/web", Author: "ann"},
		forgetest.PR{Number: 8, HeadSHA: head, HeadRepo: "shop/web", State: "closed", Merged: true},
		forgetest.PR{Number: 9, HeadSHA: head, HeadRepo: "mallory/web", Author: "mallory"},
	)
	f := parse(t, strings.NewReplacer("REPO", repo.dir, "API", srv.GiteaAPI()).Replace(previewSet))
	e := New(Options{Refs: newFetcher(t)})
	apps, err := e.Expand(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(apps); !slices.Equal(got, []string{"preview-7"}) {
		t.Fatalf("previews %v, want only the open same-repository pull request 7", got)
	}
	if a := apps[0]; a.Stack != "pr-7" || a.Source.Revision != head || !a.Generated.Prune || !a.Generated.Preview {
		t.Fatalf("preview %+v (generated %+v)", a, a.Generated)
	}

	srv.ClosePR(7)
	apps, err = e.Expand(context.Background(), f)
	if err != nil || len(apps) != 0 {
		t.Fatalf("after the forge reports 7 closed (its ref still there): %v %v", names(apps), err)
	}
}

// A forge that does not answer is a failed read, not "no pull requests":
// the set keeps its previews.
func TestAForgeThatFailsKeepsThePreviewsAndSaysWhichRepository(t *testing.T) {
	repo := newGitRepo(t)
	head := repo.commit(map[string]string{"compose.yaml": "services: {}\n"})
	repo.git("update-ref", "refs/pull/3/head", head)
	srv := forgetest.New(t, "shop/web")
	srv.Set(forgetest.PR{Number: 3, HeadSHA: head, HeadRepo: "shop/web"})
	f := parse(t, strings.NewReplacer("REPO", repo.dir, "API", srv.GiteaAPI()).Replace(previewSet))
	e := New(Options{Refs: newFetcher(t)})
	if apps, err := e.Expand(context.Background(), f); err != nil || len(apps) != 1 {
		t.Fatalf("%v %v", names(apps), err)
	}
	srv.Close()
	apps, err := e.Expand(context.Background(), f)
	var se *SetError
	var re *ReadError
	if !errors.As(err, &se) || !se.Kept || !errors.As(err, &re) || len(apps) != 1 {
		t.Fatalf("after the forge went away: %v %v", names(apps), err)
	}
}

func TestPreviewableAppliesEachRule(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	sha := func(n int) string { return fmt.Sprintf("%040x", n) }
	pr := func(n int, mod func(*forge.PullRequest)) forge.PullRequest {
		p := forge.PullRequest{Number: n, HeadSHA: sha(n), HeadRepo: "shop/web", Author: "ann",
			Labels: []string{"preview"}, UpdatedAt: now.Add(-time.Duration(n) * time.Minute)}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	refsFor := func(prs []forge.PullRequest) map[string]string {
		m := map[string]string{}
		for _, p := range prs {
			m[fmt.Sprintf("refs/pull/%d/head", p.Number)] = p.HeadSHA
		}
		return m
	}
	cases := []struct {
		name string
		g    application.PullRequestGenerator
		prs  []forge.PullRequest
		refs func(map[string]string)
		want []int
		why  string
	}{
		{"forks are out by default", application.PullRequestGenerator{},
			[]forge.PullRequest{pr(1, nil), pr(2, func(p *forge.PullRequest) { p.Fork, p.HeadRepo = true, "eve/web" })}, nil, []int{1}, "another repository"},
		{"forks when the set says so", application.PullRequestGenerator{Forks: true},
			[]forge.PullRequest{pr(1, nil), pr(2, func(p *forge.PullRequest) { p.Fork = true })}, nil, []int{1, 2}, ""},
		{"a label is needed", application.PullRequestGenerator{Labels: []string{"deploy-preview", "preview"}},
			[]forge.PullRequest{pr(1, nil), pr(2, func(p *forge.PullRequest) { p.Labels = []string{"Preview", "wip"} })}, nil, []int{1}, "none of the labels"},
		{"an allowed author is needed", application.PullRequestGenerator{Authors: []string{"Ann"}},
			[]forge.PullRequest{pr(1, nil), pr(2, func(p *forge.PullRequest) { p.Author = "bob" })}, nil, []int{1}, `author "bob"`},
		{"idle longer than the ttl", application.PullRequestGenerator{TTL: application.Duration{Duration: time.Hour}},
			[]forge.PullRequest{pr(1, nil), pr(2, func(p *forge.PullRequest) { p.UpdatedAt = now.Add(-2 * time.Hour) }),
				pr(3, func(p *forge.PullRequest) { p.UpdatedAt = time.Time{} })}, nil, []int{1}, "ttl"},
		{"the default ttl is a week", application.PullRequestGenerator{},
			[]forge.PullRequest{pr(1, func(p *forge.PullRequest) { p.UpdatedAt = now.Add(-8 * 24 * time.Hour) })}, nil, nil, "ttl (168h0m0s)"},
		{"the ref must be at the forge's head", application.PullRequestGenerator{},
			[]forge.PullRequest{pr(1, nil), pr(2, nil), pr(3, nil)},
			func(m map[string]string) { m["refs/pull/2/head"] = sha(99); delete(m, "refs/pull/3/head") }, []int{1}, "not at the forge's head commit"},
		{"the cap keeps the most recently updated", application.PullRequestGenerator{Max: 2},
			[]forge.PullRequest{pr(5, nil), pr(1, nil), pr(9, nil), pr(3, nil)}, nil, []int{1, 3}, "over max (2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refs := refsFor(tc.prs)
			if tc.refs != nil {
				tc.refs(refs)
			}
			kept, left := Previewable(&tc.g, tc.prs, refs, now)
			var got []int
			for _, p := range kept {
				got = append(got, p.Number)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("kept %v, want %v (left %+v)", got, tc.want, left)
			}
			if len(kept)+len(left) != len(tc.prs) {
				t.Fatalf("kept %d + left %d != %d", len(kept), len(left), len(tc.prs))
			}
			for _, l := range left {
				if !strings.Contains(l.Reason, tc.why) {
					t.Fatalf("left %+v, want a reason with %q", l, tc.why)
				}
			}
		})
	}
	// The default cap.
	var many []forge.PullRequest
	for n := 1; n <= 30; n++ {
		many = append(many, pr(n, nil))
	}
	if kept, left := Previewable(&application.PullRequestGenerator{}, many, refsFor(many), now); len(kept) != application.DefaultPreviewMax || len(left) != 30-application.DefaultPreviewMax {
		t.Fatalf("default cap: kept %d left %d", len(kept), len(left))
	}
}

// A preview runs code anyone may have written: it gets the set's
// preview.allow, never the template's allow, even if a template with one
// got past validation.
func TestAPreviewNeverInheritsTheTemplatesAllowOnlyTheSetsGrant(t *testing.T) {
	repo := newGitRepo(t)
	head := repo.commit(map[string]string{"compose.yaml": "services: {}\n"})
	repo.git("update-ref", "refs/pull/4/head", head)
	srv := forgetest.New(t, "shop/web")
	srv.Set(forgetest.PR{Number: 4, HeadSHA: head, HeadRepo: "shop/web"})
	f := parse(t, strings.NewReplacer("REPO", repo.dir, "API", srv.GiteaAPI()).Replace(previewSet))
	f.ApplicationSets[0].Template.Allow = application.Allow{HostPaths: []string{"/srv"}, Capabilities: []string{"SYS_ADMIN"}, Networks: []string{"prod"}}
	// Validation refuses a preview template's key; the expander drops one
	// anyway, as it does the allow list.
	f.ApplicationSets[0].Template.SOPS = &application.SOPS{AgeKeyFile: "/run/secrets/shop-age-key"}
	e := New(Options{Refs: newFetcher(t)})
	apps, err := e.Expand(context.Background(), f)
	if err != nil || len(apps) != 1 {
		t.Fatalf("%v %v", names(apps), err)
	}
	if a := apps[0].Allow; len(a.HostPaths)+len(a.Capabilities)+len(a.Networks) != 0 {
		t.Fatalf("the preview inherited the template's allow: %+v", a)
	}
	if apps[0].SOPS != nil || !apps[0].IsPreview() || apps[0].DecryptsWithControllerKey() {
		t.Fatalf("the preview may decrypt with %+v (controller's key: %v), want no key", apps[0].SOPS, apps[0].DecryptsWithControllerKey())
	}
	f.ApplicationSets[0].Preview = &application.Preview{
		Allow: application.Allow{Networks: []string{"preview-net"}},
		SOPS:  &application.SOPS{AgeKeyFile: "/run/secrets/preview-age-key"},
	}
	apps, err = e.Expand(context.Background(), f)
	if err != nil || len(apps) != 1 {
		t.Fatalf("%v %v", names(apps), err)
	}
	if a := apps[0].Allow; !slices.Equal(a.Networks, []string{"preview-net"}) || len(a.HostPaths) != 0 {
		t.Fatalf("preview allow %+v, want only the set's grant", a)
	}
	if k, _ := apps[0].SOPSKey(); k == nil || k.AgeKeyFile != "/run/secrets/preview-age-key" {
		t.Fatalf("preview key %+v, want the set's preview.sops", k)
	}
}

// fakeFetcher answers Fetch for refs from a map: a commit, or an error.
type fakeFetcher map[string]any

func (f fakeFetcher) Fetch(_ context.Context, req source.Request) (*source.Revision, error) {
	switch v := f[req.Revision].(type) {
	case string:
		return &source.Revision{Commit: v}, nil
	case error:
		return nil, v
	}
	return nil, source.ErrRevisionNotFound
}

// The expander fetches each admitted ref and keeps the pull request only
// if it fetched the forge's head commit; a repository that cannot be read
// keeps the previews.
func TestAPreviewIsKeptOnlyIfItsFetchedCommitIsTheForgesHead(t *testing.T) {
	sha := func(n int) string { return fmt.Sprintf("%040x", n) }
	srv := forgetest.New(t, "shop/web")
	srv.Set(forgetest.PR{Number: 1, HeadSHA: sha(1), HeadRepo: "shop/web"},
		forgetest.PR{Number: 2, HeadSHA: sha(2), HeadRepo: "shop/web"},
		forgetest.PR{Number: 3, HeadSHA: sha(3), HeadRepo: "shop/web"})
	refs := staticRefs{"refs/pull/1/head": sha(1), "refs/pull/2/head": sha(2), "refs/pull/3/head": sha(3)}
	f := parse(t, strings.NewReplacer("REPO", "https://git.example.com/shop/web.git", "API", srv.GiteaAPI()).Replace(previewSet))
	fetch := fakeFetcher{"refs/pull/1/head": sha(1), "refs/pull/2/head": sha(99)} // 2 moved after the listing; 3 gone
	e := New(Options{Refs: refs, Fetcher: fetch})
	apps, err := e.Expand(context.Background(), f)
	if err != nil || !slices.Equal(names(apps), []string{"preview-1"}) {
		t.Fatalf("%v %v, want only preview-1", names(apps), err)
	}
	fetch["refs/pull/1/head"] = fmt.Errorf("%w: down", source.ErrUnreachable)
	apps, err = e.Expand(context.Background(), f)
	var se *SetError
	if !errors.As(err, &se) || !se.Kept || !slices.Equal(names(apps), []string{"preview-1"}) {
		t.Fatalf("an unreachable repository: %v %v, want preview-1 kept", names(apps), err)
	}
}

// A fork's commit is reachable only through refs/pull/N/head; after the
// expansion pinned it, a template at {{.sha}} deploys exactly it.
func TestAPinnedPreviewCommitCanBeFetchedBySHA(t *testing.T) {
	repo := newGitRepo(t)
	repo.commit(map[string]string{"compose.yaml": "services: {}\n"})
	base := repo.git("rev-parse", "HEAD")
	fork := repo.commit(map[string]string{"compose.yaml": "services: {web: {image: fork}}\n"})
	repo.git("update-ref", "refs/pull/5/head", fork)
	repo.git("reset", "-q", "--hard", base) // no branch holds the fork's commit
	srv := forgetest.New(t, "shop/web")
	srv.Set(forgetest.PR{Number: 5, HeadSHA: fork, HeadRepo: "eve/web"})
	text := strings.NewReplacer("REPO", repo.dir, "API", srv.GiteaAPI(), `revision: "{{.sha}}"`, `revision: "{{.sha}}"`,
		"forge: {kind", "forks: true\n          forge: {kind").Replace(previewSet)
	f := parse(t, text)
	fetcher := newFetcher(t)
	apps, err := New(Options{Refs: fetcher, Fetcher: fetcher}).Expand(context.Background(), f)
	if err != nil || len(apps) != 1 || apps[0].Source.Revision != fork {
		t.Fatalf("%+v %v", apps, err)
	}
	rev, err := fetcher.Fetch(context.Background(), source.Request{RepoURL: repo.dir, Revision: fork})
	if err != nil || rev.Commit != fork {
		t.Fatalf("fetching the pinned commit by SHA: %v", err)
	}
	rev.Release()
}
