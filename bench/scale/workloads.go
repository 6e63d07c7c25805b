package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/labels"
)

const image = "flotilla-test/app:1"

// composeFile is a stack of n services on one overlay network; marker goes
// into the first service's environment, so changing it changes one service.
func composeFile(n, replicas int, marker string) string {
	var b strings.Builder
	b.WriteString("version: \"3.8\"\nservices:\n")
	for i := 1; i <= n; i++ {
		env := fmt.Sprintf("INDEX: \"%d\"", i)
		if i == 1 {
			env += fmt.Sprintf(", MARKER: %q", marker)
		}
		fmt.Fprintf(&b, "  svc%03d:\n    image: %s\n    environment: {%s}\n    networks: [back]\n    stop_grace_period: 1s\n    deploy: {replicas: %d}\n",
			i, image, env, replicas)
	}
	b.WriteString("networks:\n  back: {driver: overlay}\n")
	return b.String()
}

// appsFile is the applications file of apps applications on repo, each in
// its own directory of it.
func appsFile(repo string, apps []string, interval string) string {
	var b strings.Builder
	b.WriteString("apiVersion: flotilla/v1\napplications:\n")
	for _, a := range apps {
		fmt.Fprintf(&b, "  - name: %s\n    source: {repoURL: %s, revision: main, path: %s}\n    syncPolicy: {automated: {}, interval: %s}\n", a, repo, a, interval)
	}
	return b.String()
}

func git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.invalid"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// newRepo makes a git repository at dir with files (path -> content)
// committed on main.
func newRepo(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := git(dir, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	return commit(dir, files, "initial")
}

func commit(dir string, files map[string]string, msg string) error {
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := git(dir, "add", "-A"); err != nil {
		return err
	}
	return git(dir, "commit", "-q", "-m", msg)
}

// servicesWorkload is one application of n services: first deploy,
// unchanged redeploy and a change to one service, by each tool.
func (b *bench) servicesWorkload(ctx context.Context, n int) ([]row, error) {
	b.runs++
	dir := filepath.Join(b.work, fmt.Sprintf("services%d-%d", n, b.runs))
	fl, ds := fmt.Sprintf("%ss%d-%d", b.id, n, b.runs), fmt.Sprintf("%sd%d-%d", b.id, n, b.runs)
	b.stacks = append(b.stacks, fl, ds)
	repo := filepath.Join(dir, "repo")
	if err := newRepo(repo, map[string]string{fl + "/docker-compose.yml": composeFile(n, 0, "a")}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsFile(repo, []string{fl}, "1h")), 0o644); err != nil {
		return nil, err
	}
	dsFile := filepath.Join(dir, "docker-compose.yml")
	write := func(marker string) error { return os.WriteFile(dsFile, []byte(composeFile(n, 0, marker)), 0o644) }
	dockerOnce := func() (usage, error) {
		return b.dockerDeploy(ctx, dir, []string{ds}, func(string) string { return dsFile })
	}
	flotillaOnce := func() (usage, error) { return b.flotillaOnce(ctx, dir) }

	var rows []row
	add := func(step, tool string, fn func() (usage, error)) error {
		r, err := b.step("services", n, step, tool, fn)
		rows = append(rows, r)
		return err
	}
	if b.o.docker {
		if err := write("a"); err != nil {
			return nil, err
		}
		if err := add("first deploy", "docker", dockerOnce); err != nil {
			return nil, err
		}
		if err := add("unchanged redeploy", "docker", dockerOnce); err != nil {
			return nil, err
		}
		if err := write("b"); err != nil {
			return nil, err
		}
		if err := add("one-service change", "docker", dockerOnce); err != nil {
			return nil, err
		}
	}
	if err := add("first deploy", "flotilla", flotillaOnce); err != nil {
		return nil, err
	}
	if err := add("unchanged redeploy", "flotilla", flotillaOnce); err != nil {
		return nil, err
	}
	if err := commit(repo, map[string]string{fl + "/docker-compose.yml": composeFile(n, 0, "b")}, "change one service"); err != nil {
		return nil, err
	}
	if err := add("one-service change", "flotilla", flotillaOnce); err != nil {
		return nil, err
	}
	return rows, nil
}

