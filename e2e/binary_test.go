package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// flotillaBinary builds cmd/flotilla once for the package.
func flotillaBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flotilla-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "flotilla")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/flotilla-gitops/flotilla/cmd/flotilla").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// cli runs the binary as a user would, with the server and token from the
// environment, and returns stdout and the exit code.
type cli struct {
	t      *testing.T
	bin    string
	env    []string
	server string
}

func (c cli) run(args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), c.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("%v: %v", args, err)
	}
	if code != 0 {
		c.t.Logf("flotilla %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errb.String())
	}
	return out.String(), code
}

func (c cli) mustJSON(v any, args ...string) {
	c.t.Helper()
	out, code := c.run(append(args, "-o", "json")...)
	if code != 0 {
		c.t.Fatalf("flotilla %s: exit %d", strings.Join(args, " "), code)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("flotilla %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestBinaryControllerAndEveryCLICommand(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "bin")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", files(stackFile))

	dir := t.TempDir()
	// A notification sink that records what it is sent.
	var notes struct {
		sync.Mutex
		bodies []string
	}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		notes.Lock()
		notes.bodies = append(notes.bodies, string(body))
		notes.Unlock()
	}))
	defer sink.Close()
	urlFile := filepath.Join(dir, "sink-url")
	if err := os.WriteFile(urlFile, []byte(sink.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appsFile := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
notifications:
  - name: recorder
    type: webhook
    urlFile: %[3]s
    events: [sync.succeeded]
applications:
  - name: %[1]s
    source:
      repoURL: %[2]s
      revision: main
      path: deploy
      compose:
        envFiles: [.env]
    stack: %[1]s
    syncPolicy:
      automated: {}
      interval: 10m
`, stack, repo.Dir, urlFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := (cli{t: t, bin: bin}).run("validate", "-f", appsFile); code != 0 {
		t.Fatal("validate failed")
	}

	addr := freeAddr(t)
	const token = "e2e-admin-token-0123456789"
	const hookSecret = "e2e-webhook-secret"
	startController(t, appsFile, "e2ebin", []string{"FLOTILLA_ADMIN_TOKEN=" + token, "FLOTILLA_WEBHOOK_SECRET=" + hookSecret},
		"--listen", addr, "--log-level", "warn")
	server := "http://" + addr
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + token}}

	// Ready once the first pass is done and the swarm answers.
	waitReady(t, server, 60*time.Second)
	scrape := func() float64 {
		req, _ := http.NewRequest(http.MethodGet, server+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("metrics do not parse: %v", err)
		}
		var n float64
		if f, ok := fams["flotilla_reconcile_duration_seconds"]; ok {
			for _, m := range f.GetMetric() {
				n += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return n
	}
	passesBefore := scrape()

	var list api.ApplicationList
	c.mustJSON(&list, "app", "list")
	if len(list.Items) != 1 || list.Items[0].Name != stack || list.Items[0].Sync != "Synced" {
		t.Fatalf("app list: %+v", list.Items)
	}
	if out, code := c.run("app", "get", stack); code != 0 || !strings.Contains(out, "web") {
		t.Fatalf("app get: %d\n%s", code, out)
	}
	var hist api.HistoryList
	c.mustJSON(&hist, "app", "history", stack)
	if len(hist.Items) != 1 || hist.Items[0].Revision != 1 {
		t.Fatalf("history: %+v", hist.Items)
	}

	// A commit, then refresh, diff and an explicit sync that waits.
	repo.Commit("worker queue", files(strings.Replace(stackFile, "QUEUE: jobs", "QUEUE: urgent", 1)))
	var diff api.Diff
	c.mustJSON(&diff, "app", "diff", stack)
	if !strings.Contains(diff.Manifest, "urgent") || len(diff.Services) != 1 || diff.Services[0].Name != "worker" {
		t.Fatalf("diff: %+v", diff)
	}
	if _, code := c.run("app", "sync", stack, "--wait", "--timeout", "2m"); code != 0 {
		t.Fatal("sync --wait failed")
	}
	c.mustJSON(&hist, "app", "history", stack)
	if len(hist.Items) != 2 || hist.Items[0].Revision != 2 {
		t.Fatalf("history after sync: %+v", hist.Items)
	}
	if scrape() <= passesBefore {
		t.Fatal("reconcile metrics did not move with a sync")
	}

	// Roll back to revision 1: redeployed, and it stays there on refresh.
	if _, code := c.run("app", "rollback", stack, "1", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatal("rollback failed")
	}
	workerEnv := func() []string {
		s, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_worker", client.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Service.Spec.TaskTemplate.ContainerSpec.Env
	}
	if env := strings.Join(workerEnv(), " "); !strings.Contains(env, "QUEUE=jobs") {
		t.Fatalf("rollback did not redeploy revision 1: %s", env)
	}
	if _, code := c.run("app", "refresh", stack); code != 0 {
		t.Fatal("refresh failed")
	}
	if _, code := c.run("app", "sync", stack, "--dry-run", "--wait", "--timeout", "1m"); code != 0 {
		t.Fatal("dry-run sync failed")
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		var app struct {
			Name   string `json:"name"`
			Pinned string `json:"pinned"`
		}
		c.mustJSON(&app, "app", "get", stack)
		return app.Pinned != "", "not pinned"
	})
	if env := strings.Join(workerEnv(), " "); !strings.Contains(env, "QUEUE=jobs") {
		t.Fatalf("automated sync left the rollback: %s", env)
	}
	c.mustJSON(&hist, "app", "history", stack)
	if hist.Items[0].Revision != 3 || !strings.HasPrefix(hist.Items[0].Trigger, "rollback to revision 1") {
		t.Fatalf("history after rollback: %+v", hist.Items[0])
	}

	// A new commit ends the rollback.
	repo.Commit("worker queue again", files(strings.Replace(stackFile, "QUEUE: jobs", "QUEUE: later", 1)))
	if _, code := c.run("app", "sync", stack, "--wait", "--timeout", "2m"); code != 0 {
		t.Fatal("sync after rollback failed")
	}
	if env := strings.Join(workerEnv(), " "); !strings.Contains(env, "QUEUE=later") {
		t.Fatalf("new commit not deployed after rollback: %s", env)
	}

	// A signed GitHub push touching the application's path refreshes it; a
	// forged one is refused.
	push := fmt.Sprintf(`{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111","after":"2222222222222222222222222222222222222222","repository":{"clone_url":%q,"default_branch":"main"},"commits":[{"id":"2222222222222222222222222222222222222222","added":[],"removed":[],"modified":["deploy/docker-compose.yml"]}],"head_commit":{"id":"2222222222222222222222222222222222222222"}}`, repo.Dir)
	hook := func(secret, delivery string) (int, string) {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(push))
		req, _ := http.NewRequest(http.MethodPost, server+"/api/v1/webhooks/github", strings.NewReader(push))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := hook("wrong-secret", "d-1"); code != http.StatusUnauthorized {
		t.Fatalf("forged webhook: %d %s", code, body)
	}
	if code, body := hook(hookSecret, "d-2"); code != http.StatusAccepted || !strings.Contains(body, stack) {
		t.Fatalf("webhook: %d %s", code, body)
	}

	// The sink heard of the syncs, and of nothing it did not ask for.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		notes.Lock()
		defer notes.Unlock()
		n := 0
		for _, b := range notes.bodies {
			if !strings.Contains(b, `"sync.succeeded"`) || !strings.Contains(b, stack) {
				t.Fatalf("unexpected notification: %s", b)
			}
			n++
		}
		return n >= 3, fmt.Sprintf("%d notifications", n)
	})

	if out, code := c.run("status"); code != 0 && code != 1 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	// The applications file is watched: an application removed from it
	// leaves the controller, and without --prune its stack stays.
	if err := os.WriteFile(appsFile, []byte("apiVersion: flotilla/v1\napplications: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		c.mustJSON(&list, "app", "list")
		return len(list.Items) == 0, fmt.Sprintf("%d applications", len(list.Items))
	})
	if s, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_worker", client.ServiceInspectOptions{}); err != nil || s.Service.ID == "" {
		t.Fatalf("stack of a removed application was touched without --prune: %v", err)
	}

	// The web UI is served (its data calls need the token like any other).
	if resp, err := http.Get(server + "/ui/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("web UI: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	// A read without a token is refused, with advice.
	noToken := cli{t: t, bin: bin, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN="}}
	if _, code := noToken.run("app", "list"); code == 0 {
		t.Fatal("app list without a token succeeded")
	}
}
