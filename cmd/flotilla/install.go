package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/labels"
)

// `flotilla install` and `flotilla uninstall` put the controller on a swarm
// and take it off, with the Docker API of the manager they are pointed at
// (DOCKER_HOST, the default socket): no docker CLI, no stack file to edit.
// Installing again with another --image is the upgrade: one rolling update.

type installOptions struct {
	plan       installPlan
	appsFile   string
	tokenFile  string
	readFile   string // the read token's file, "" for none
	readyURL   string
	timeout    time.Duration
	noReadyURL bool
}

func newInstallCmd() *cobra.Command {
	o := installOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install or upgrade the controller as a service of this swarm",
		Long: `Install runs the controller as the stack STACK on the swarm of the Docker
daemon in DOCKER_HOST (default: the local socket), from a manager:

  - the applications file is checked as "flotilla validate --offline" does;
  - it, the admin token and the read token (--read-token-file, which a
    router polling the controller presents) become swarm secrets, named
    STACK-applications-<digest>, STACK-admin-token-<digest> and
    STACK-read-token-<digest> after their content, labelled
    io.flotilla.install=STACK;
  - the service STACK_controller runs "flotilla controller --ha" with
    --replicas tasks on managers, rolled one task at a time, rolled back by
    the swarm if a new task fails, on the network STACK_default and on every
    --network (overlay networks that must exist: install neither creates nor
    removes them), answering as "controller" on each;
  - install waits until every task runs the image and /readyz answers 200.

Run it again with another --image (or a changed file) to upgrade: the same
service is updated in place. Secrets are never printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.plan.validate(); err != nil {
				return usageError{err}
			}
			if o.appsFile == "" || o.tokenFile == "" {
				return usageError{errors.New("--applications and --admin-token-file are required")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			return runInstall(ctx, cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.plan.stack, "stack", "flotilla", "the stack's name; the service is STACK_controller")
	f.StringVar(&o.plan.image, "image", "", "the controller's image, e.g. flotilla:1.4.0 (present on every manager, or in a registry)")
	f.StringVar(&o.appsFile, "applications", "", "the applications file, stored as a secret")
	f.StringVar(&o.tokenFile, "admin-token-file", "", "a file holding the admin API token, stored as a secret")
	f.StringVar(&o.readFile, "read-token-file", "", "a file holding the read (viewer) token, stored as a secret; what a router polling /api/v1/router/traefik presents")
	f.StringArrayVar(&o.plan.networks, "network", nil, "an existing overlay network the controller joins too (repeatable), e.g. the router's, so that it reaches Traefik's metrics and Traefik reaches it")
	f.Uint64Var(&o.plan.replicas, "replicas", 2, "controller tasks: one leads, the others stand by")
	f.IntVar(&o.plan.publish, "publish", 8080, "the port the API is published on; 0 publishes nothing")
	f.StringVar(&o.plan.publishMode, "publish-mode", "ingress", "ingress (the routing mesh) or host (the node's own port; updates then stop a task before starting one)")
	f.StringVar(&o.plan.socket, "docker-socket", "/var/run/docker.sock", "the managers' Docker socket, mounted into the tasks")
	f.DurationVar(&o.plan.lease, "lease-duration", 15*time.Second, "the leader lease's duration")
	f.StringArrayVar(&o.plan.extraArgs, "controller-arg", nil, "an extra argument for `flotilla controller` (repeatable), e.g. --controller-arg=--public-metrics")
	f.StringVar(&o.readyURL, "ready-url", "", "the /readyz URL to wait for (default: http://127.0.0.1:PUBLISH/readyz)")
	f.BoolVar(&o.noReadyURL, "no-ready-check", false, "wait only for the tasks, not for /readyz (when this machine cannot reach the API)")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the tasks and /readyz")
	return cmd
}

func newUninstallCmd() *cobra.Command {
	var stack string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the controller installed by `flotilla install`",
		Long: `Uninstall removes what "flotilla install --stack STACK" created, found by its
label io.flotilla.install=STACK: the service, its network and its secrets
(the read token's too), and the controller's leader lease. Objects without
that label are left alone, the networks given to install --network among
them.
Applications the controller deployed keep running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !stackName.MatchString(stack) {
				return usageError{fmt.Errorf("--stack %q: not a stack name", stack)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return runUninstall(ctx, cmd.ErrOrStderr(), stack)
		},
	}
	cmd.Flags().StringVar(&stack, "stack", "flotilla", "the stack given to install")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long to wait for the tasks to stop")
	return cmd
}

func dockerClient() (*client.Client, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return c, nil
}

func runInstall(ctx context.Context, out io.Writer, o installOptions) error {
	p := o.plan
	apps, err := os.ReadFile(o.appsFile)
	if err != nil {
		return fmt.Errorf("--applications: %w", err)
	}
	// The same checks as `flotilla validate --offline`, before anything
	// reaches the swarm: a file the controller would refuse is not installed.
	if _, err := application.Load(o.appsFile); err != nil {
		for _, e := range flatten(err) {
			fmt.Fprintln(out, formatProblem(e))
		}
		return exitError{exitFailed}
	}
	token, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	if strings.TrimSpace(string(token)) == "" {
		return usageError{fmt.Errorf("--admin-token-file %s is empty", o.tokenFile)}
	}
	var read []byte
	if o.readFile != "" {
		if read, err = os.ReadFile(o.readFile); err != nil {
			return fmt.Errorf("--read-token-file: %w", err)
		}
		// The controller refuses both, so they are refused before the swarm.
		switch strings.TrimSpace(string(read)) {
		case "":
			return usageError{fmt.Errorf("--read-token-file %s is empty", o.readFile)}
		case strings.TrimSpace(string(token)):
			return usageError{fmt.Errorf("--read-token-file %s holds the admin token; a read token must not grant writes", o.readFile)}
		}
	}
	c, err := dockerClient()
	if err != nil {
		return err
	}
	defer c.Close()

	current, err := c.ServiceInspect(ctx, p.serviceName(), client.ServiceInspectOptions{})
	exists := err == nil
	switch {
	case err != nil && !cerrdefs.IsNotFound(err):
		return fmt.Errorf("inspect service %s: %w", p.serviceName(), err)
	case exists && current.Service.Spec.Labels[labelInstall] != p.stack:
		return fmt.Errorf("service %s exists and was not created by flotilla install (no %s=%s label); remove it or choose another --stack",
			p.serviceName(), labelInstall, p.stack)
	}
	extraNets, err := joinedNetworks(ctx, c, p)
	if err != nil {
		return err
	}
	networkID, err := ensureNetwork(ctx, c, p)
	if err != nil {
		return err
	}
	var secrets installSecrets
	if secrets.apps, err = ensureSecret(ctx, out, c, p, "applications", apps); err != nil {
		return err
	}
	if secrets.admin, err = ensureSecret(ctx, out, c, p, "admin-token", token); err != nil {
		return err
	}
	if read != nil {
		if secrets.read, err = ensureSecret(ctx, out, c, p, "read-token", read); err != nil {
			return err
		}
	}
	spec := p.spec(networkID, extraNets, secrets)
	if exists {
		res, err := c.ServiceUpdate(ctx, current.Service.ID, client.ServiceUpdateOptions{Version: current.Service.Version, Spec: spec})
		if err != nil {
			return fmt.Errorf("update service %s: %w", p.serviceName(), err)
		}
		warn(out, res.Warnings)
		fmt.Fprintf(out, "updating service %s to %s\n", p.serviceName(), p.image)
	} else {
		res, err := c.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec})
		if err != nil {
			return fmt.Errorf("create service %s: %w", p.serviceName(), err)
		}
		warn(out, res.Warnings)
		fmt.Fprintf(out, "created service %s (%s)\n", p.serviceName(), p.image)
	}
	if err := waitConverged(ctx, c, p); err != nil {
		return err
	}
	url := o.readyURL
	if url == "" {
		url = p.readyURL()
	}
	if !o.noReadyURL && url != "" {
		if err := waitReady(ctx, url); err != nil {
			return err
		}
	}
	// Secrets of an earlier install that the service no longer uses.
	keep := []string{secrets.apps[0], secrets.admin[0], secrets.read[0]}
	if err := removeLabelled(ctx, out, c, p.stack, false, func(s swarm.Secret) bool { return !slices.Contains(keep, s.Spec.Name) }); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s is running %s on %d task(s)", p.stack, p.image, p.replicas)
	if url != "" && !o.noReadyURL {
		fmt.Fprintf(out, "; %s answers", url)
	}
	fmt.Fprintln(out)
	return nil
}

