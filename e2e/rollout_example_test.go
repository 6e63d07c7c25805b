package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// docs/rollouts.md "Try it", command by command, on the real swarm: the
// controller image built by the project's script and installed with
// `flotilla install` (joining the router's network, with a read token),
// the example repository served by `git daemon`, examples/rollout/router.yaml
// deployed as a stack, the example application deployed by the controller,
// v2 committed and watched through `flotilla app rollout status`, Traefik's
// own API and requests through Traefik, then promoted, and everything
// uninstalled. What differs from the page is only what must differ on a
// shared test machine: unique names, free ports, the test's socket, a
// single controller task (its API is published on a host-mode port, which
// two tasks on one node cannot share), a temporary repository path and
// git daemon's port.

// exampleFile reads a file of examples/rollout with the replacements a
// test needs (unique names, paths), failing when one does not occur, so the
// example cannot drift from what this test replaces.
func exampleFile(t *testing.T, name string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "rollout", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("examples/rollout/%s no longer holds %q", name, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	return s
}

// tagExampleImage gives the image the example names (scripts/quickstart.sh
// tags :1; the walkthrough tags :2), removing the tag afterwards only if
// this test made it.
func tagExampleImage(t *testing.T, from, to string) {
	t.Helper()
	if exec.Command("docker", "image", "inspect", to).Run() == nil {
		return
	}
	docker(t, "", "tag", from, to)
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", to).Run() })
}

func TestTheRolloutWalkthroughRunsAsDocumented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := swarmtest.Client(t)
	stack := swarmtest.Name(t, "walk")
	app, routerStack, network := stack+"-shop", stack+"-router", stack+"-edge"
	bin := flotillaBinary(t)
	dir := t.TempDir()

	// Build the images (the controller's, the example's two versions;
	// Traefik's is imported by scripts/traefik.sh before the suite).
	image := buildSelfImage(t, stack)
	tagExampleImage(t, "flotilla-test/app:1", "flotilla-example/app:1")
	tagExampleImage(t, "flotilla-test/app:2", "flotilla-example/app:2")

	// The tokens.
	admin, read := randomToken(t), randomToken(t)
	adminFile, readFile := filepath.Join(dir, "admin-token"), filepath.Join(dir, "read-token")
	for f, tok := range map[string]string{adminFile: admin, readFile: read} {
		if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The example repository, on the host.
	repo := filepath.Join(dir, "rollout")
	if err := os.MkdirAll(filepath.Join(repo, "shop"), 0o755); err != nil {
		t.Fatal(err)
	}
	compose := exampleFile(t, "repo/shop/compose.yaml", "name: edge}", "name: "+network+"}")
	if err := os.WriteFile(filepath.Join(repo, "shop", "compose.yaml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=walkthrough", "-c", "user.email=walkthrough@example.invalid"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "v1")
	// Served by git daemon on the address the controller's task reaches
	// the host at (the docker_gwbridge gateway), as the page does.
	gw := gatewayAddr(t)
	host, gitPort, _ := net.SplitHostPort(gw)
	// git-daemon itself, not `git daemon`, which runs it as a child that
	// killing git would orphan (holding the test's output pipe open).
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	startProcess(t, swarmtest.Command(filepath.Join(strings.TrimSpace(string(execPath)), "git-daemon"), "--reuseaddr", "--listen="+host, "--port="+gitPort,
		"--base-path="+dir, "--export-all", "--informative-errors"))
	apps := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(apps, []byte(exampleFile(t, "applications.yaml",
		"name: shop", "name: "+app, "REPO_URL", "git://"+gw+"/rollout",
		"networks: [edge]", "networks: ["+network+"]")), 0o600); err != nil {
		t.Fatal(err)
	}

	// Cleanups run last first: the controller goes, then the application,
	// then the router and the network (labelled as the router stack's).
	swarmtest.Cleanup(t, routerStack)
	swarmtest.Cleanup(t, app)
	swarmtest.Cleanup(t, stack)
	t.Cleanup(func() {
		_ = swarmtest.Command(bin, "uninstall", "--stack", stack, "--timeout", "2m").Run()
		_, _ = c.ConfigRemove(context.Background(), "flotilla-lease."+stack, client.ConfigRemoveOptions{})
	})

	// The network.
	createEdgeNetwork(t, network, routerStack)

	// Install, joining the network, with the read token and the repository.
	port := freePort(t)
	install := swarmtest.Command(bin, "install", "--stack", stack, "--image", image,
		"--applications", apps, "--admin-token-file", adminFile, "--read-token-file", readFile,
		"--network", network,
		"--replicas", "1", "--publish", strconv.Itoa(port), "--publish-mode", "host",
		"--docker-socket", swarmtest.Socket(), "--timeout", "5m")
	out, err := install.CombinedOutput()
	t.Logf("flotilla install:\n%s", out)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if strings.Contains(string(out), admin) || strings.Contains(string(out), read) {
		t.Fatal("install printed a token")
	}

	// The router, as it is, polling the controller at its default address.
	e := &edge{t: t, app: app, host: "shop.example", web: strconv.Itoa(freePort(t)),
		metrics: strconv.Itoa(freePort(t)), api: strconv.Itoa(freePort(t)), http: swarmtest.HTTPClient(10 * time.Second)}
	deploy := exec.Command("docker", "stack", "deploy", "-c", routerStackFile, routerStack)
	deploy.Env = append(os.Environ(), "TRAEFIK_IMAGE="+traefikImage, "FLOTILLA_READ_TOKEN="+read,
		"WEB_PORT="+e.web, "METRICS_PORT="+e.metrics, "API_PORT="+e.api, "EDGE_NETWORK="+network)
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("docker stack deploy the router: %v\n%s", err, out)
	}

	// The CLI, as the page sets it up.
	cli := func(args ...string) (string, error) {
		cmd := swarmtest.Command(bin, args...)
		cmd.Env = append(os.Environ(), "FLOTILLA_SERVER=http://127.0.0.1:"+strconv.Itoa(port), "FLOTILLA_TOKEN_FILE="+adminFile)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	rollouts := func() ([]application.RolloutStatus, string) {
		out, err := cli("app", "rollout", "status", app, "-o", "json")
		if err != nil {
			return nil, fmt.Sprintf("rollout status: %v %s", err, out)
		}
		var rs []application.RolloutStatus
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			return nil, fmt.Sprintf("rollout status: %v %s", err, out)
		}
		return rs, out
	}

	// v1 answers through Traefik: the controller deployed the stack and
	// Traefik got its route from the controller at tasks.controller.
	load := e.startClient()
	e.waitServing(load, "v1")
	served := time.Now()

	// v2, committed; a sync makes the controller look now.
	// The page's sed: s/app:1/app:2/; s/APP_MESSAGE: v1/APP_MESSAGE: v2/
	v2 := strings.NewReplacer("app:1", "app:2", "APP_MESSAGE: v1", "APP_MESSAGE: v2").Replace(compose)
	if strings.Count(v2, "app:2") != 1 || !strings.Contains(v2, "APP_MESSAGE: v2") {
		t.Fatal("the walkthrough's sed no longer changes the example's image and message")
	}
	if err := os.WriteFile(filepath.Join(repo, "shop", "compose.yaml"), []byte(v2), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "v2")
	if out, err := cli("app", "sync", app); err != nil {
		t.Fatalf("app sync: %v\n%s", err, out)
	}

	// The first step (0): the rollout status says 10%, Traefik routes by 90/10, and
	// the requests through it are answered by both versions.
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		rs, msg := rollouts()
		return len(rs) == 1 && rs[0].Phase == "Progressing" && rs[0].Step == 0 && rs[0].Weight == 10, msg
	})
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		w := e.weights("web")
		return w["stable"] == 90 && w["canary"] == 10, fmt.Sprintf("traefik's weights %v", w)
	})
	// At least 200 answers while Traefik routes by 90/10, and both
	// versions among them, v2's share within four standard deviations of
	// 10% (plus three requests for the window's edges).
	from := time.Now()
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		v2 := count(load.since(from), from, time.Now(), "v2")
		return v2.n >= 200 && v2.of > 0 && v2.of < v2.n, fmt.Sprintf("%d answers, %d from v2, %d failed", v2.n, v2.of, v2.failed)
	})
	to := time.Now()
	if rs, msg := rollouts(); len(rs) != 1 || rs[0].Phase != "Progressing" || rs[0].Step != 0 || rs[0].Weight != 10 {
		t.Fatalf("both versions were seen, but the rollout left its first step meanwhile: %s", msg)
	}
	if w := e.weights("web"); w["stable"] != 90 || w["canary"] != 10 {
		t.Fatalf("both versions were seen, but Traefik's weights moved meanwhile: %v", w)
	}
	s := count(load.since(from), from, to, "v2")
	if s.failed > 0 {
		t.Fatalf("during the first step, %d of %d requests through Traefik failed", s.failed, s.n)
	}
	if d := float64(s.of) - 0.1*float64(s.n); d > tolerance(s.n, 0.1) || -d > tolerance(s.n, 0.1) {
		t.Fatalf("during the first step (10%%), %d of %d requests reached v2; want %.0f ± %.0f", s.of, s.n, 0.1*float64(s.n), tolerance(s.n, 0.1))
	}
	t.Logf("first step, Traefik at 90/10: %d of %d requests answered by v2, none failed", s.of, s.n)

	// Promote: v2 everywhere.
	if out, err := cli("app", "rollout", "promote", app, "--wait", "3m"); err != nil {
		t.Fatalf("rollout promote: %v\n%s", err, out)
	}
	e.waitServing(load, "v2")
	swarmtest.Eventually(t, 4*time.Minute, func() (bool, string) {
		rs, msg := rollouts()
		return len(rs) == 1 && rs[0].Phase == "Completed", msg
	})
	load.halt()
	all, after := count(load.since(time.Time{}), time.Time{}, time.Now(), ""), count(load.since(served), served, time.Now(), "")
	t.Logf("through Traefik: %d requests, %d failed (before v1 was first served: no route yet); from then on %d, %d failed", all.n, all.failed, after.n, after.failed)

	// Uninstall: the controller, its network and its three secrets go; the
	// network it joined, which it did not create, stays.
	out, err = swarmtest.Command(bin, "uninstall", "--stack", stack, "--timeout", "3m").CombinedOutput()
	t.Logf("flotilla uninstall:\n%s", out)
	if err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if got := installedSecrets(t, c, stack); len(got) != 0 {
		t.Fatalf("installed secrets after uninstall: %v", got)
	}
	if _, err := c.ServiceInspect(ctx, stack+"_controller", client.ServiceInspectOptions{}); err == nil {
		t.Fatal("the controller's service is still there after uninstall")
	}
	if _, err := c.NetworkInspect(ctx, network, client.NetworkInspectOptions{}); err != nil {
		t.Fatalf("uninstall removed %s, the network install joined but did not create: %v", network, err)
	}
	// The application keeps running, and Traefik, whose provider now
	// fails (no controller answers), keeps the routes it had.
	if a := e.get(e.http); a.code != http.StatusOK || a.version != "v2" {
		t.Fatalf("after uninstall, through Traefik: %d %q; want v2 still served", a.code, a.version)
	}
}
