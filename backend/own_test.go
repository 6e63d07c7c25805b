package backend

import (
	"context"
	"errors"
	"testing"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestBackend_refusesToRemoveTheControllersOwnStack(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := context.Background()
	stack := swarmtest.Name(t, "own")
	swarmtest.Cleanup(t, stack)
	deploy(t, b, stack, fixture{}, nil)

	svcs, err := b.LiveServices(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	self := Self{Stack: stack, ServiceID: svcs[stack+"_web"].ID}
	own := b.WithSelf(self)

	if err := own.RemoveStack(ctx, stack); !errors.Is(err, capability.ErrOwnStack) {
		t.Fatalf("RemoveStack = %v, want ErrOwnStack", err)
	}
	for name, s := range svcs {
		if err := own.RemoveService(ctx, s.ID); !errors.Is(err, capability.ErrOwnStack) {
			t.Fatalf("RemoveService(%s) = %v, want ErrOwnStack", name, err)
		}
	}
	nets, _ := own.LiveNetworks(ctx, stack)
	for _, id := range nets {
		if err := own.RemoveNetwork(ctx, id); !errors.Is(err, capability.ErrOwnStack) {
			t.Fatalf("RemoveNetwork = %v, want ErrOwnStack", err)
		}
	}
	if after, _ := b.LiveServices(ctx, stack); len(after) != len(svcs) {
		t.Fatal("own stack lost services")
	}
	// The plain backend, which is not the controller, still may.
	if err := b.RemoveStack(ctx, stack); err != nil {
		t.Fatal(err)
	}
	if _, ok := self.Forbidden()["x"]; ok {
		t.Fatal("forbidden set invented a name")
	}
}
