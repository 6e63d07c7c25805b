package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/labels"
)

// The memory of fields the daemon did not keep lives in the labels of one
// config per stack. A config's labels change in place under its version, so
// an update is a compare-and-swap and no service ever mounts it; its data
// only says what it is for.
const (
	// labels.NotKept names the stack a memory belongs to,
	// labels.NotKeptFields holds it.
	notKeptPrefix = "flotilla-notkept."
	notKeptData   = "flotilla: fields of this stack's services the daemon did not keep; the labels are the record\n"
)

// notKeptName is the config name of stack's memory, shortened as record
// names are.
func notKeptName(stack string) string {
	return strings.Replace(recordName(stack, 0), recordPrefix, notKeptPrefix, 1)
}

func (b *Backend) notKeptConfigs(ctx context.Context, stack string) ([]swarm.Config, error) {
	f := make(client.Filters).Add("label", labels.NotKept+"="+stack)
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list the not-kept memory of %s: %w", stack, err)
	}
	return list.Items, nil
}

// NotKept implements capability.NotKeptMemory.
func (b *Backend) NotKept(ctx context.Context, stack string) (map[string]map[string]capability.NotKeptField, error) {
	list, err := b.notKeptConfigs(ctx, stack)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	var out map[string]map[string]capability.NotKeptField
	if err := json.Unmarshal([]byte(list[0].Spec.Labels[labels.NotKeptFields]), &out); err != nil {
		return nil, fmt.Errorf("read the not-kept memory of %s: config %s, label %s: %w", stack, list[0].Spec.Name, labels.NotKeptFields, err)
	}
	return out, nil
}

// RememberNotKept implements capability.NotKeptMemory. It writes only when
// the memory changed: an unchanged pass writes nothing.
func (b *Backend) RememberNotKept(ctx context.Context, stack string, fields map[string]map[string]capability.NotKeptField) error {
	list, err := b.notKeptConfigs(ctx, stack)
	if err != nil {
		return err
	}
	var data string
	if len(fields) > 0 {
		raw, err := json.Marshal(fields) // map keys sorted: equal memories encode equal
		if err != nil {
			return fmt.Errorf("remember what %s did not keep: %w", stack, err)
		}
		data = string(raw)
	}
	// The first config found is the one kept; another (two writers that
	// created one each) goes.
	var current *swarm.Config
	if len(list) > 0 {
		current, list = &list[0], list[1:]
	}
	same := current != nil && current.Spec.Labels[labels.NotKeptFields] == data
	if len(list) == 0 && (data == "" && current == nil || data != "" && same) {
		return nil
	}
	ctx, epoch, err := b.permitWrites(ctx)
	if err != nil {
		return fmt.Errorf("remember what %s did not keep: %w", stack, err)
	}
	if data == "" && current != nil {
		list, current = append(list, *current), nil
	}
	var errs []error
	for _, c := range list {
		if _, err := b.api.ConfigRemove(ctx, c.ID, client.ConfigRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.Spec.Name, err))
		}
	}
	stamp := withEpochLabel(map[string]string{labels.NotKept: stack, labels.NotKeptFields: data}, epoch)
	switch {
	case data == "" || same:
	case current != nil:
		spec := current.Spec
		spec.Labels = stamp
		if _, err := b.api.ConfigUpdate(ctx, current.ID, client.ConfigUpdateOptions{Version: current.Version, Spec: spec}); err != nil {
			errs = append(errs, fmt.Errorf("update %s: %w", current.Spec.Name, err))
		}
	default:
		spec := swarm.ConfigSpec{Annotations: swarm.Annotations{Name: notKeptName(stack), Labels: stamp}, Data: []byte(notKeptData)}
		if _, err := b.api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: spec}); err != nil {
			errs = append(errs, fmt.Errorf("create %s: %w", spec.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remember what %s did not keep: %w", stack, err)
	}
	return nil
}