func warn(out io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(out, "warning:", w)
	}
}

func ensureNetwork(ctx context.Context, c *client.Client, p installPlan) (string, error) {
	n, err := c.NetworkInspect(ctx, p.networkName(), client.NetworkInspectOptions{})
	if err == nil {
		if n.Network.Labels[labelInstall] != p.stack {
			return "", fmt.Errorf("network %s exists and was not created by flotilla install; remove it or choose another --stack", p.networkName())
		}
		return n.Network.ID, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect network %s: %w", p.networkName(), err)
	}
	res, err := c.NetworkCreate(ctx, p.networkName(), client.NetworkCreateOptions{Driver: "overlay", Scope: "swarm", Labels: p.labels()})
	if err != nil {
		return "", fmt.Errorf("create network %s: %w", p.networkName(), err)
	}
	return res.ID, nil
}

// joinedNetworks returns the ids of the --network networks. They must exist
// and span the swarm: they belong to whoever made them (a router stack, an
// operator), so install does not create them and uninstall never removes
// them; a service needs no attachable flag to join one.
func joinedNetworks(ctx context.Context, c *client.Client, p installPlan) ([]string, error) {
	var ids []string
	for _, name := range p.networks {
		n, err := c.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			return nil, usageError{fmt.Errorf("--network %s: no such network; create it first (docker network create --driver overlay %s)", name, name)}
		case err != nil:
			return nil, fmt.Errorf("--network %s: inspect: %w", name, err)
		case n.Network.Scope != "swarm":
			return nil, usageError{fmt.Errorf("--network %s: a %s network of scope %q; a service joins only overlay networks of the swarm", name, n.Network.Driver, n.Network.Scope)}
		}
		ids = append(ids, n.Network.ID)
	}
	return ids, nil
}

