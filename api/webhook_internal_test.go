package api

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

func TestReplayCache_claim(t *testing.T) {
	c := newReplayCache(3, time.Hour)
	t0 := time.Date(2024, 6, 10, 10, 0, 0, 0, time.UTC)
	if _, ok := c.claim(t0, "a", "a-body"); !ok {
		t.Fatal("first claim refused")
	}
	if _, ok := c.claim(t0.Add(time.Minute), "b-body", "a"); ok {
		t.Error("a key seen within the window was claimed again")
	}
	// After the window the same keys are new again.
	if _, ok := c.claim(t0.Add(time.Hour), "a", "a-body"); !ok {
		t.Error("an expired key was refused")
	}
	// The size bound forgets the oldest first.
	t1 := t0.Add(2 * time.Hour)
	for _, k := range []string{"x", "y", "z", "w"} {
		if _, ok := c.claim(t1, k); !ok {
			t.Fatalf("claim %s refused", k)
		}
	}
	if n := c.len(); n != 3 {
		t.Errorf("%d entries, want the bound 3", n)
	}
	if _, ok := c.claim(t1, "x"); !ok {
		t.Error("the oldest entry was kept past the bound")
	}
	if _, ok := c.claim(t1, "w"); ok {
		t.Error("a recent entry was forgotten")
	}
	// Release forgets a delivery whose handling failed, and only it.
	release, ok := c.claim(t1, "r", "r-body")
	if !ok {
		t.Fatal("claim r refused")
	}
	release()
	if _, ok := c.claim(t1, "r-body"); !ok {
		t.Error("a released delivery is still remembered")
	}
	release() // twice is harmless
	if _, ok := c.claim(t1, "r-body"); ok {
		t.Error("a second release forgot a later delivery")
	}
}

func TestRevisionMatches(t *testing.T) {
	cases := []struct {
		revision, ref, defaultBranch string
		want                         bool
	}{
		{"main", "refs/heads/main", "main", true},
		{"main", "refs/heads/maintenance", "main", false},
		{"main", "refs/tags/main", "", true}, // the fetcher tries the tag first
		{"v1.2.0", "refs/tags/v1.2.0", "main", true},
		{"v1.2.0", "refs/tags/v1.2.1", "main", false},
		{"refs/heads/main", "refs/heads/main", "", true},
		{"refs/heads/main", "refs/tags/main", "", false},
		{"HEAD", "refs/heads/main", "main", true},
		{"", "refs/heads/main", "main", true},
		{"HEAD", "refs/heads/dev", "main", false},
		{"HEAD", "refs/heads/dev", "", true}, // default branch unknown
		{"HEAD", "refs/tags/v1", "", false},
		{"0123456789abcdef0123456789abcdef01234567", "refs/heads/main", "main", false},
		{"feature/x", "refs/heads/feature/x", "main", true},
	}
	for _, tc := range cases {
		if got := revisionMatches(tc.revision, tc.ref, tc.defaultBranch); got != tc.want {
			t.Errorf("revisionMatches(%q, %q, %q) = %v, want %v", tc.revision, tc.ref, tc.defaultBranch, got, tc.want)
		}
	}
}

func TestPushEvent_touches(t *testing.T) {
	ev := pushEvent{files: []string{"shop/compose.yml", "/common/base.yml", "docs/./a.md"}, complete: true}
	cases := []struct {
		target WebhookTarget
		want   bool
	}{
		{WebhookTarget{Path: "shop"}, true},
		{WebhookTarget{Path: "./shop/"}, true},
		{WebhookTarget{Path: "sho"}, false},
		{WebhookTarget{Path: "billing"}, false},
		{WebhookTarget{Path: "billing", ExtraPaths: []string{"common"}}, true},
		{WebhookTarget{Path: "billing", ExtraPaths: []string{"common/base.yml"}}, true},
		{WebhookTarget{Path: "."}, true},
		{WebhookTarget{Path: ""}, true},
		{WebhookTarget{Path: "docs"}, true},
		{WebhookTarget{Path: "shop/compose.yml/x"}, false},
	}
	for _, tc := range cases {
		if got := ev.touches(tc.target); got != tc.want {
			t.Errorf("touches(%+v) = %v, want %v", tc.target, got, tc.want)
		}
	}
	incomplete := pushEvent{files: []string{"shop/compose.yml"}}
	if !incomplete.touches(WebhookTarget{Path: "billing"}) {
		t.Error("an incomplete file list must touch every path")
	}
}

