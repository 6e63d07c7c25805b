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
	"syscall"
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
	ctrl := startController(t, appsFile, "e2eimg", []string{"FLOTILLA_ADMIN_TOKEN=" + token}, "--listen", addr, "--log-level", "info")

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
	imageStatus := func() *application.ImageStatus {
		t.Helper()
		var st application.Status
		swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
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
		return st.Images
	}
	images := imageStatus()
	if f := images.Fields; len(f) != 2 || f[0].Field != "services.web.image" || f[0].Newest != "1.1.0" || f[1].Newest != "build-10" {
		t.Fatalf("image fields in the status: %+v", f)
	}
	if !images.LastCommitTime.Equal(head.Committer.When) {
		t.Fatalf("lastCommitTime %v, want the commit's %v", images.LastCommitTime, head.Committer.When)
	}
	// A restarted controller, which never made the commit, reads it back
	// from git: the same lastCommit and time, and nothing committed again.
	if code, _ := ctrl.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("controller exited %d on SIGTERM", code)
	}
	startController(t, appsFile, "e2eimg", []string{"FLOTILLA_ADMIN_TOKEN=" + token}, "--listen", addr, "--log-level", "info")
	if again := imageStatus(); !again.LastCommitTime.Equal(images.LastCommitTime) || again.LastError != "" {
		t.Fatalf("after a restart: last commit %s at %v (error %q), want %s at %v", again.LastCommit, again.LastCommitTime, again.LastError, images.LastCommit, images.LastCommitTime)
	}
	if ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true); err != nil || ref.Hash() != head.Hash {
		t.Fatalf("after a restart: main at %v (%v), want %s unchanged", ref, err, head.Hash)
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

// One hundred services on one image cost the registry one tags listing per
// interval, counted at the registry's proxy while the controller binary runs
// the policy at the shortest interval allowed: the newer tag the test pushes
// is committed once, all hundred fields in one commit, and the run after it
// commits nothing. The application has no automated sync: the image loop
// runs without a deploy, so the swarm gets no hundred services.
func TestHundredServicesOnOneImageCostOneTagsListingPerInterval(t *testing.T) {
	swarmtest.Need(t)
	t.Parallel()
	reg := registrytest.Start(t, registrytest.Options{})
	stack := swarmtest.Name(t, "img100")
	for _, tag := range []string{"0.9.0", "1.0.0", "1.1.0", "2.0.0"} {
		reg.Push(t, stack, tag, registrytest.Image{Content: tag})
	}

	const n = 100
	var compose strings.Builder
	services := make([]string, n)
	compose.WriteString("services:\n")
	for i := range services {
		services[i] = fmt.Sprintf("s%03d", i)
		fmt.Fprintf(&compose, "  %s:\n    image: %s\n    deploy: {replicas: 0}\n", services[i], reg.Ref(stack, "1.1.0"))
	}
	src := gittest.New(t)
	src.Commit("initial", map[string]string{"compose.yaml": compose.String()})
	origin := filepath.Join(t.TempDir(), "origin.git")
	if _, err := git.PlainClone(origin, true, &git.CloneOptions{URL: src.Dir}); err != nil {
		t.Fatal(err)
	}
	repo, err := git.PlainOpen(origin)
	if err != nil {
		t.Fatal(err)
	}
	head := func() plumbing.Hash {
		ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
		if err != nil {
			t.Fatal(err)
		}
		return ref.Hash()
	}
	initial := head()

	appsFile := filepath.Join(t.TempDir(), "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source: {repoURL: %[2]s, revision: main}
    stack: %[1]s
    imageUpdates:
      interval: %[4]s
      author: {name: Flotilla E2E, email: e2e@flotilla.invalid}
      images:
        - image: %[3]s/%[1]s
          semver: "^1"
          compose: [{file: compose.yaml, services: [%[5]s]}]
`, stack, origin, reg.Host, application.MinImageInterval, strings.Join(services, ", "))), 0o644); err != nil {
		t.Fatal(err)
	}

	// What is counted: every request the proxy passed on, and among them
	// the GETs of this repository's tags list (each run's one listing, as
	// the registry has no ETag to revalidate with). The registry needs no
	// authentication, so there are no token round-trips to allow for.
	tagsList := "/v2/" + stack + "/tags/list"
	listings := func() (hits []registrytest.Hit, lists int) {
		hits = reg.Hits()
		for _, h := range hits {
			if h.Method == http.MethodGet && strings.HasPrefix(h.Path, tagsList) {
				lists++
			}
		}
		return hits, lists
	}
	// When each listing was first seen, sampled far more often than the
	// interval. At most once per interval: a listing closer to the one
	// before than the interval (less the sampling's slack) fails the test
	// when it is seen.
	var seen []time.Time
	sample := func() int {
		t.Helper()
		_, lists := listings()
		for len(seen) < lists {
			seen = append(seen, time.Now())
			if i := len(seen) - 1; i > 0 {
				if gap := seen[i].Sub(seen[i-1]); gap < application.MinImageInterval-time.Second {
					t.Fatalf("%d tags listings so far; listings %d and %d only %s apart, want at least the interval %s", lists, i, i+1, gap, application.MinImageInterval)
				}
			}
		}
		return lists
	}
	waitListings := func(want int, timeout time.Duration) {
		t.Helper()
		swarmtest.Eventually(t, timeout, func() (bool, string) {
			lists := sample()
			return lists >= want, fmt.Sprintf("%d tags listings, want %d", lists, want)
		})
	}

	reg.ResetHits()
	start := time.Now()
	startController(t, appsFile, "e2eimg100", nil, "--listen", "", "--log-level", "info")
	// The first run: the fields are at the newest tag in range, and 2.0.0
	// is outside it.
	waitListings(1, 60*time.Second)
	reg.Push(t, stack, "1.2.0", registrytest.Image{Content: "1.2.0"}) // straight to the registry: not counted

	// The next interval's run commits the new tag, every field at once.
	var commit plumbing.Hash
	swarmtest.Eventually(t, 2*application.MinImageInterval+30*time.Second, func() (bool, string) {
		lists := sample()
		commit = head()
		return commit != initial, fmt.Sprintf("no commit yet, %d tags listings", lists)
	})
	c, err := repo.CommitObject(commit)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumParents() != 1 || c.ParentHashes[0] != initial || c.Author.Email != "e2e@flotilla.invalid" {
		t.Fatalf("the image commit %s <%s> has parents %v, want one commit on %s", c.Author.Name, c.Author.Email, c.ParentHashes, initial)
	}
	f, err := c.File("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.Contents()
	want := strings.ReplaceAll(compose.String(), reg.Ref(stack, "1.1.0"), reg.Ref(stack, "1.2.0"))
	if got != want {
		t.Fatalf("compose.yaml after the image commit:\n%s\nwant every one of the %d services at 1.2.0:\n%s", got, n, want)
	}
	if changed := strings.Count(got, reg.Ref(stack, "1.2.0")); changed != n {
		t.Fatalf("%d fields at 1.2.0, want %d", changed, n)
	}

	// Two listings after the commit's: the run of the interval after the
	// commit has ended (runs are one at a time), and the next has begun.
	waitListings(sample()+2, 2*application.MinImageInterval+40*time.Second)
	elapsed := time.Since(start)
	if h := head(); h != commit {
		t.Fatalf("the run after the image commit committed again: main at %s, want %s", h, commit)
	}

	hits, lists := listings()
	other := 0
	for _, h := range hits {
		if !(h.Method == http.MethodGet && strings.HasPrefix(h.Path, tagsList)) {
			other++
			t.Logf("other request: %s %s -> %d", h.Method, h.Path, h.Status)
		}
	}
	intervals := int(elapsed / application.MinImageInterval)
	t.Logf("%d tags listings of %s and %d other requests for %d services in %s (%d whole intervals); first seen at %v",
		lists, stack, other, n, elapsed.Round(time.Second), intervals, offsets(start, seen))
	if intervals < 3 {
		t.Fatalf("observed %s, fewer than 3 intervals", elapsed)
	}
	if lists > intervals+1 {
		t.Fatalf("%d tags listings in %s, more than one per interval of %s", lists, elapsed, application.MinImageInterval)
	}
	if other != 0 {
		t.Fatalf("%d requests besides the tags listings", other)
	}
}

// offsets says when each time came after start, for the log.
func offsets(start time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, at := range ts {
		out[i] = at.Sub(start).Round(100 * time.Millisecond)
	}
	return out
}
