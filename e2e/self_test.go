package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/labels"
)

// The example in examples/self, deployed on the local swarm as an operator
// would, upgrades itself from git and is rolled back the same way. It reads
// the repository as documented, at /srv/flotilla/repo bind-mounted from the
// host, with the image's controller, which has no git program; its short
// lease makes hand-overs quick.

// buildSelfImage runs the project's image script for tag.
func buildSelfImage(t *testing.T, tag string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "build-flotilla-image.sh"), tag).CombinedOutput()
	if err != nil {
		t.Fatalf("build-flotilla-image.sh %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", "flotilla:"+tag).Run() })
	return "flotilla:" + tag
}

func docker(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// selfFiles turns the example's stack and applications file into this
// test's: its own stack, secret and lease names, the given image, the
// repository on the host at hostRepo mounted where the example's is, a 3s
// lease. The applications file's repoURL is the example's own.
func selfFiles(t *testing.T, stack, image, hostRepo string) (stackFile, appsFile string) {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("..", "examples", "self", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	s := read("stack/docker-compose.yml")
	for old, new := range map[string]string{
		"image: flotilla:dev":                                "image: " + image,
		"--lease-duration=15s":                               "--lease-duration=3s",
		"--controller-id=flotilla":                           "--controller-id=" + stack,
		"--listen=:8080":                                     "--listen=",
		"flotilla-applications-1":                            stack + "-applications-1",
		"flotilla-admin-token-1":                             stack + "-admin-token-1",
		"      - /srv/flotilla/repo:/srv/flotilla/repo:ro\n": "      - " + hostRepo + ":/srv/flotilla/repo:ro\n",
		// The socket of the daemon under test, whichever engine it is.
		"      - /var/run/docker.sock:/var/run/docker.sock\n": "      - " + swarmtest.Socket() + ":/var/run/docker.sock\n",
		"monitor: 20s": "monitor: 5s",
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("the example stack no longer contains %q", old)
		}
		s = strings.ReplaceAll(s, old, new)
	}
	a := read("applications.yaml")
	for old, new := range map[string]string{
		"name: flotilla\n":                           "name: " + stack + "\n",
		"stack: flotilla\n":                          "stack: " + stack + "\n",
		"flotilla-applications-1":                    stack + "-applications-1",
		"flotilla-admin-token-1":                     stack + "-admin-token-1",
		"[/var/run/docker.sock, /srv/flotilla/repo]": "[" + swarmtest.Socket() + ", " + hostRepo + "]",
		"interval: 30s":                              "interval: 10s",
	} {
		if !strings.Contains(a, old) {
			t.Fatalf("the example applications file no longer contains %q", old)
		}
		a = strings.ReplaceAll(a, old, new)
	}
	return s, a
}

// selfState is what the swarm says about the controller stack.
type selfState struct {
	image    string // of the service spec
	settled  bool   // the service's update (if any) completed and every task runs that image
	holder   string // the lease's holder
	epoch    string
	holderIm string // the image of the holder's container
	revision int    // newest release record
}

func readSelf(t *testing.T, stack string) selfState {
	t.Helper()
	ctx := context.Background()
	c := swarmtest.Client(t)
	var st selfState
	svc, err := c.ServiceInspect(ctx, stack+"_controller", client.ServiceInspectOptions{})
	if err != nil {
		return st
	}
	st.image = svc.Service.Spec.TaskTemplate.ContainerSpec.Image
	tasks, err := c.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svc.Service.ID).Add("desired-state", "running")})
	if err == nil {
		running := 0
		for _, task := range tasks.Items {
			if task.Status.State == swarm.TaskStateRunning && task.Spec.ContainerSpec.Image == st.image {
				running++
			}
		}
		st.settled = running == 2 && len(tasks.Items) == 2 && (svc.Service.UpdateStatus == nil || svc.Service.UpdateStatus.State == swarm.UpdateStateCompleted)
	}
	if cfg, err := c.ConfigInspect(ctx, "flotilla-lease."+stack, client.ConfigInspectOptions{}); err == nil {
		st.holder, st.epoch = cfg.Config.Spec.Labels[labels.LeaseHolder], cfg.Config.Spec.Labels[labels.LeaseEpoch]
		// The holder is a task's name: <service>.<slot>.<task id>.
		if i := strings.LastIndex(st.holder, "."); i > 0 {
			if task, err := c.TaskInspect(ctx, st.holder[i+1:], client.TaskInspectOptions{}); err == nil && task.Task.Status.State == swarm.TaskStateRunning {
				st.holderIm = task.Task.Spec.ContainerSpec.Image
			}
		}
	}
	if revs, _ := revisions(t, stack); len(revs) > 0 {
		st.revision = revs[0]
	}
	return st
}

