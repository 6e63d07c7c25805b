package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
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

// commitFile writes name in the repository at dir (creating it) and
// commits it with the git command line.
func commitFile(t *testing.T, dir, name, body string) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		run("init", "-q", "-b", "main")
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "-A")
	run("commit", "-q", "-m", "change")
}

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
	if code != exitChanges {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitChanges, errOut.String())
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
	if code := runPlan(context.Background(), planOptions{Repo: repo, Base: head, Head: head, Path: ".", Format: "markdown"}, &out, &errOut); code != exitOK {
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
		if code := runPlan(context.Background(), o, &out, &errOut); code != exitFailed {
			t.Errorf("%+v: exit %d, want 1", o, code)
		}
	}
	if code := run([]string{"plan", "--no-such-flag"}); code != exitFailed {
		t.Errorf("unknown flag: exit %d, want 1", code)
	}
}

func TestPlanWithAServerAlsoComparesTheHeadWithWhatTheControllerDeployed(t *testing.T) {
	repo := t.TempDir()
	commitFile(t, repo, "compose.yaml", planBase)
	base := gitHead(t, repo)
	commitFile(t, repo, "compose.yaml", planHead)
	head := gitHead(t, repo)

	// The controller runs the head's web already, and nothing else.
	deployed, err := compose.Render("shop", compose.Dir{Root: repo, Path: ".", Files: []string{"compose.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(deployed.Manifest, "example/cache:1", "example/cache:0", 1)
	ctl := apitest.NewController(application.Status{Name: "shop", Stack: "shop", Sync: application.OutOfSync,
		Drift: []application.Drift{{Service: "web", Field: "env.MODE", Desired: "a", Live: "b"}}})
	ctl.SetHistory("shop", []charts.Release{{Revision: 1, Commit: base}, {Revision: 4, Commit: head, Manifest: manifest}})
	srv := httptest.NewServer(api.New(api.Options{Controller: ctl, NoAuth: true, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()

	var out, errOut bytes.Buffer
	code := runPlan(context.Background(), planOptions{Repo: repo, Base: base, Head: head, App: "shop", Path: ".", Format: "text", Server: srv.URL}, &out, &errOut)
	if code != exitChanges {
		t.Fatalf("exit %d; stderr %s", code, errOut.String())
	}
	want := "shop: head " + head[:8] + " against the swarm (revision 4, " + head[:8] + ")\n" +
		"  ~ cache (update)\n" +
		"      image:  example/cache:0  → example/cache:1\n" +
		"  note: live drift on web: env.MODE is b on the swarm, a in git\n" +
		"  0 to create, 1 to update, 0 to remove\n"
	if got := out.String(); !strings.HasSuffix(got, want) {
		t.Fatalf("plan against the server:\n%s\nwant it to end with:\n%s", got, want)
	}
}

func TestPlanOfAChartInGitComparesWhatItsValuesRenderAtEachCommit(t *testing.T) {
	repo := t.TempDir()
	for _, d := range []string{"charts/site/templates"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	commitFile(t, repo, "charts/site/Chart.yaml", "apiVersion: v2\nname: site\nversion: 0.1.0\n")
	commitFile(t, repo, "charts/site/templates/stack.yaml",
		"services:\n  web:\n    image: example/web:{{ .Values.tag }}\n    deploy: {replicas: {{ .Values.replicas }}}\n  worker:\n    image: example/worker:1\n")
	commitFile(t, repo, "charts/site/values.yaml", "tag: \"1\"\nreplicas: 1\n")
	commitFile(t, repo, "charts/site/values-eu.yaml", "replicas: 2\n")
	base := gitHead(t, repo)
	commitFile(t, repo, "charts/site/values-eu.yaml", "replicas: 3\n")
	head := gitHead(t, repo)

	config := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: flotilla/v1\napplications:\n  - name: site-eu\n    stack: site-eu\n    source:\n      repoURL: "+repo+
		"\n      path: charts/site\n      chart:\n        valueFiles: [values-eu.yaml]\n        set: {tag: \"2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := runPlan(context.Background(), planOptions{Repo: repo, Base: base, Head: head, Config: config, Path: ".", Format: "text"}, &out, &errOut)
	if code != exitChanges {
		t.Fatalf("exit %d, want %d; stderr %s\nstdout %s", code, exitChanges, errOut.String(), out.String())
	}
	// Only the value file changed between the commits, and only web's
	// replicas read it; the set tag is the same on both sides.
	if !strings.Contains(out.String(), "~ web (update)") || strings.Contains(out.String(), "worker") || strings.Contains(out.String(), "image") {
		t.Fatalf("plan of the chart:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "replicas") || !strings.Contains(out.String(), "0 to create, 1 to update, 0 to remove") {
		t.Fatalf("plan does not name the replicas change:\n%s", out.String())
	}
}