// appsWorkload is n applications of b.o.appSvcs services each: Flotilla
// deploys them from one applications file in one process; docker deploys
// one stack after the other.
func (b *bench) appsWorkload(ctx context.Context, n int) ([]row, error) {
	b.runs++
	dir := filepath.Join(b.work, fmt.Sprintf("apps%d-%d", n, b.runs))
	b.lastApps = dir
	repo := filepath.Join(dir, "repo")
	files := map[string]string{}
	var fl, ds []string
	for i := 1; i <= n; i++ {
		a := fmt.Sprintf("%sa%d-%d-%d", b.id, n, b.runs, i)
		fl, ds = append(fl, a), append(ds, fmt.Sprintf("%sb%d-%d-%d", b.id, n, b.runs, i))
		files[a+"/docker-compose.yml"] = composeFile(b.o.appSvcs, 0, "a")
	}
	b.stacks = append(b.stacks, fl...)
	b.stacks = append(b.stacks, ds...)
	if err := newRepo(repo, files); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsFile(repo, fl, "10s")), 0o644); err != nil {
		return nil, err
	}
	dsFile := filepath.Join(dir, "docker-compose.yml")
	if err := os.WriteFile(dsFile, []byte(composeFile(b.o.appSvcs, 0, "a")), 0o644); err != nil {
		return nil, err
	}
	var rows []row
	add := func(step, tool string, fn func() (usage, error)) error {
		r, err := b.step("applications", n, step, tool, fn)
		rows = append(rows, r)
		return err
	}
	dockerAll := func() (usage, error) {
		return b.dockerDeploy(ctx, dir, ds, func(string) string { return dsFile })
	}
	flotillaOnce := func() (usage, error) { return b.flotillaOnce(ctx, dir) }
	if b.o.docker {
		if err := add("first deploy", "docker", dockerAll); err != nil {
			return nil, err
		}
		if err := add("unchanged redeploy", "docker", dockerAll); err != nil {
			return nil, err
		}
	}
	if err := add("first deploy", "flotilla", flotillaOnce); err != nil {
		return nil, err
	}
	if err := add("unchanged redeploy", "flotilla", flotillaOnce); err != nil {
		return nil, err
	}
	return rows, nil
}

// cleanup removes every stack this run deployed and its release records,
// straight on the daemon (not through the proxy), and waits until their
// services are gone.
func (b *bench) cleanup() {
	if len(b.stacks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := client.New(client.WithHost("unix://" + b.o.daemon))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
		return
	}
	defer c.Close()
	mine := map[string]bool{}
	for _, s := range b.stacks {
		mine[s] = true
	}
	services, err := c.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", labels.Namespace)})
	if err == nil {
		// Eight removals at a time: a thousand one after the other take
		// minutes on a busy daemon.
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, s := range services.Items {
			if mine[s.Spec.Labels[labels.Namespace]] {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					_, _ = c.ServiceRemove(ctx, s.ID, client.ServiceRemoveOptions{})
				}()
			}
		}
		wg.Wait()
	}
	// Networks go once their services' tasks are gone; with 0 replicas
	// that is at once, but a removal refused now is tried again.
	for attempt := 0; attempt < 30; attempt++ {
		nets, err := c.NetworkList(ctx, networkListOptions(labels.Namespace))
		if err != nil {
			break
		}
		left := 0
		for _, n := range nets.Items {
			if mine[n.Labels[labels.Namespace]] {
				if _, err := c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
					left++
				}
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	configs, err := c.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("label", labels.Release)})
	if err == nil {
		for _, cf := range configs.Items {
			if mine[cf.Spec.Labels[labels.Release]] || mine[cf.Spec.Labels[labels.Namespace]] {
				_, _ = c.ConfigRemove(ctx, cf.ID, client.ConfigRemoveOptions{})
			}
		}
	}
	b.stacks = nil
}