// ensureSecret returns the name and id of the secret holding content,
// creating it if this content was not installed before.
func ensureSecret(ctx context.Context, out io.Writer, c *client.Client, p installPlan, kind string, content []byte) ([2]string, error) {
	name := secretName(p.stack, kind, content)
	s, err := c.SecretInspect(ctx, name, client.SecretInspectOptions{})
	if err == nil {
		if s.Secret.Spec.Labels[labelInstall] != p.stack {
			return [2]string{}, fmt.Errorf("secret %s exists and was not created by flotilla install; remove it or choose another --stack", name)
		}
		return [2]string{name, s.Secret.ID}, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return [2]string{}, fmt.Errorf("inspect secret %s: %w", name, err)
	}
	res, err := c.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: name, Labels: p.labels()}, Data: content}})
	if err != nil {
		return [2]string{}, fmt.Errorf("create secret %s: %w", name, err)
	}
	fmt.Fprintf(out, "created secret %s\n", name)
	return [2]string{name, res.ID}, nil
}

// waitConverged waits until the service's update (if any) completed and
// exactly its replicas run the image. A rollback by the swarm is an error.
func waitConverged(ctx context.Context, c *client.Client, p installPlan) error {
	last := "no answer yet"
	for {
		done, state, err := converged(ctx, c, p)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		last = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to run %s: %s: %w", p.serviceName(), p.image, last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func converged(ctx context.Context, c *client.Client, p installPlan) (bool, string, error) {
	svc, err := c.ServiceInspect(ctx, p.serviceName(), client.ServiceInspectOptions{})
	if err != nil {
		return false, err.Error(), nil
	}
	if u := svc.Service.UpdateStatus; u != nil {
		switch u.State {
		case swarm.UpdateStateRollbackCompleted, swarm.UpdateStateRollbackPaused, swarm.UpdateStatePaused:
			return false, "", fmt.Errorf("the swarm stopped the update of %s (%s): %s", p.serviceName(), u.State, u.Message)
		case swarm.UpdateStateCompleted:
		default:
			return false, "update " + string(u.State), nil
		}
	}
	tasks, err := c.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).
		Add("service", svc.Service.ID).Add("desired-state", "running")})
	if err != nil {
		return false, err.Error(), nil
	}
	running := 0
	var states []string
	for _, t := range tasks.Items {
		img, _, _ := strings.Cut(t.Spec.ContainerSpec.Image, "@")
		if t.Status.State == swarm.TaskStateRunning && img == p.image {
			running++
		} else {
			states = append(states, fmt.Sprintf("%s %s %s", img, t.Status.State, t.Status.Err))
		}
	}
	return running == int(p.replicas) && len(tasks.Items) == int(p.replicas),
		fmt.Sprintf("%d of %d tasks running %s; others: %v", running, p.replicas, p.image, states), nil
}

