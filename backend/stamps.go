package backend

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/capability"
)

// LiveOwners reads the owner stamp of every service, network, config and
// secret in the stack's namespace, from one listing of each kind. Release
// records carry a stamp too but are not the stack's objects, so they are
// left out.
func (b *Backend) LiveOwners(ctx context.Context, stack string) (capability.Owners, error) {
	r, err := b.LiveResources(ctx, stack)
	if err != nil {
		return capability.Owners{}, fmt.Errorf("owner stamps of %s: %w", stack, err)
	}
	return r.Owners, nil
}

// LiveResources reads the stack's networks, configs, secrets and services
// and their owner stamps from one listing of each kind: what LiveNetworks,
// LiveConfigs, LiveSecrets, LiveServices and LiveOwners answer, together.
// The four listings are independent, so they are made at once: a sweep
// after a deploy waits for the slowest of them, not for their sum.
func (b *Backend) LiveResources(ctx context.Context, stack string) (capability.Resources, error) {
	r := capability.Resources{
		Networks: map[string]string{}, Configs: map[string]string{}, Secrets: map[string]string{}, Services: map[string]swarm.Service{},
		Owners: capability.Owners{Services: map[string]string{}, Networks: map[string]string{}, Configs: map[string]string{}, Secrets: map[string]string{}},
	}
	stamp := func(m map[string]string, name string, labels map[string]string) {
		if o := labels[LabelOwner]; o != "" && labels[LabelRecord] == "" {
			m[name] = o
		}
	}
	b.negotiate(ctx)
	var (
		services []swarm.Service
		nets     []network.Summary
		configs  []swarm.Config
		secrets  []swarm.Secret
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		list, err := b.api.ServiceList(gctx, client.ServiceListOptions{Filters: namespace(stack)})
		if err != nil {
			return fmt.Errorf("live services of %s: %w", stack, err)
		}
		services = list.Items
		return nil
	})
	g.Go(func() error {
		list, err := b.api.NetworkList(gctx, client.NetworkListOptions{Filters: namespace(stack)})
		if err != nil {
			return fmt.Errorf("live networks of %s: %w", stack, err)
		}
		nets = list.Items
		return nil
	})
	g.Go(func() error {
		list, err := b.api.ConfigList(gctx, client.ConfigListOptions{Filters: namespace(stack)})
		if err != nil {
			return fmt.Errorf("live configs of %s: %w", stack, err)
		}
		configs = list.Items
		return nil
	})
	g.Go(func() error {
		list, err := b.api.SecretList(gctx, client.SecretListOptions{Filters: namespace(stack)})
		if err != nil {
			return fmt.Errorf("live secrets of %s: %w", stack, err)
		}
		secrets = list.Items
		return nil
	})
	if err := g.Wait(); err != nil {
		return r, err
	}
	for _, s := range services {
		r.Services[s.Spec.Name] = s
		stamp(r.Owners.Services, s.Spec.Name, s.Spec.Labels)
	}
	for _, n := range nets {
		r.Networks[n.Name] = n.ID
		stamp(r.Owners.Networks, n.Name, n.Labels)
	}
	for _, c := range configs {
		if c.Spec.Labels[LabelRecord] == "" {
			r.Configs[c.Spec.Name] = c.ID
		}
		stamp(r.Owners.Configs, c.Spec.Name, c.Spec.Labels)
	}
	for _, s := range secrets {
		r.Secrets[s.Spec.Name] = s.ID
		stamp(r.Owners.Secrets, s.Spec.Name, s.Spec.Labels)
	}
	return r, nil
}

// ownerStamped returns labels with the deploy's owner stamp added, on a
// copy: networks, configs and secrets carry it from their create on, so a
// sweep can prove they are this application's even when the deploy that
// created them never got to record its revision.
func ownerStamped(labels map[string]string, deploy map[string]string) map[string]string {
	owner := deploy[LabelOwner]
	if owner == "" {
		return labels
	}
	out := make(map[string]string, len(labels)+2)
	maps.Copy(out, labels)
	out[LabelOwner] = owner
	if e := deploy[LabelEpoch]; e != "" {
		out[LabelEpoch] = e
	}
	return out
}

// withEpochLabel returns labels with the leader epoch a write is made in,
// on a copy; epoch 0 (no lease) adds nothing. The epoch is metadata about
// the write, like the owner stamp, so it changes no spec hash and no drift.
func withEpochLabel(labels map[string]string, epoch uint64) map[string]string {
	if epoch == 0 {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[LabelEpoch] = strconv.FormatUint(epoch, 10)
	return out
}
