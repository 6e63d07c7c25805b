package main

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
      - pullRequest: {repoURL: https://git.example.com/shop.git}
    template:
      name: "pr-{{.number}}"
      source: {repoURL: https://git.example.com/shop.git, revision: "{{.ref}}"}
`
	}
	src := &mutableSource{data: file(true, "")}
	ctl := &recordingSetter{}
	r := &reloader{src: src, ctl: ctl, sets: appset.New(appset.Options{Refs: noRefs{}}), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	// A file whose generated applications do not validate is not loaded:
	// its prune: true must not reach the controller either.
	src.data = file(true, "      syncPolicy: {interval: 1s}\n")
	r.check(context.Background(), true)
	if !strings.Contains(r.problem(), "minimum") || ctl.sets["tiers"] {
		t.Fatalf("a rejected file's policy reached the controller: %v (problem %q)", ctl.sets, r.problem())
	}
}

// noRefs is a repository without any change-request ref.
type noRefs struct{}

func (noRefs) ListRefs(context.Context, string, *application.Credentials) (map[string]string, error) {
	return map[string]string{}, nil
}
