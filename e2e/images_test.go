package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/registrytest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The controller binary with a real registry and a repository on disk: a
// newer semver tag in the registry is committed to the repository by the
// image loop, and the pass it makes due deploys it onto the swarm (the
// sync interval is 10m, so only the loop's refresh can make it). The node
// has both images locally, tagged with the registry's name; nothing is
// pulled, and the registry holds the tags the policy reads.
func TestImageUpdateIsCommittedAndThenDeployed(t *testing.T) {
	swarmtest.Need(t)
	t.Parallel()
	reg := registrytest.Start(t, registrytest.Options{})
	stack := swarmtest.Name(t, "img")
	swarmtest.Cleanup(t, stack)
	ctx := context.Background()
	docker := swarmtest.Client(t)
	for _, im := range []struct{ repo, tag, local string }{
		{stack, "1.0.0", "flotilla-test/app:1"},
		{stack, "1.1.0", "flotilla-test/app:2"},
		{stack + "-jobs", "build-9", "flotilla-test/app:1"},
		{stack + "-jobs", "build-10", "flotilla-test/app:2"},
	} {
		target := reg.Ref(im.repo, im.tag)
		if _, err := docker.ImageTag(ctx, client.ImageTagOptions{Source: im.local, Target: target}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Only the name this test added; the image stays under its own.
			_, _ = docker.ImageRemove(context.Background(), target, client.ImageRemoveOptions{})
		})
		reg.Push(t, im.repo, im.tag, registrytest.Image{Content: im.tag})
	}

	compose := fmt.Sprintf(`services:
  web:
    # bumped by flotilla's image automation
    image: %s
    command: ["serve", ":8080"]
    stop_grace_period: 1s
  jobs:
    image: '%s' # newest build
    command: ["serve", ":8081"]
    stop_grace_period: 1s
`, reg.Ref(stack, "1.0.0"), reg.Ref(stack+"-jobs", "build-9"))
	src := gittest.New(t)
	src.Commit("initial", map[string]string{"deploy/compose.yaml": compose})
	origin := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainClone(origin, true, &git.CloneOptions{URL: src.Dir}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	appsFile := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source:
      repoURL: %[2]s
      revision: main
      path: deploy
      compose: {files: [compose.yaml]}
    stack: %[1]s
    syncPolicy:
      automated: {}
      interval: 10m
    imageUpdates:
      author: {name: Flotilla E2E, email: e2e@flotilla.invalid}
      images:
        - image: %[3]s/%[1]s
          semver: "^1"
          compose:
            - file: compose.yaml
              services: [web]
        - image: %[3]s/%[1]s-jobs
          pattern: 'build-(\d+)'
          compose:
            - file: compose.yaml
              services: [jobs]
`, stack, origin, reg.Host)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := (cli{t: t, bin: flotillaBinary(t)}).run("image", "plan", "-f", appsFile); code != 2 || !strings.Contains(out, reg.Ref(stack, "1.1.0")) {
		t.Fatalf("image plan: exit %d, want 2 and the update:\n%s", code, out)
	}
	addr := freeAddr(t)
	const token = "e2e-images-admin-token-0123456789"
	startController(t, appsFile, "e2eimg", []string{"FLOTILLA_ADMIN_TOKEN=" + token}, "--listen", addr, "--log-level", "info")

	for svc, want := range map[string]string{"web": reg.Ref(stack, "1.1.0"), "jobs": reg.Ref(stack+"-jobs", "build-10")} {
		swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
			s, err := docker.ServiceInspect(ctx, stack+"_"+svc, client.ServiceInspectOptions{})
			if err != nil {
				return false, err.Error()
			}
			img := s.Service.Spec.TaskTemplate.ContainerSpec.Image
			return img == want, svc + ": " + img
		})
	}
	repo, err := git.PlainOpen(origin)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if head.Author.Email != "e2e@flotilla.invalid" || !strings.Contains(head.Message, reg.Ref(stack, "1.0.0")+" -> "+reg.Ref(stack, "1.1.0")) {
		t.Fatalf("origin's head is not the image commit: %s <%s>\n%s", head.Author.Name, head.Author.Email, head.Message)
	}
	f, _ := head.File("deploy/compose.yaml")
	got, _ := f.Contents()
	if want := strings.Replace(strings.Replace(compose, ":1.0.0", ":1.1.0", 1), ":build-9'", ":build-10'", 1); got != want {
		t.Fatalf("compose.yaml:\n%s\nwant\n%s", got, want)
	}
	// The application's status says what image automation did.
	var st application.Status
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/applications/"+stack, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		st = application.Status{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return false, err.Error()
		}
		return st.Images != nil && st.Images.LastCommit == head.Hash.String(), fmt.Sprintf("%+v", st.Images)
	})
	if f := st.Images.Fields; len(f) != 2 || f[0].Field != "services.web.image" || f[0].Newest != "1.1.0" || f[1].Newest != "build-10" {
		t.Fatalf("image fields in the status: %+v", f)
	}
	// A second plan finds nothing to commit.
	if out, code := (cli{t: t, bin: flotillaBinary(t)}).run("image", "plan", "-f", appsFile); code != 0 || !strings.Contains(out, "nothing to commit") {
		t.Fatalf("second plan: exit %d\n%s", code, out)
	}
}

// A digest policy pins a moving tag to what the registry says it points at
// now, and the pinned reference deploys: the image was pushed to the
// registry by the daemon itself (docker push to a loopback registry is
// allowed over plain HTTP), so the node knows it by that digest and pulls
// nothing.
func TestImageDigestPinIsCommittedAndDeployed(t *testing.T) {
	swarmtest.Need(t)
	t.Parallel()
	// The registry is served where the daemon's host network is, so that
	// an engine in a network namespace of its own can push to it; the
	// controller runs there too (startControllerOnDaemonNet).
	reg := registrytest.Start(t, registrytest.Options{DaemonSide: true})
	stack := swarmtest.Name(t, "imgd")
	swarmtest.Cleanup(t, stack)
	ctx := context.Background()
	docker := swarmtest.Client(t)
	moving := reg.Ref(stack, "stable")
	if _, err := docker.ImageTag(ctx, client.ImageTagOptions{Source: "flotilla-test/app:2", Target: moving}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = docker.ImageRemove(context.Background(), moving, client.ImageRemoveOptions{}) })
	push, err := docker.ImagePush(ctx, moving, client.ImagePushOptions{RegistryAuth: "e30="}) // {}: anonymous
	if err != nil {
		t.Fatal(err)
	}
	progress, err := io.ReadAll(push)
	push.Close()
	if err != nil || strings.Contains(string(progress), `"error"`) {
		t.Fatalf("docker push %s: %v\n%s", moving, err, progress)
	}
	inspect, err := docker.ImageInspect(ctx, moving)
	if err != nil {
		t.Fatal(err)
	}
	var pinned string
	for _, d := range inspect.RepoDigests {
		if strings.HasPrefix(d, reg.Host+"/"+stack+"@") {
			pinned = moving + d[strings.IndexByte(d, '@'):]
		}
	}
	if pinned == "" {
		t.Fatalf("the daemon recorded no digest for %s: %v", moving, inspect.RepoDigests)
	}

	src := gittest.New(t)
	src.Commit("initial", map[string]string{"compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s\n    command: [\"serve\", \":8080\"]\n    stop_grace_period: 1s\n", moving)})
	origin := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainClone(origin, true, &git.CloneOptions{URL: src.Dir}); err != nil {
		t.Fatal(err)
	}
	appsFile := filepath.Join(t.TempDir(), "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source: {repoURL: %[2]s, revision: main}
    syncPolicy: {automated: {}, interval: 10m}
    imageUpdates:
      author: {name: Flotilla E2E, email: e2e@flotilla.invalid}
      images:
        - image: %[3]s/%[1]s
          digest: stable
          compose: [{file: compose.yaml, services: [web]}]
`, stack, origin, reg.Host)), 0o644); err != nil {
		t.Fatal(err)
	}
	startControllerOnDaemonNet(t, appsFile, "e2eimgd", nil, "--listen", "", "--log-level", "info")
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		s, err := docker.ServiceInspect(ctx, stack+"_web", client.ServiceInspectOptions{})
		if err != nil {
			return false, err.Error()
		}
		img := s.Service.Spec.TaskTemplate.ContainerSpec.Image
		return img == pinned, img
	})
	// The pinned image runs: the node had it by digest.
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		tasks, err := docker.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", stack+"_web")})
		if err != nil {
			return false, err.Error()
		}
		for _, task := range tasks.Items {
			if task.Status.State == swarm.TaskStateRunning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d tasks, none running: %+v", len(tasks.Items), tasks.Items)
	})
}
