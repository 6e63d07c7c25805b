package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/registrytest"
)

// flotilla image plan against a real registry and a repository on disk:
// it lists every marked field, exits 2 with the commit it would make, and
// writes nothing.
func TestImagePlan_showsTheCommitWithoutWriting(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.3.0", registrytest.Image{Content: "2"})
	reg.Push(t, "tools", "stable", registrytest.Image{Content: "t"})
	src := gittest.New(t)
	compose := fmt.Sprintf("services:\n  web:\n    image: %s/shop:1.0.0\n  tools:\n    image: %s/tools:stable@sha256:%s\n", reg.Host, reg.Host, strings.Repeat("0", 64))
	src.Commit("initial", map[string]string{"deploy/compose.yaml": compose})
	origin := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainClone(origin, true, &git.CloneOptions{URL: src.Dir}); err != nil {
		t.Fatal(err)
	}
	headBefore := branchHead(t, origin)
	apps := filepath.Join(t.TempDir(), "applications.yaml")
	if err := os.WriteFile(apps, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: %[1]s, revision: main, path: deploy}
    imageUpdates:
      author: {name: Bot, email: bot@example.invalid}
      images:
        - image: %[2]s/shop
          semver: "^1"
          compose: [{file: compose.yaml, services: [web]}]
        - image: %[2]s/tools
          digest: stable
          compose: [{file: compose.yaml, services: [tools]}]
        - image: %[2]s/gone
          semver: "^1"
          compose: [{file: compose.yaml, services: [missing]}]
  - name: other
    source: {repoURL: %[1]s, revision: main}
`, origin, reg.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runImagePlan(context.Background(), imagePlanOptions{File: apps, Timeout: defaultImagePlanTimeout}, &out, &errb)
	if code != exitChanges {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitChanges, out.String(), errb.String())
	}
	for _, want := range []string{
		"application shop: branch main at " + headBefore[:12],
		"compose.yaml  services.web.image",
		reg.Host + "/shop:1.3.0",
		"services.tools.image",
		"services.missing.image",
		"error: ",
		"would commit deploy/compose.yaml:",
		"images: update " + reg.Host + "/shop 1.3.0, " + reg.Host + "/tools stable@sha256:",
		"Flotilla-Application: shop",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("plan:\n%s", out.String())
	if strings.Contains(out.String(), "application other") {
		t.Errorf("an application without imageUpdates was planned:\n%s", out.String())
	}
	if got := branchHead(t, origin); got != headBefore {
		t.Fatalf("the plan moved the branch: %s -> %s", headBefore, got)
	}

	// One application by name; an unknown one is an error.
	out.Reset()
	if code := runImagePlan(context.Background(), imagePlanOptions{File: apps, App: "other", Timeout: defaultImagePlanTimeout}, &out, &errb); code != exitFailed {
		t.Fatalf("--app other: exit %d, want %d", code, exitFailed)
	}
}

func branchHead(t *testing.T, dir string) string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Hash().String()
}

// What a repository wrote reaches the plan as text: an escape sequence in
// a current value is printed as U+FFFD, and a line break in one does not
// start a line of its own (it could pass for the plan's).
func TestImagePlan_printsRepositoryTextWithoutControlCharacters(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "shop", "1.0.0", registrytest.Image{Content: "1"})
	reg.Push(t, "shop", "1.1.0", registrytest.Image{Content: "2"})
	src := gittest.New(t)
	// YAML's double quotes spell ESC \e, BEL \a and a line break \n.
	compose := fmt.Sprintf("services:\n  web:\n    image: \"%[1]s/shop:1.0.0\\e]0;pwned\\a\\e[2J\"\n  api:\n    image: \"%[1]s/shop:1.0.0\\n  would commit nothing\"\n", reg.Host)
	src.Commit("initial", map[string]string{"compose.yaml": compose})
	apps := filepath.Join(t.TempDir(), "applications.yaml")
	if err := os.WriteFile(apps, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: %[1]s, revision: main}
    imageUpdates:
      author: {name: Bot, email: bot@example.invalid}
      images:
        - image: %[2]s/shop
          semver: "^1"
          compose: [{file: compose.yaml, services: [web, api]}]
`, src.Dir, reg.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runImagePlan(context.Background(), imagePlanOptions{File: apps, Timeout: defaultImagePlanTimeout}, &out, &errb)
	t.Logf("exit %d; plan:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	all := out.String() + errb.String()
	if strings.ContainsAny(all, "\x1b\x07") {
		t.Fatalf("control characters reached the terminal:\n%q", all)
	}
	if !strings.Contains(out.String(), "shop:1.0.0\uFFFD]0;pwned\uFFFD\uFFFD[2J") {
		t.Errorf("the web row does not show the value with U+FFFD for its control characters:\n%s", out.String())
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(line, "  would commit nothing") {
			t.Errorf("a value's line break started a line of the plan: %q", line)
		}
	}
}