func waitReady(ctx context.Context, url string) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return usageError{fmt.Errorf("--ready-url %q: %w", url, err)}
		}
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to answer 200: %s: %w", url, last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// removeLabelled removes the stack's installed secrets that drop selects.
// Without wait, one a task still uses is left (the swarm refuses; the next
// install or the uninstall removes it); with wait, the refusal is retried
// until the context ends.
func removeLabelled(ctx context.Context, out io.Writer, c *client.Client, stack string, wait bool, drop func(swarm.Secret) bool) error {
	list, err := c.SecretList(ctx, client.SecretListOptions{Filters: make(client.Filters).Add("label", labelInstall+"="+stack)})
	if err != nil {
		return fmt.Errorf("list secrets of %s: %w", stack, err)
	}
	for _, s := range list.Items {
		if s.Spec.Labels[labelInstall] != stack || !drop(s) {
			continue
		}
		remove := func() error {
			_, err := c.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{})
			return err
		}
		if wait {
			if err := retryInUse(ctx, remove); err != nil {
				return fmt.Errorf("remove secret %s: %w", s.Spec.Name, err)
			}
		} else if err := remove(); err != nil {
			if cerrdefs.IsNotFound(err) {
				continue
			}
			fmt.Fprintf(out, "secret %s kept: %v\n", s.Spec.Name, err)
			continue
		}
		fmt.Fprintf(out, "removed secret %s\n", s.Spec.Name)
	}
	return nil
}

func runUninstall(ctx context.Context, out io.Writer, stack string) error {
	c, err := dockerClient()
	if err != nil {
		return err
	}
	defer c.Close()
	byLabel := make(client.Filters).Add("label", labelInstall+"="+stack)
	svcs, err := c.ServiceList(ctx, client.ServiceListOptions{Filters: byLabel})
	if err != nil {
		return fmt.Errorf("list services of %s: %w", stack, err)
	}
	for _, s := range svcs.Items {
		if _, err := c.ServiceRemove(ctx, s.ID, client.ServiceRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove service %s: %w", s.Spec.Name, err)
		}
		fmt.Fprintf(out, "removed service %s\n", s.Spec.Name)
	}
	// Secrets and the network are in use until the tasks are gone.
	for _, s := range svcs.Items {
		if err := waitNoTasks(ctx, c, s.ID); err != nil {
			return fmt.Errorf("service %s: %w", s.Spec.Name, err)
		}
	}
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: byLabel})
	if err != nil {
		return fmt.Errorf("list networks of %s: %w", stack, err)
	}
	for _, n := range nets.Items {
		if n.Labels[labelInstall] != stack {
			continue
		}
		if err := retryInUse(ctx, func() error {
			_, err := c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("remove network %s: %w", n.Name, err)
		}
		fmt.Fprintf(out, "removed network %s\n", n.Name)
	}
	if err := removeLabelled(ctx, out, c, stack, true, func(swarm.Secret) bool { return true }); err != nil {
		return err
	}
	// The lease the controller kept under its id (install sets it to the
	// stack's name); recognised by the lease package's own label.
	lease := "flotilla-lease." + stack
	if cfg, err := c.ConfigInspect(ctx, lease, client.ConfigInspectOptions{}); err == nil && cfg.Config.Spec.Labels[labels.Lease] != "" {
		if _, err := c.ConfigRemove(ctx, cfg.Config.ID, client.ConfigRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove config %s: %w", lease, err)
		}
		fmt.Fprintf(out, "removed config %s\n", lease)
	}
	if len(svcs.Items) == 0 && len(nets.Items) == 0 {
		fmt.Fprintf(out, "no service of %s was installed (label %s=%s)\n", stack, labelInstall, stack)
	}
	return nil
}

// waitNoTasks waits until no task of the removed service holds a container.
// The daemon refuses a task filter naming a removed service, so every task
// is listed; a finished task holds nothing and may linger, so it is not
// waited for.
func waitNoTasks(ctx context.Context, c *client.Client, serviceID string) error {
	for {
		tasks, err := c.TaskList(ctx, client.TaskListOptions{})
		if err == nil && !slices.ContainsFunc(tasks.Items, func(t swarm.Task) bool {
			return t.ServiceID == serviceID && !backend.TerminalTask(t.Status.State)
		}) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for its tasks to stop: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// retryInUse retries a removal the daemon refuses while a stopped task's
// endpoint is still being released.
func retryInUse(ctx context.Context, remove func() error) error {
	for {
		err := remove()
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still refused when the wait ended: %w)", err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
