package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestMissingObject_readsTheDaemonsWordsForAMissingReference(t *testing.T) {
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{"Error response from daemon: network jg9wmx5h4oyo9asppnsd1s7zz not found", true},
		{"rpc error: code = InvalidArgument desc = config not found: s_conf", true},
		{"rpc error: code = InvalidArgument desc = secret not found: s_token", true},
		{"rpc error: code = InvalidArgument desc = name must be valid as a DNS name component", false},
		{"update out of sequence", false},
	} {
		if got := missingObject(errors.New(tc.err)); got != tc.want {
			t.Errorf("missingObject(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// listed is a network as a listing decodes it, with containers nil when the
// listing left them out.
func listed(n network.Network, containers map[string]json.RawMessage) listedNetwork {
	return listedNetwork{Summary: network.Summary{Network: n}, Containers: containers}
}

func TestStaleOnNode_onlyALocalCopyOfASwarmNetworkIsStale(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    listedNetwork
		want bool
	}{
		{"the manager's view", listed(network.Network{Scope: "swarm", Driver: "overlay"}, nil), false},
		{"ingress", listed(network.Network{Scope: "swarm", Ingress: true}, map[string]json.RawMessage{}), false},
		{"a local bridge", listed(network.Network{Scope: "local", Driver: "bridge"}, map[string]json.RawMessage{}), false},
		{"a node's leftover", listed(network.Network{Scope: "swarm", Driver: "overlay",
			Peers: []network.PeerInfo{{Name: "n", IP: netip.MustParseAddr("127.0.0.1")}}}, map[string]json.RawMessage{}), true},
	} {
		if got := staleOnNode(tc.n); got != tc.want {
			t.Errorf("%s: staleOnNode = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// removeObjects deletes what a `docker stack rm` deletes, one object at a
// time, the way someone working behind the controller's back would.
func removeObjects(t *testing.T, stack string) {
	t.Helper()
	ctx := context.Background()
	if err := swarmtest.RemoveAll(ctx, swarmtest.Client(t), stack); err != nil {
		t.Fatalf("remove the stack's objects: %v", err)
	}
}

func TestDeployStack_healRecreatesEveryDeclaredNetworkConfigAndSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "heal")
	swarmtest.Cleanup(t, stack)
	deploy(t, b, stack, fixture{Replicas: 1}, nil)
	waitRunning(t, b, stack)

	removeObjects(t, stack)
	r := render(t, stack, fixture{Replicas: 1})
	res, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets,
		Heal: []string{stack + "_web", stack + "_worker", stack + "_cache"}})
	if err != nil {
		t.Fatalf("heal after the stack's objects were removed: %v", err)
	}
	// network + config + secret + 3 services, as on the first deploy
	if res.Writes != 6 || len(res.Created) != 3 {
		t.Errorf("heal wrote %d objects, created %v; want 6 writes and 3 services", res.Writes, res.Created)
	}
	for kind, list := range map[string]func(context.Context, string) (map[string]string, error){
		"networks": b.LiveNetworks, "configs": b.LiveConfigs, "secrets": b.LiveSecrets,
	} {
		if m, err := list(ctx, stack); err != nil || len(m) != 1 {
			t.Errorf("%s after the heal: %v, %v; want one", kind, m, err)
		}
	}
	waitRunning(t, b, stack)
}

func TestDeployStack_aReferenceFoundMissingWhileWritingIsRecreatedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gone")
	swarmtest.Cleanup(t, stack)
	api := swarmtest.Client(t)

	// Between the plan and the first service write, someone removes the
	// network and the config the deploy just created.
	var once sync.Once
	b.hooks = &testHooks{beforeServiceCreate: func(ctx context.Context, _ string) {
		once.Do(func() {
			if _, err := api.NetworkRemove(ctx, stack+"_front", client.NetworkRemoveOptions{}); err != nil {
				t.Errorf("remove network: %v", err)
			}
			cs, err := api.ConfigList(ctx, client.ConfigListOptions{Filters: namespace(stack)})
			if err != nil || len(cs.Items) != 1 {
				t.Errorf("configs: %v %v", cs.Items, err)
				return
			}
			if _, err := api.ConfigRemove(ctx, cs.Items[0].ID, client.ConfigRemoveOptions{}); err != nil {
				t.Errorf("remove config: %v", err)
			}
		})
	}}
	r := render(t, stack, fixture{Replicas: 1})
	res, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets})
	if err != nil {
		t.Fatalf("deploy whose network and config vanished mid-way: %v", err)
	}
	if got := slices.Sorted(slices.Values(res.Created)); !slices.Equal(got, []string{"cache", "web", "worker"}) {
		t.Errorf("created %v, want the three services", got)
	}
	waitRunning(t, b, stack)
}

