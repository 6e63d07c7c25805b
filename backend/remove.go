package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/labels"
)

// taskDrainTimeout bounds how long RemoveStack waits for removed services'
// containers to go before it removes their networks.
const taskDrainTimeout = 60 * time.Second

// RemoveStack deletes every service, network, secret and config carrying the
// stack's namespace label, services first. Release records carry no
// namespace label and are kept. Objects already gone are not an error.
func (b *Backend) RemoveStack(ctx context.Context, stack string) error {
	if stack == "" {
		return errors.New("remove stack: empty stack name")
	}
	if b.self.Stack != "" && stack == b.self.Stack {
		return fmt.Errorf("remove stack %s: %w", stack, capability.ErrOwnStack)
	}
	ns := namespace(stack)
	log := b.log.With("stack", stack)
	var errs []error

	services, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: ns})
	if err != nil {
		return fmt.Errorf("remove stack %s: list services: %w", stack, err)
	}
	for _, s := range services.Items {
		if err := b.RemoveService(ctx, s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if len(services.Items) > 0 {
		// A network cannot go while a container is still attached to it.
		if err := b.waitTasksGone(ctx, services.Items); err != nil {
			errs = append(errs, err)
		}
	}

	nets, err := b.api.NetworkList(ctx, client.NetworkListOptions{Filters: ns})
	if err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	}
	for _, n := range nets.Items {
		if err := b.RemoveNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	secrets, err := b.api.SecretList(ctx, client.SecretListOptions{Filters: ns})
	if err != nil {
		errs = append(errs, fmt.Errorf("list secrets: %w", err))
	}
	for _, s := range secrets.Items {
		if err := b.RemoveSecret(ctx, s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	configs, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: ns})
	if err != nil {
		errs = append(errs, fmt.Errorf("list configs: %w", err))
	}
	for _, c := range configs.Items {
		if c.Spec.Labels[LabelRecord] != "" {
			continue // never history, even if someone labelled it into the stack
		}
		if err := b.RemoveConfig(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	// What the daemon did not keep of services now gone means nothing.
	if err := b.RememberNotKept(ctx, stack, nil); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove stack %s: %w", stack, err)
	}
	log.Info("removed stack", "services", len(services.Items), "networks", len(nets.Items), "secrets", len(secrets.Items), "configs", len(configs.Items))
	return nil
}

// waitTasksGone polls until no task of the removed services is left. The
// daemon refuses a service filter naming a service that no longer exists,
// so it lists every task and matches service ids itself.
func (b *Backend) waitTasksGone(ctx context.Context, services []swarm.Service) error {
	removed := make(map[string]bool, len(services))
	for _, s := range services {
		removed[s.ID] = true
	}
	ctx, cancel := context.WithTimeout(ctx, taskDrainTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		tasks, err := b.api.TaskList(ctx, client.TaskListOptions{})
		// Terminal tasks hold no container or attachment, and Swarm keeps
		// a finished job's tasks after its service is gone.
		if err == nil && !slices.ContainsFunc(tasks.Items, func(t swarm.Task) bool { return removed[t.ServiceID] && !TerminalTask(t.Status.State) }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tasks of removed services still present: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// RemoveService deletes one service by id; one already gone is not an error.
func (b *Backend) RemoveService(ctx context.Context, id string) error {
	if err := b.checkOwn(ctx, "service", id); err != nil {
		return err
	}
	if _, err := b.api.ServiceRemove(ctx, id, client.ServiceRemoveOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove service %s: %w", id, err)
	}
	return nil
}

// RemoveNetwork deletes one network by id, retrying for a few seconds while
// the daemon detaches the last containers of removed services.
func (b *Backend) RemoveNetwork(ctx context.Context, id string) error {
	if err := b.checkOwn(ctx, "network", id); err != nil {
		return err
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		_, err = b.api.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		if err == nil || isNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove network %s: %w", id, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("remove network %s: %w", id, err)
}

// RemoveConfig deletes one config by id; one already gone is not an error.
// Release records are refused: they are history, and only RecordRelease's
// pruning drops them.
func (b *Backend) RemoveConfig(ctx context.Context, id string) error {
	if err := b.checkOwn(ctx, "config", id); err != nil {
		return err
	}
	c, err := b.api.ConfigInspect(ctx, id, client.ConfigInspectOptions{})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove config %s: %w", id, err)
	}
	if c.Config.Spec.Labels[LabelRecord] != "" {
		return fmt.Errorf("remove config %s: %s is a release record, which is never swept", id, c.Config.Spec.Name)
	}
	if c.Config.Spec.Labels[labels.Lease] != "" {
		return fmt.Errorf("remove config %s: %s is the controllers' leader lease, which is never swept", id, c.Config.Spec.Name)
	}
	if _, err := b.api.ConfigRemove(ctx, id, client.ConfigRemoveOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove config %s: %w", id, err)
	}
	return nil
}

// RemoveSecret deletes one secret by id; one already gone is not an error.
func (b *Backend) RemoveSecret(ctx context.Context, id string) error {
	if err := b.checkOwn(ctx, "secret", id); err != nil {
		return err
	}
	if _, err := b.api.SecretRemove(ctx, id, client.SecretRemoveOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove secret %s: %w", id, err)
	}
	return nil
}

// TerminalTask reports whether a task in state s is over: it holds no
// container or network attachment any more, though Swarm may keep it listed.
func TerminalTask(s swarm.TaskState) bool {
	switch s {
	case swarm.TaskStateComplete, swarm.TaskStateFailed, swarm.TaskStateShutdown,
		swarm.TaskStateRejected, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
		return true
	}
	return false
}
