package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

const talkerStack = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    environment:
      MARK: web-logs-e2e
      DB_URL: https://dbuser:hunter22@db.example/app
    stop_grace_period: 1s
  worker:
    image: flotilla-test/app:1
    environment:
      MARK: worker-logs-e2e
    networks: [back]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [token]
    stop_grace_period: 1s
networks:
  back: {driver: overlay}
configs:
  conf: {file: ./app.conf}
secrets:
  token: {file: ./token.txt}
`

// oneAppFile writes into dir an applications file of one automated
// application, named as its stack, from repo's deploy directory; its 10m
// interval leaves every pass after the first to the test.
func oneAppFile(t *testing.T, dir, stack, repo string) string {
	t.Helper()
	appsFile := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source: {repoURL: %[2]s, revision: main, path: deploy}
    stack: %[1]s
    syncPolicy: {automated: {}, interval: 10m}
`, stack, repo)), 0o644); err != nil {
		t.Fatal(err)
	}
	return appsFile
}

func TestBinaryAppLogsPrintsFollowsAndRefusesAViewer(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "logs")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": talkerStack,
		"deploy/app.conf": "level debug\n", "deploy/token.txt": "logs-e2e-secret-value\n"})
	appsFile := oneAppFile(t, t.TempDir(), stack, repo.Dir)
	addr := freeAddr(t)
	const admin, viewer = "e2e-logs-admin-0123456789", "e2e-logs-viewer-0123456789"
	startController(t, appsFile, "e2elogs", []string{"FLOTILLA_ADMIN_TOKEN=" + admin, "FLOTILLA_READ_TOKEN=" + viewer},
		"--listen", addr, "--log-level", "warn")
	server := "http://" + addr
	c := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}

	var out string
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		var code int
		out, code = c.run("app", "logs", stack, "--tail", "100", "--timestamps")
		return code == 0 && strings.Contains(out, "MARK=web-logs-e2e") && strings.Contains(out, "MARK=worker-logs-e2e"), out
	})
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(l, " web.") && !strings.Contains(l, " worker.") {
			t.Errorf("a line without its timestamp and service.task prefix: %q", l)
		}
	}
	if strings.Contains(out, "hunter22") {
		t.Errorf("a URL's password reached the CLI through the logs:\n%s", out)
	}
	// The status names each service's tasks, for the console's tree.
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		if _, code := c.run("app", "refresh", stack); code != 0 {
			return false, "refresh failed"
		}
		var st application.Status
		c.mustJSON(&st, "app", "get", stack)
		for _, svc := range st.Services {
			if len(svc.Tasks) == 0 || svc.Tasks[0].State != "running" || svc.Tasks[0].Node == "" || svc.Tasks[0].ID == "" || svc.Tasks[0].Since.IsZero() {
				return false, fmt.Sprintf("service %s's tasks in the status: %+v", svc.Name, svc.Tasks)
			}
		}
		if len(st.Services) != 2 {
			return false, fmt.Sprintf("%d services", len(st.Services))
		}
		// Configs and secrets carry the content digest of their rotation.
		w := st.Services[1]
		got := fmt.Sprint(w.Networks, w.Configs, w.Secrets)
		return w.Name == "worker" && len(w.Networks) == 1 && w.Networks[0] == stack+"_back" &&
			len(w.Configs) == 1 && strings.HasPrefix(w.Configs[0], stack+"_conf") &&
			len(w.Secrets) == 1 && strings.HasPrefix(w.Secrets[0], stack+"_token"), "worker uses " + got
	})
	if out, _ := c.run("app", "get", stack, "-o", "json"); strings.Contains(out, "logs-e2e-secret-value") {
		t.Error("a secret's value is in the status")
	}
	web, code := c.run("app", "logs", stack, "--service", "web", "-n", "2")
	if lines := strings.Split(strings.TrimSpace(web), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "web.") {
		t.Errorf("--service web -n 2: exit %d\n%s", code, web)
	}
	if _, code := c.run("app", "logs", stack, "--service", "nope"); code == 0 {
		t.Error("logs of a service the application does not have succeeded")
	}
	view := cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + viewer}}
	if _, code := view.run("app", "logs", stack); code == 0 {
		t.Error("the read token read the logs")
	}
	req, _ := http.NewRequest("GET", server+"/api/v1/applications/"+stack+"/logs", nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's GET …/logs: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}

	// -f keeps printing until interrupted, and an interrupt is a clean end.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "app", "logs", stack, "-f", "--service", "worker")
	cmd.Env = append(os.Environ(), c.env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "MARK=worker-logs-e2e") {
			break
		}
	}
	exited := make(chan error, 1)
	go func() {
		for sc.Scan() {
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		t.Fatalf("app logs -f ended by itself: %v", err)
	case <-time.After(2 * time.Second):
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("app logs -f interrupted: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("app logs -f still runs 15s after an interrupt")
	}
}
