package backend

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestLiveResources_answersWhatTheSeparateReadsDoFromOneListingOfEachKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "res")
	swarmtest.Cleanup(t, stack)
	deploy(t, b, stack, fixture{}, map[string]string{LabelOwner: "ctl/res"})

	before := b.Stats()
	r, err := b.LiveResources(ctx, stack)
	if err != nil {
		t.Fatalf("LiveResources: %v", err)
	}
	d := b.Stats().Sub(before)
	want := map[string]int{"service.list": 1, "network.list": 1, "config.list": 1, "secret.list": 1}
	if !maps.Equal(d.Requests, want) {
		t.Errorf("requests %v, want one listing of each kind %v", d.Requests, want)
	}

	nets, _ := b.LiveNetworks(ctx, stack)
	configs, _ := b.LiveConfigs(ctx, stack)
	secrets, _ := b.LiveSecrets(ctx, stack)
	services, _ := b.LiveServices(ctx, stack)
	owners, err := b.LiveOwners(ctx, stack)
	if err != nil {
		t.Fatalf("LiveOwners: %v", err)
	}
	if !maps.Equal(r.Networks, nets) || !maps.Equal(r.Configs, configs) || !maps.Equal(r.Secrets, secrets) {
		t.Errorf("networks/configs/secrets %v %v %v, separate reads %v %v %v", r.Networks, r.Configs, r.Secrets, nets, configs, secrets)
	}
	if len(r.Services) != 3 || len(r.Services) != len(services) {
		t.Errorf("%d services, separate read %d, want 3", len(r.Services), len(services))
	}
	for name, s := range services {
		if r.Services[name].ID != s.ID {
			t.Errorf("service %s: id %q, separate read %q", name, r.Services[name].ID, s.ID)
		}
	}
	if !reflect.DeepEqual(r.Owners, owners) || len(r.Owners.Services) != 3 || len(r.Owners.Networks) != 1 ||
		len(r.Owners.Configs) != 1 || len(r.Owners.Secrets) != 1 {
		t.Errorf("owners %+v, want every object's stamp as LiveOwners reads it (%+v)", r.Owners, owners)
	}
}