func waitSelf(t *testing.T, stack string, within time.Duration, ok func(selfState) bool) selfState {
	t.Helper()
	var st selfState
	swarmtest.Eventually(t, within, func() (bool, string) {
		st = readSelf(t, stack)
		return ok(st), fmt.Sprintf("%+v", st)
	})
	return st
}

func TestExampleSelfStackUpgradesItselfFromGitAndRollsBack(t *testing.T) {
	stack := swarmtest.Name(t, "hself")
	image1, image2 := buildSelfImage(t, stack+"-1"), buildSelfImage(t, stack+"-2")

	repo := gittest.New(t)
	stackFile, appsFile := selfFiles(t, stack, image1, repo.Dir)
	repo.Commit("flotilla 1", map[string]string{"stack/docker-compose.yml": stackFile})

	swarmtest.Cleanup(t, stack)
	t.Cleanup(func() {
		_ = exec.Command("docker", "stack", "rm", stack).Run()
		// The lease goes only once no task is left to create it again.
		swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
			out, err := exec.Command("docker", "ps", "-q", "--filter", "label=com.docker.stack.namespace="+stack).Output()
			return err == nil && strings.TrimSpace(string(out)) == "", "controller containers still running"
		})
		for _, name := range []string{stack + "-applications-1", stack + "-admin-token-1", "flotilla-lease." + stack} {
			_ = exec.Command("docker", "secret", "rm", name).Run()
			_ = exec.Command("docker", "config", "rm", name).Run()
		}
	})
	docker(t, appsFile, "secret", "create", stack+"-applications-1", "-")
	docker(t, "token-"+stack, "secret", "create", stack+"-admin-token-1", "-")
	file := filepath.Join(t.TempDir(), "stack.yml")
	if err := os.WriteFile(file, []byte(stackFile), 0o644); err != nil {
		t.Fatal(err)
	}
	docker(t, "", "stack", "deploy", "--resolve-image", "never", "-c", file, stack)

	// The pair elects a leader, which adopts its own stack and records it.
	first := waitSelf(t, stack, 3*time.Minute, func(s selfState) bool {
		return s.settled && s.holderIm == image1 && s.revision >= 1
	})
	t.Logf("running %s, leader %s in epoch %s, revision %d", first.image, first.holder, first.epoch, first.revision)

	// A new tag in git: the leader updates its own service, a task of the new
	// image takes the lease, and the old ones are gone.
	repo.Commit("flotilla 2", map[string]string{"stack/docker-compose.yml": strings.Replace(stackFile, image1, image2, 1)})
	up := waitSelf(t, stack, 4*time.Minute, func(s selfState) bool {
		return s.image == image2 && s.settled && s.holderIm == image2 && s.revision > first.revision
	})
	t.Logf("upgraded to %s, leader %s in epoch %s, revision %d", up.image, up.holder, up.epoch, up.revision)
	if atoi(up.epoch) <= atoi(first.epoch) {
		t.Errorf("epoch %s after the upgrade, not past %s", up.epoch, first.epoch)
	}

	// Rolled back in git: the previous image comes back the same way.
	repo.Commit("back to flotilla 1", map[string]string{"stack/docker-compose.yml": stackFile})
	back := waitSelf(t, stack, 4*time.Minute, func(s selfState) bool {
		return s.image == image1 && s.settled && s.holderIm == image1 && s.revision > up.revision
	})
	t.Logf("rolled back to %s, leader %s in epoch %s, revision %d", back.image, back.holder, back.epoch, back.revision)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
