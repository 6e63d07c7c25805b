package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The release path as an operator takes it: the image built by `docker
// build` from the repository's Dockerfile (through build-flotilla-image.sh),
// installed with one command, upgraded by image tag, uninstalled. The API is
// published on a host-mode port of a random number (the routing mesh does not
// forward on every test machine), so the controller runs one task.

func TestReleaseImageInstallsUpgradesAndUninstalls(t *testing.T) {
	ctx := context.Background()
	c := swarmtest.Client(t)
	stack := swarmtest.Name(t, "rel")
	versionA, versionB := stack+"-a", stack+"-b"
	imageA, imageB := buildSelfImage(t, versionA), buildSelfImage(t, versionB)
	bin := flotillaBinary(t)

	dir := t.TempDir()
	apps, tokenFile := filepath.Join(dir, "applications.yaml"), filepath.Join(dir, "admin-token")
	token := "tok-" + stack + "-0123456789abcdef"
	if err := os.WriteFile(apps, []byte("apiVersion: flotilla/v1\napplications: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	// A secret of the stack's name pattern made by hand: uninstall must
	// leave it, for it lacks the install label.
	bystander := stack + "-applications-byhand"
	if _, err := c.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: bystander}, Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.SecretRemove(context.Background(), bystander, client.SecretRemoveOptions{}) })
	// Everything else goes even if the test fails half-way: uninstall, then
	// the namespace sweep for whatever uninstall could not reach.
	swarmtest.Cleanup(t, stack)
	t.Cleanup(func() {
		_ = exec.Command(bin, "uninstall", "--stack", stack, "--timeout", "2m").Run()
		_, _ = c.ConfigRemove(context.Background(), "flotilla-lease."+stack, client.ConfigRemoveOptions{})
	})

	install := func(image string) {
		t.Helper()
		cmd := exec.Command(bin, "install", "--stack", stack, "--image", image,
			"--applications", apps, "--admin-token-file", tokenFile,
			"--replicas", "1", "--publish", strconv.Itoa(port), "--publish-mode", "host",
			"--docker-socket", swarmtest.Socket(), "--lease-duration", "3s", "--timeout", "5m")
		out, err := cmd.CombinedOutput()
		t.Logf("flotilla install --image %s:\n%s", image, out)
		if err != nil {
			t.Fatalf("install %s: %v", image, err)
		}
		if strings.Contains(string(out), token) {
			t.Fatal("install printed the admin token")
		}
	}

	install(imageA)
	if code, body := get(t, base+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("/readyz after install: %d %s", code, body)
	}
	waitBuildInfo(t, base, token, versionA)
	tasksA := runningTasks(t, c, stack+"_controller")
	secretsA := installedSecrets(t, c, stack)
	if len(tasksA) != 1 || len(secretsA) != 2 {
		t.Fatalf("after install: tasks %v, installed secrets %v; want 1 and 2", tasksA, secretsA)
	}

	install(imageB)
	waitBuildInfo(t, base, token, versionB)
	svc, err := c.ServiceInspect(ctx, stack+"_controller", client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := svc.Service.Spec.TaskTemplate.ContainerSpec.Image; img != imageB {
		t.Fatalf("service image after upgrade %q, want %q", img, imageB)
	}
	tasksB := runningTasks(t, c, stack+"_controller")
	for _, id := range tasksB {
		if slices.Contains(tasksA, id) {
			t.Fatalf("task %s of %s still runs after the upgrade to %s (before %v, after %v)", id, imageA, imageB, tasksA, tasksB)
		}
	}
	// Same files: the same secrets, not new ones.
	if got := installedSecrets(t, c, stack); !slices.Equal(got, secretsA) {
		t.Fatalf("secrets after an upgrade with unchanged files %v, want %v", got, secretsA)
	}

	out, err := exec.Command(bin, "uninstall", "--stack", stack, "--timeout", "3m").CombinedOutput()
	t.Logf("flotilla uninstall:\n%s", out)
	if err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if _, err := c.ServiceInspect(ctx, stack+"_controller", client.ServiceInspectOptions{}); err == nil {
		t.Fatal("the service is still there after uninstall")
	}
	ns := make(client.Filters).Add("label", "com.docker.stack.namespace="+stack)
	if svcs, err := c.ServiceList(ctx, client.ServiceListOptions{Filters: ns}); err != nil || len(svcs.Items) != 0 {
		t.Fatalf("stack services after uninstall: %v %v", svcs.Items, err)
	}
	if nets, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: ns}); err != nil || len(nets.Items) != 0 {
		t.Fatalf("stack networks after uninstall: %v %v", nets.Items, err)
	}
	if got := installedSecrets(t, c, stack); len(got) != 0 {
		t.Fatalf("installed secrets after uninstall: %v", got)
	}
	if _, err := c.ConfigInspect(ctx, "flotilla-lease."+stack, client.ConfigInspectOptions{}); err == nil {
		t.Fatal("the controller's lease config is still there after uninstall")
	}
	if _, err := c.SecretInspect(ctx, bystander, client.SecretInspectOptions{}); err != nil {
		t.Fatalf("uninstall removed %s, a secret it did not create: %v", bystander, err)
	}
	if stacks := docker(t, "", "stack", "ls", "--format", "{{.Name}}"); slices.Contains(strings.Fields(stacks), stack) {
		t.Fatalf("docker stack ls still lists %s", stack)
	}
}

// freePort is a TCP port free on this machine when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(b)
}

// waitBuildInfo waits until /metrics reports version as the build's.
func waitBuildInfo(t *testing.T, base, token, version string) {
	t.Helper()
	want := `flotilla_build_info{goversion="`
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		code, body := get(t, base+"/metrics", token)
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, want) && strings.Contains(line, `version="`+version+`"`) && strings.HasSuffix(line, " 1") {
				return true, ""
			}
		}
		var info []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "flotilla_build_info") {
				info = append(info, line)
			}
		}
		return false, fmt.Sprintf("/metrics %d, build info %q, want version %s", code, info, version)
	})
}

func runningTasks(t *testing.T, c *client.Client, service string) []string {
	t.Helper()
	tasks, err := c.TaskList(context.Background(), client.TaskListOptions{Filters: make(client.Filters).
		Add("service", service).Add("desired-state", "running")})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range tasks.Items {
		if task.Status.State == swarm.TaskStateRunning {
			ids = append(ids, task.ID)
		}
	}
	return ids
}

// installedSecrets are the names of the secrets bearing the install label.
func installedSecrets(t *testing.T, c *client.Client, stack string) []string {
	t.Helper()
	list, err := c.SecretList(context.Background(), client.SecretListOptions{Filters: make(client.Filters).Add("label", "io.flotilla.install="+stack)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Spec.Name)
	}
	slices.Sort(names)
	return names
}
