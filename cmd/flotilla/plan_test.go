package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

const planBase = `services:
  web:
    image: example/web:1
    environment: {MODE: a}
  worker:
    image: example/worker:1
`

const planHead = `services:
  web:
    image: example/web:2
    environment: {MODE: a}
  cache:
    image: example/cache:1
`

func gitHead(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func TestPlanPrintsExactlyTheServicesAndFieldsTheHeadChanges(t *testing.T) {
	repo := t.TempDir()
	commitFile(t, repo, "compose.yaml", planBase)
	base := gitHead(t, repo)
	commitFile(t, repo, "compose.yaml", planHead)
	head := gitHead(t, repo)

	var out, errOut bytes.Buffer
	code := runPlan(context.Background(), planOptions{Repo: repo, Base: base, Head: head, App: "shop", Path: ".", Format: "text"}, &out, &errOut)
	if code != planChanges {
		t.Fatalf("exit %d, want %d; stderr %s", code, planChanges, errOut.String())
	}
	want := "shop: head " + head[:8] + " against base " + base[:8] + "\n" +
		"  + cache (create)\n" +
		"  ~ web (update)\n" +
		"      image:  example/web:1  → example/web:2\n" +
		"  - worker (remove)\n" +
		"  1 to create, 1 to update, 1 to remove\n"
	if out.String() != want {
		t.Fatalf("plan output:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if code := runPlan(context.Background(), planOptions{Repo: repo, Base: head, Head: head, Path: ".", Format: "markdown"}, &out, &errOut); code != planNoChanges {
		t.Fatalf("same commit: exit %d, stderr %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "No changes.") {
		t.Fatalf("markdown without changes: %s", out.String())
	}

	out.Reset()
	runPlan(context.Background(), planOptions{Repo: repo, Base: base, Head: head, Path: ".", Format: "markdown"}, &out, &errOut)
	if !strings.Contains(out.String(), "| `web` | update | `image` | `example/web:1` | `example/web:2` |") {
		t.Fatalf("markdown plan:\n%s", out.String())
	}
}

func TestPlanExitsOneOnBadInputSoTwoAlwaysMeansChanges(t *testing.T) {
	repo := t.TempDir()
	commitFile(t, repo, "compose.yaml", planBase)
	var out, errOut bytes.Buffer
	for _, o := range []planOptions{
		{Repo: repo, Base: "main", Format: "text", Path: "."},
		{Repo: repo, Base: "main", Head: "nope", Format: "text", Path: "."},
		{Repo: repo, Base: "main", Head: "main", Format: "html", Path: "."},
	} {
		if code := runPlan(context.Background(), o, &out, &errOut); code != planFailed {
			t.Errorf("%+v: exit %d, want 1", o, code)
		}
	}
	if code := run([]string{"plan", "--no-such-flag"}); code != planFailed {
		t.Errorf("unknown flag: exit %d, want 1", code)
	}
}
