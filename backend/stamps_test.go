package backend

import (
	"context"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestDeployStack_stampsTheOwnerOnEveryObjectItCreates(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "stamp")
	swarmtest.Cleanup(t, stack)
	const owner = "ctl/stamp"
	deploy(t, b, stack, fixture{}, map[string]string{LabelOwner: owner})

	o, err := b.LiveOwners(context.Background(), stack)
	if err != nil {
		t.Fatal(err)
	}
	for kind, m := range map[string]map[string]string{"service": o.Services, "network": o.Networks, "config": o.Configs, "secret": o.Secrets} {
		if len(m) == 0 {
			t.Errorf("no %s carries an owner stamp", kind)
		}
		for name, got := range m {
			if got != owner {
				t.Errorf("%s %s: owner stamp %q, want %q", kind, name, got, owner)
			}
		}
	}
	if len(o.Services) != 3 || len(o.Networks) != 1 || len(o.Configs) != 1 || len(o.Secrets) != 1 {
		t.Errorf("stamped objects: %+v, want 3 services and one network, config and secret", o)
	}
}