func TestChangedFiles_truncation(t *testing.T) {
	if _, complete := changedFiles(nil, nil); complete {
		t.Error("no commits at all counted as a complete list")
	}
	many := make([]string, maxListedFiles)
	if _, complete := changedFiles([]forgeCommit{{Modified: many}}, nil); complete {
		t.Error("a file list at the forge's cap counted as complete")
	}
	files, complete := changedFiles([]forgeCommit{{Added: []string{"a"}}, {Removed: []string{"b"}}}, &forgeCommit{Modified: []string{"c"}})
	if !complete || !slices.Equal(files, []string{"a", "b", "c"}) {
		t.Errorf("changedFiles = %v, %v", files, complete)
	}
}

// FuzzWebhookPayload feeds arbitrary bodies to every provider's parser and
// routes what parses, as a delivery does once its signature verified. No
// body may panic.
func FuzzWebhookPayload(f *testing.F) {
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "webhooks", "*.json"))
	for _, name := range fixtures {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `"x"`, `{"ref": null}`,
		`{"ref": "refs/heads/main", "repository": {}}`,
		`{"ref": "main", "repository": {"clone_url": "git@[::1]:x"}, "commits": [null, {"added": null}], "head_commit": null}`,
		`{"ref": "refs/tags/v1", "after": "0000", "project": {"web_url": "::"}, "total_commits_count": -1}`,
		`{"push": {"changes": [{"new": null}, {"new": {"type": "tag", "name": ""}}, {"new": {"type": "branch", "name": "x"}}]}, "repository": {"full_name": "a/b"}}`,
		`{"repository": "file:///srv/x", "ref": "refs/heads/main", "paths": ["../../etc", "", "/"], "id": "x"}`,
		`{"repository": "https://h/a", "ref": "x"} trailing`,
	} {
		f.Add([]byte(s))
	}
	targets := []WebhookTarget{
		{App: "a", RepoURL: "https://github.com/acme/platform", Revision: "main", Path: "shop"},
		{App: "b", RepoURL: "git@bitbucket.org:acme/platform.git", Revision: "HEAD", Path: ".", ExtraPaths: []string{"common"}},
		{App: "c", RepoURL: "not a url", Revision: "v1"},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range WebhookProviders() {
			ev, err := providerOf(p).parse(body)
			if err != nil {
				continue
			}
			apps, reason := ev.match(targets)
			if len(apps) == 0 && reason == "" {
				t.Errorf("%s: nothing matched and no reason given", p)
			}
		}
	})
}

func TestPushTouchingAValuesFileRefreshesTheChartApplication(t *testing.T) {
	app := application.Application{Name: "shop-eu", Source: application.Source{
		RepoURL: "https://github.com/acme/deploy", Revision: "main", Path: "charts/shop", Chart: &application.Chart{},
		Values: &application.ValuesSource{RepoURL: "https://github.com/acme/values", Revision: "main", Files: []string{"eu/shop.yaml", "common.yaml"}},
	}}
	vt, ok := ValuesWebhookTarget(app)
	if !ok {
		t.Fatal("no target for the values repository")
	}
	targets := []WebhookTarget{NewWebhookTarget(app), vt}
	push := func(files ...string) pushEvent {
		return pushEvent{repos: []string{"https://github.com/acme/values"}, refs: []string{"refs/heads/main"}, files: files, complete: true}
	}
	if apps, why := push("common.yaml").match(targets); !slices.Equal(apps, []string{"shop-eu"}) {
		t.Fatalf("push of a values file: %v (%s)", apps, why)
	}
	if apps, _ := push("us/shop.yaml").match(targets); len(apps) != 0 {
		t.Fatalf("push of another file refreshed %v", apps)
	}
	if _, ok := ValuesWebhookTarget(application.Application{Name: "plain"}); ok {
		t.Fatal("a target for an application without source.values")
	}
}
