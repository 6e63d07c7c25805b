package daemon

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/appset"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/window"
)

// recordingSetter remembers what a reload handed over.
type recordingSetter struct {
	apps []application.Application
	sets map[string]bool
	hold bool
}

func (r *recordingSetter) SetApplications(a []application.Application) { r.apps = a }
func (r *recordingSetter) SetSyncWindows(*window.Set)                  {}
func (r *recordingSetter) HoldOrphanPruning(h bool)                    { r.hold = h }
func (r *recordingSetter) SetApplicationSets(s map[string]bool)        { r.sets = maps.Clone(s) }

// mutableSource serves whatever the test last put in it.
type mutableSource struct{ data string }

func (s *mutableSource) read(context.Context) ([]byte, string, string, error) {
	return []byte(s.data), s.data, "apps.yaml", nil
}

func TestAReloadHandsTheControllerEachSetsPolicyOnlyWithAFileItLoads(t *testing.T) {
	file := func(prune bool, extra string) string {
		p := "false"
		if prune {
			p = "true"
		}
		return `apiVersion: flotilla/v1
applicationSets:
  - name: tiers
    prune: ` + p + `
    generators:
      - list: {elements: [{tier: gold}, {tier: lead}]}
    template:
      name: "t-{{.tier}}"
      source: {repoURL: https://git.example.com/shop.git}
` + extra + `  - name: previews
    generators:
      - pullRequest: {repoURL: https://git.example.com/shop.git, forge: {kind: gitea, api: https://git.example.com/api/v1, repo: ops/shop}}
    template:
      name: "pr-{{.number}}"
      source: {repoURL: https://git.example.com/shop.git, revision: "{{.sha}}"}
`
	}
	src := &mutableSource{data: file(true, "")}
	ctl := &recordingSetter{}
	r := &reloader{src: src, ctl: ctl, sets: appset.New(appset.Options{Refs: noRefs{}, Forges: noPulls}), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: time.Now, setsEvery: time.Hour, version: "\x00never"}
	r.check(context.Background(), true)
	if want := map[string]bool{"tiers": true, "previews": true}; !maps.Equal(ctl.sets, want) {
		t.Fatalf("sets %v, want %v", ctl.sets, want)
	}
	src.data = file(false, "")
	r.check(context.Background(), true)
	if want := map[string]bool{"tiers": false, "previews": true}; !maps.Equal(ctl.sets, want) {
		t.Fatalf("after prune was turned off: sets %v, want %v", ctl.sets, want)
	}
	// A file whose own applications do not validate with what the sets
	// generate is not loaded: its prune: true must not reach the
	// controller either.
	src.data = file(true, "") + "applications:\n  - name: shop\n    source: {repoURL: https://git.example.com/shop.git}\n    dependsOn: [t-silver]\n"
	r.check(context.Background(), true)
	if !strings.Contains(r.problem(), "t-silver") || ctl.sets["tiers"] {
		t.Fatalf("a rejected file's policy reached the controller: %v (problem %q)", ctl.sets, r.problem())
	}
}

// noRefs is a repository without any change-request ref.
type noRefs struct{}

func (noRefs) ListRefs(context.Context, string, *application.Credentials) (map[string]string, error) {
	return map[string]string{}, nil
}

// noPulls is a forge without any open pull request.
func noPulls(*application.PullRequestGenerator) (forge.Lister, string, error) {
	return listerFunc(func(context.Context, string) ([]forge.PullRequest, error) { return nil, nil }), "ops/shop", nil
}

type listerFunc func(context.Context, string) ([]forge.PullRequest, error)

func (f listerFunc) ListOpen(ctx context.Context, repo string) ([]forge.PullRequest, error) {
	return f(ctx, repo)
}

// capture keeps what a reload published.
type capture struct{ got []events.Event }

func (c *capture) Publish(e events.Event) events.Event { c.got = append(c.got, e); return e }

func TestABadGeneratedApplicationCostsOnlyItselfNeverTheFileOrTheStart(t *testing.T) {
	file := func(elements, template string) string {
		return `apiVersion: flotilla/v1
applications:
  - name: platform
    source: {repoURL: https://git.example.com/platform.git}
applicationSets:
  - name: dirs
    prune: true
    generators:
      - list: {elements: [` + elements + `]}
    template:
      name: "{{.basename}}"
      source: {repoURL: https://git.example.com/mono.git, path: "apps/{{.basename}}"}
` + template
	}
	names := func(apps []application.Application) string {
		var n []string
		for _, a := range apps {
			n = append(n, a.Name)
		}
		return strings.Join(n, ",")
	}
	src := &mutableSource{data: file(`{basename: web}, {basename: Web_2}, {basename: platform}`, "")}
	ctl := &recordingSetter{}
	pub := &capture{}
	r := &reloader{src: src, ctl: ctl, sets: appset.New(appset.Options{}), events: pub, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: time.Now, setsEvery: time.Hour, version: "\x00never"}
	// At start: the bad elements are refused, the controller starts.
	if _, apps, err := r.load(context.Background()); err != nil || names(apps) != "platform,web" {
		t.Fatalf("start: applications %s, error %v", names(apps), err)
	}
	if len(pub.got) != 2 || pub.got[0].Type != events.GeneratedRefused ||
		!strings.Contains(pub.got[0].Message, `set "dirs"`) || !strings.Contains(pub.got[0].Message, "basename=Web_2") ||
		!strings.Contains(pub.got[0].Message, ".name") || !strings.Contains(pub.got[1].Message, "already used") {
		t.Fatalf("refusals published: %+v", pub.got)
	}
	// A later change to the file, with the bad elements still there, applies.
	src.data = file(`{basename: web}, {basename: Web_2}, {basename: platform}, {basename: api}`, "")
	if !r.check(context.Background(), false) || names(ctl.apps) != "platform,web,api" || r.problem() != "" {
		t.Fatalf("a later file was not applied: %s (problem %q)", names(ctl.apps), r.problem())
	}
	// A template an element no longer validates under keeps that
	// element's last good application instead of pruning it.
	src.data = file(`{basename: web}, {basename: api}`, "      syncPolicy: {interval: 1s}\n")
	r.check(context.Background(), false)
	if names(ctl.apps) != "platform,web,api" || ctl.apps[1].SyncPolicy.Interval.Duration == time.Second {
		t.Fatalf("last good expansion not kept: %s %+v", names(ctl.apps), ctl.apps[1].SyncPolicy)
	}
}
