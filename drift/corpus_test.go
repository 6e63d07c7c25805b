package drift_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }

const corpusDir = "testdata/corpus"

// deployed is one corpus project running on the swarm.
type deployed struct {
	stack    string
	manifest string
	b        *backend.Backend
}

// deployCorpus renders and deploys one corpus project into a fresh stack
// that is removed, named volumes included, when the test ends.
func deployCorpus(t *testing.T, ctx context.Context, dir string) deployed {
	t.Helper()
	stack := swarmtest.Name(t, "dc"+strings.SplitN(dir, "-", 2)[0])
	// Registered first so it runs last: volumes can go only after the
	// services that mount them.
	t.Cleanup(func() { removeVolumes(t, stack) })
	swarmtest.Cleanup(t, stack)

	root, err := filepath.Abs(filepath.Join(corpusDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render(stack, compose.Dir{Root: root, Path: ".", Files: []string{"docker-compose.yml"}})
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	b, err := backend.New(ctx, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The corpus binds a few host paths on purpose (a node agent reads
	// /proc); the backend refuses any bind that is not allowed.
	allowed := b.WithAllowedReferences(application.Allow{
		HostPaths: []string{"/etc/hostname", "/proc"},
		// What the corpus asks of the node, granted as an application would.
		Capabilities: []string{"SYS_TIME", "NET_ADMIN"},
		Sysctls:      []string{"net.core.somaxconn", "net.ipv4.tcp_syncookies"},
		HostPorts:    []uint32{18201, 18202, 18630, 18631, 18701, 18901},
	})
	if _, err := allowed.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets}); err != nil {
		t.Fatalf("deploy %s: %v", dir, err)
	}
	return deployed{stack: stack, manifest: r.Manifest, b: b}
}

// diffAll compares every desired service with its live spec, both as a
// service list returns it and as an inspect with insertDefaults does (what
// `docker service inspect` shows), and returns the changes by service.
func diffAll(t *testing.T, ctx context.Context, d deployed) map[string][]drift.Change {
	t.Helper()
	desired, err := d.b.DesiredServices(ctx, d.manifest, d.stack)
	if err != nil {
		t.Fatal(err)
	}
	live, err := d.b.LiveServices(ctx, d.stack)
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.b.LiveNetworkNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.Options{NetworkNames: names}
	out := map[string][]drift.Change{}
	for name, spec := range desired.Services {
		svc, ok := live[name]
		if !ok {
			t.Errorf("%s: not on the swarm after deploy", name)
			continue
		}
		out[name] = append(out[name], drift.Diff(spec, svc.Spec, opts)...)
		full, err := swarmtest.Client(t).ServiceInspect(ctx, svc.ID, client.ServiceInspectOptions{InsertDefaults: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range drift.Diff(spec, full.Service.Spec, opts) {
			c.Field += " (insertDefaults)"
			out[name] = append(out[name], c)
		}
	}
	return out
}

func removeVolumes(t *testing.T, stack string) {
	c := swarmtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := make(client.Filters).Add("label", "com.docker.stack.namespace="+stack)
	for range 40 {
		vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: args})
		if err != nil || len(vols.Items) == 0 {
			return
		}
		for _, v := range vols.Items {
			_, _ = c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{})
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("volumes of %s still present", stack)
}

// Every corpus project, deployed untouched, must report no drift at all.
func TestUntouchedCorpusStacksReportNoDrift(t *testing.T) {
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 15 {
		t.Fatalf("corpus holds %d projects, want at least 15", len(entries))
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			d := deployCorpus(t, ctx, e.Name())
			for svc, cs := range diffAll(t, ctx, d) {
				for _, c := range cs {
					t.Errorf("%s: false drift in %s: desired %q, live %q", svc, c.Field, c.Desired, c.Live)
				}
			}
		})
	}
}

// A service changed behind the controller's back, one field family at a
// time, the way `docker service update` does it (read, modify, write with
// the version read), reports exactly that field.
func TestLiveChangeReportsExactlyThatField(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := deployCorpus(t, ctx, "19-full-stack")
	web := d.stack + "_web"
	api := swarmtest.Client(t)

	tests := []struct {
		field  string
		change func(s *swarm.ServiceSpec)
	}{
		{"image", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = swarmtest.Image2 }},
		{"args", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Args = []string{"serve", ":3001"} }},
		{"command", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Command = []string{"/app"} }},
		{"env.EXTRA", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "EXTRA=1")
		}},
		{"labels.ops.note", func(s *swarm.ServiceSpec) { s.Labels["ops.note"] = "changed by hand" }},
		{"containerLabels.debug", func(s *swarm.ServiceSpec) {
			if s.TaskTemplate.ContainerSpec.Labels == nil {
				s.TaskTemplate.ContainerSpec.Labels = map[string]string{}
			}
			s.TaskTemplate.ContainerSpec.Labels["debug"] = "1"
		}},
		{"replicas", func(s *swarm.ServiceSpec) { n := uint64(0); s.Mode.Replicated.Replicas = &n }},
		{"resources.limits.memory", func(s *swarm.ServiceSpec) { s.TaskTemplate.Resources.Limits.MemoryBytes = 256 << 20 }},
		{"placement.constraints", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.Constraints = append(s.TaskTemplate.Placement.Constraints, "node.platform.os==linux")
		}},
		{"placement.maxReplicas", func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.MaxReplicas = 3 }},
		{"networks", func(s *swarm.ServiceSpec) { s.TaskTemplate.Networks = s.TaskTemplate.Networks[:1] }},
		{"ports", func(s *swarm.ServiceSpec) {
			s.EndpointSpec.Ports = append(s.EndpointSpec.Ports, swarm.PortConfig{TargetPort: 3000, PublishedPort: 18950, PublishMode: swarm.PortConfigPublishModeHost})
		}},
		{"mounts", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Mounts = append(s.TaskTemplate.ContainerSpec.Mounts, mount.Mount{Type: mount.TypeTmpfs, Target: "/cache"})
		}},
		{"secrets", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Secrets[0].File.Mode = 0o400 }},
		{"healthcheck", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Healthcheck.Interval = time.Minute }},
		{"updateConfig.parallelism", func(s *swarm.ServiceSpec) { s.UpdateConfig.Parallelism = 2 }},
		{"rollbackConfig.order", func(s *swarm.ServiceSpec) { s.RollbackConfig.Order = swarm.UpdateOrderStartFirst }},
		{"restartPolicy.condition", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy = &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionOnFailure}
		}},
		{"user", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.User = "65534" }},
		{"workdir", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Dir = "/tmp" }},
		{"hostname", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Hostname = "web-by-hand" }},
		{"dns", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.DNSConfig = &swarm.DNSConfig{Nameservers: []netip.Addr{netip.MustParseAddr("9.9.9.9")}}
		}},
		{"hosts", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Hosts = append(s.TaskTemplate.ContainerSpec.Hosts, "10.0.0.9 extra.internal")
		}},
		{"stopSignal", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.StopSignal = "SIGQUIT" }},
		{"stopGracePeriod", func(s *swarm.ServiceSpec) { g := time.Minute; s.TaskTemplate.ContainerSpec.StopGracePeriod = &g }},
		{"capabilities.add", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.CapabilityAdd = []string{"CAP_SYS_TIME"} }},
		{"sysctls.net.core.somaxconn", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Sysctls = map[string]string{"net.core.somaxconn": "512"}
		}},
		{"ulimits", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Ulimits = []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}}
		}},
		{"logging", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.LogDriver = &swarm.Driver{Name: "json-file", Options: map[string]string{"max-size": "1m"}}
		}},
		{"init", func(s *swarm.ServiceSpec) { b := true; s.TaskTemplate.ContainerSpec.Init = &b }},
		{"readOnly", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.ReadOnly = true }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			before, err := api.ServiceInspect(ctx, web, client.ServiceInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := updateService(ctx, api, web, func(s *swarm.ServiceSpec) { *s = copySpec(t, before.Service.Spec) }); err != nil {
					t.Errorf("restore %s: %v", web, err)
				}
			})
			if err := updateService(ctx, api, web, tt.change); err != nil {
				t.Fatalf("update: %v", err)
			}

			changes := diffAll(t, ctx, d)
			for svc, cs := range changes {
				if svc != web && len(cs) > 0 {
					t.Errorf("%s drifted too: %+v", svc, cs)
				}
			}
			got := changes[web]
			if len(got) != 2 || got[0].Field != tt.field || got[1].Field != tt.field+" (insertDefaults)" {
				t.Fatalf("want exactly %s (from both reads), got %+v", tt.field, got)
			}
		})
	}
}

// updateService changes a service as `docker service update` does: read it,
// change the spec, write it back with the version read. Swarm's updater
// bumps the version as it records progress, so a write that lost that race
// is retried from a fresh read.
func updateService(ctx context.Context, api *client.Client, name string, change func(*swarm.ServiceSpec)) error {
	var err error
	for range 50 {
		var svc client.ServiceInspectResult
		svc, err = api.ServiceInspect(ctx, name, client.ServiceInspectOptions{})
		if err != nil {
			return err
		}
		spec := svc.Service.Spec
		b, _ := json.Marshal(spec)
		spec = swarm.ServiceSpec{}
		if err := json.Unmarshal(b, &spec); err != nil {
			return err
		}
		change(&spec)
		_, err = api.ServiceUpdate(ctx, svc.Service.ID, client.ServiceUpdateOptions{Version: svc.Service.Version, Spec: spec})
		if err == nil || !strings.Contains(err.Error(), "out of sequence") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// copySpec deep-copies a spec so a change to it cannot reach the original.
func copySpec(t *testing.T, s swarm.ServiceSpec) swarm.ServiceSpec {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out swarm.ServiceSpec
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
