package backend

import (
	"context"
	"maps"
	"testing"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The memory of fields the daemon did not keep survives in the swarm: read
// back as written, replaced in place, written only when it changed, and
// forgotten when emptied or when the stack is removed.
func TestNotKeptIsRememberedInTheSwarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "notkept")
	swarmtest.Cleanup(t, stack)
	t.Cleanup(func() { _ = b.RememberNotKept(context.Background(), stack, nil) })
	read := func() map[string]map[string]capability.NotKeptField {
		t.Helper()
		m, err := b.NotKept(ctx, stack)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	equal := func(a, b map[string]map[string]capability.NotKeptField) bool {
		return maps.EqualFunc(a, b, func(x, y map[string]capability.NotKeptField) bool { return maps.Equal(x, y) })
	}
	if m := read(); len(m) != 0 {
		t.Fatalf("nothing remembered yet, read %v", m)
	}
	first := map[string]map[string]capability.NotKeptField{
		stack + "_web": {"EndpointSpec.Ports[0].PublishMode": {Desired: "aa", Live: "bb", APIVersion: "1.41"}},
	}
	if err := b.RememberNotKept(ctx, stack, first); err != nil {
		t.Fatal(err)
	}
	if m := read(); !equal(m, first) {
		t.Fatalf("read %v, want %v", m, first)
	}
	before := b.Stats()
	if err := b.RememberNotKept(ctx, stack, first); err != nil {
		t.Fatal(err)
	}
	if d := b.Stats().Sub(before); d.Writes != 0 {
		t.Fatalf("the same memory again: %d writes, want none", d.Writes)
	}
	second := map[string]map[string]capability.NotKeptField{
		stack + "_web": {"EndpointSpec.Ports[0].PublishMode": {Desired: "cc", Live: "bb"}},
		stack + "_db":  {"TaskTemplate.ContainerSpec.Healthcheck.StartInterval": {Desired: "dd", Live: "ee", APIVersion: "1.44"}},
	}
	if err := b.RememberNotKept(ctx, stack, second); err != nil {
		t.Fatal(err)
	}
	if m := read(); !equal(m, second) {
		t.Fatalf("after a change read %v, want %v", m, second)
	}
	if list, _ := b.notKeptConfigs(ctx, stack); len(list) != 1 {
		t.Fatalf("%d configs hold the memory, want one replaced in place", len(list))
	}
	if err := b.RememberNotKept(ctx, stack, nil); err != nil {
		t.Fatal(err)
	}
	if m := read(); len(m) != 0 {
		t.Fatalf("after forgetting read %v", m)
	}
	if err := b.RememberNotKept(ctx, stack, first); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveStack(ctx, stack); err != nil {
		t.Fatal(err)
	}
	if m := read(); len(m) != 0 {
		t.Fatalf("after the stack was removed read %v", m)
	}
}
