package backend

import (
	"context"
	"fmt"
	"os"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/capability"
)

// Self is what the controller learns about itself when it runs as a swarm
// service: the stack it belongs to, which no sweep may remove, and the
// secrets and configs it mounts, which no application may mount.
type Self struct {
	// ServiceID is the controller's own service; empty when it does not run
	// as one.
	ServiceID string
	// Stack is the namespace of that service, empty outside a stack.
	Stack string
	// Secrets and Configs are the names of what the service mounts.
	Secrets []string
	Configs []string
}

// Forbidden returns the names no stack may mount or declare.
func (s Self) Forbidden() map[string]struct{} {
	out := map[string]struct{}{}
	for _, n := range s.Secrets {
		out[n] = struct{}{}
	}
	for _, n := range s.Configs {
		out[n] = struct{}{}
	}
	return out
}

// DetectSelf finds the controller's own service from its container: a swarm
// task's hostname is its container id unless the stack sets another, and the
// container carries the service id label. Outside a container, or with a
// hostname that names none, it answers an empty Self and no error.
func (b *Backend) DetectSelf(ctx context.Context) (Self, error) {
	host, err := os.Hostname()
	if err != nil {
		return Self{}, nil
	}
	ctr, err := b.api.ContainerInspect(ctx, host, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return Self{}, nil
	}
	if err != nil {
		return Self{}, fmt.Errorf("inspect own container: %w", err)
	}
	if ctr.Container.Config == nil {
		return Self{}, nil
	}
	id := ctr.Container.Config.Labels["com.docker.swarm.service.id"]
	if id == "" {
		return Self{}, nil
	}
	svc, err := b.api.ServiceInspect(ctx, id, client.ServiceInspectOptions{})
	if err != nil {
		return Self{}, fmt.Errorf("inspect own service: %w", err)
	}
	self := Self{ServiceID: svc.Service.ID, Stack: svc.Service.Spec.Labels[LabelNamespace]}
	if cs := svc.Service.Spec.TaskTemplate.ContainerSpec; cs != nil {
		for _, s := range cs.Secrets {
			self.Secrets = append(self.Secrets, s.SecretName)
		}
		for _, c := range cs.Configs {
			self.Configs = append(self.Configs, c.ConfigName)
		}
	}
	return self, nil
}

// WithSelf returns a backend that refuses to remove the controller's own
// service and anything of its stack, with errors wrapping
// capability.ErrOwnStack, so a sweep can report the refusal once instead of
// failing on every pass.
func (b *Backend) WithSelf(s Self) *Backend {
	c := b.clone()
	c.self = s
	return c
}

// refuseOwn returns an ErrOwnStack error when an object with these labels (or
// this service id) belongs to the controller itself.
func (b *Backend) refuseOwn(kind, id string, labels map[string]string) error {
	if b.self.ServiceID != "" && kind == "service" && id == b.self.ServiceID {
		return fmt.Errorf("remove %s %s: it is the controller itself: %w", kind, id, capability.ErrOwnStack)
	}
	if b.self.Stack != "" && labels[LabelNamespace] == b.self.Stack {
		return fmt.Errorf("remove %s %s of stack %s: %w", kind, id, b.self.Stack, capability.ErrOwnStack)
	}
	return nil
}

// checkOwn reads an object's labels to decide refuseOwn; it costs a read only
// when the controller knows it runs in a stack.
func (b *Backend) checkOwn(ctx context.Context, kind, id string) error {
	if b.self.ServiceID == "" && b.self.Stack == "" {
		return nil
	}
	var labels map[string]string
	switch kind {
	case "service":
		s, err := b.api.ServiceInspect(ctx, id, client.ServiceInspectOptions{})
		if err != nil {
			return nil // gone or unreadable: the removal itself will say
		}
		labels = s.Service.Spec.Labels
	case "network":
		n, err := b.api.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err != nil {
			return nil
		}
		labels = n.Network.Labels
	case "secret":
		s, err := b.api.SecretInspect(ctx, id, client.SecretInspectOptions{})
		if err != nil {
			return nil
		}
		labels = s.Secret.Spec.Labels
	case "config":
		c, err := b.api.ConfigInspect(ctx, id, client.ConfigInspectOptions{})
		if err != nil {
			return nil
		}
		labels = c.Config.Spec.Labels
	}
	return b.refuseOwn(kind, id, labels)
}

func (b *Backend) checkOwnVolume(ctx context.Context, name string) error {
	if b.self.Stack == "" {
		return nil
	}
	v, err := b.api.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return nil
	}
	return b.refuseOwn("volume", name, v.Volume.Labels)
}