// TestDeployStack_aNetworkOnlyTheNodeStillListsIsNamedAndNothingIsWritten
// leaves a job's container running on a network, then removes the service
// and the network: the node keeps listing the network, Swarm no longer knows
// it, and neither a service on it nor a new network of its name can be
// created. The deploy must say so before any write, not fail half-way with
// "network … not found"; and once the container is gone, recreate it.
func TestDeployStack_aNetworkOnlyTheNodeStillListsIsNamedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "stale")
	swarmtest.Cleanup(t, stack)
	api := swarmtest.Client(t)

	manifest := fmt.Sprintf(`services:
  job:
    image: %s
    command: ["serve", ":8080"]
    networks: [front]
    deploy:
      mode: replicated-job
  web:
    image: %s
    stop_grace_period: 1s
    networks: [front]
networks:
  front:
    driver: overlay
`, swarmtest.Image, swarmtest.Image)
	r := renderProject(t, stack, manifest)
	if _, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest}); err != nil {
		t.Fatal(err)
	}
	jobContainer := func() string {
		cs, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "com.docker.swarm.service.name="+stack+"_job")})
		if err != nil || len(cs.Items) == 0 {
			return ""
		}
		return cs.Items[0].ID
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		id := jobContainer()
		if id == "" {
			return false, "no job container yet"
		}
		c, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		return err == nil && c.Container.State.Running, "job container not running"
	})
	t.Cleanup(func() {
		if id := jobContainer(); id != "" {
			_, _ = api.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
	})

	// Remove services, then the network, as `docker stack rm` does.
	for _, s := range []string{"_job", "_web"} {
		if _, err := api.ServiceRemove(ctx, stack+s, client.ServiceRemoveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := api.NetworkRemove(ctx, stack+"_front", client.NetworkRemoveOptions{})
		return err == nil, fmt.Sprint("remove network: ", err)
	})
	nets, err := b.listNetworks(ctx, make(client.Filters).Add("name", stack+"_front"))
	if err != nil || len(nets) == 0 || !staleOnNode(nets[0]) {
		t.Skipf("the node did not keep a stale copy of the network this time (listed %d); nothing to test", len(nets))
	}

	stats := b.Stats()
	_, err = b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Heal: []string{stack + "_web"}})
	var stale *StaleNetworkError
	if !errors.As(err, &stale) || stale.Network != stack+"_front" || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("deploy onto a stale network: %v; want a StaleNetworkError naming %s_front", err, stack)
	}
	if d := b.Stats().Sub(stats); d.Writes != 0 {
		t.Errorf("the refused deploy wrote %d objects, want none", d.Writes)
	}
	if live, err := b.LiveServices(ctx, stack); err != nil || len(live) != 0 {
		t.Errorf("services after the refused deploy: %v, %v; want none", live, err)
	}

	// Once the job's container is gone the node lets go of the network,
	// and the same deploy recreates it and the services.
	if _, err := api.ContainerRemove(ctx, jobContainer(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		nets, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", stack+"_front")})
		return err == nil && len(nets.Items) == 0, fmt.Sprintf("network still listed: %d, %v", len(nets.Items), err)
	})
	// Without the job this time: a job that never completes would hold
	// the network again when the test cleans up.
	webOnly := renderProject(t, stack, strings.Replace(manifest, "  job:\n    image: "+swarmtest.Image+"\n    command: [\"serve\", \":8080\"]\n    networks: [front]\n    deploy:\n      mode: replicated-job\n", "", 1))
	res, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: webOnly.Manifest})
	if err != nil || !slices.Equal(res.Created, []string{"web"}) {
		t.Fatalf("deploy once the node dropped the stale network: %v, created %v", err, res.Created)
	}
	if nets, err := b.LiveNetworks(ctx, stack); err != nil || len(nets) != 1 {
		t.Errorf("networks after the deploy: %v, %v; want the stack's one", nets, err)
	}
}
