package drift

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
)

func ptr[T any](v T) *T { return &v }

var netNames = map[string]string{"id-front": "shop_front", "id-back": "shop_back", "id-default": "shop_default"}

// desiredSpec is what docker/cli's convert makes of a busy compose service.
func desiredSpec() swarm.ServiceSpec {
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{
			Name:   "shop_web",
			Labels: map[string]string{"com.docker.stack.namespace": "shop", "com.docker.stack.image": "flotilla-test/app:1", "traefik.enable": "true"},
		},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:    "flotilla-test/app:1",
				Args:     []string{"serve", ":8080"},
				Env:      []string{"A=1", "B=2", "DB_PASSWORD=hunter2"},
				Labels:   map[string]string{"com.docker.stack.namespace": "shop", "tier": "front"},
				Hostname: "web",
				User:     "1000:1000",
				Dir:      "/srv",
				Hosts:    []string{"10.0.0.5 db.internal", "10.0.0.6 cache.internal"},
				DNSConfig: &swarm.DNSConfig{
					Nameservers: []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("8.8.8.8")},
					Search:      []string{"example.com"},
				},
				Healthcheck: &container.HealthConfig{
					Test: []string{"CMD", "/app", "healthcheck"}, Interval: 10 * time.Second,
					Timeout: 3 * time.Second, Retries: 3, StartPeriod: 15 * time.Second,
				},
				Mounts: []mount.Mount{
					{Type: mount.TypeVolume, Source: "shop_data", Target: "/data", VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{"com.docker.stack.namespace": "shop"}}},
					{Type: mount.TypeBind, Source: "/etc/hostname", Target: "/host", ReadOnly: true, Consistency: mount.ConsistencyCached},
					{Type: mount.TypeTmpfs, Target: "/tmp", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 1 << 20}},
				},
				StopGracePeriod: ptr(20 * time.Second),
				StopSignal:      "SIGTERM",
				Secrets: []*swarm.SecretReference{{
					SecretName: "shop_db_password-1a2b", SecretID: "sid1",
					File: &swarm.SecretReferenceFileTarget{Name: "db_password", UID: "1000", GID: "1000", Mode: 0o400},
				}},
				Configs: []*swarm.ConfigReference{{
					ConfigName: "shop_app_conf-3c4d", ConfigID: "cid1",
					File: &swarm.ConfigReferenceFileTarget{Name: "/etc/app.conf", UID: "0", GID: "0", Mode: 0o444},
				}},
				ReadOnly:       true,
				Privileges:     &swarm.Privileges{},
				Init:           ptr(true),
				Sysctls:        map[string]string{"net.core.somaxconn": "1024"},
				CapabilityAdd:  []string{"CAP_NET_ADMIN"},
				CapabilityDrop: []string{"CAP_MKNOD"},
				Ulimits:        []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}, {Name: "nproc", Soft: 512, Hard: 512}},
			},
			LogDriver: &swarm.Driver{Name: "json-file", Options: map[string]string{"max-size": "10m", "max-file": "3"}},
			Resources: &swarm.ResourceRequirements{
				Limits:       &swarm.Limit{NanoCPUs: 500_000_000, MemoryBytes: 64 << 20},
				Reservations: &swarm.Resources{NanoCPUs: 100_000_000, MemoryBytes: 16 << 20},
			},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionOnFailure, Delay: ptr(5 * time.Second), MaxAttempts: ptr(uint64(3)), Window: ptr(time.Minute)},
			Placement: &swarm.Placement{
				Constraints: []string{"node.role==manager", "node.platform.os == linux"},
				Preferences: []swarm.PlacementPreference{{Spread: &swarm.SpreadOver{SpreadDescriptor: "node.id"}}},
				MaxReplicas: 1,
			},
			Networks: []swarm.NetworkAttachmentConfig{
				{Target: "shop_back", Aliases: []string{"web"}},
				{Target: "shop_front", Aliases: []string{"www", "web"}},
			},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: ptr(uint64(1))}},
		UpdateConfig: &swarm.UpdateConfig{Parallelism: 1, Delay: 5 * time.Second, FailureAction: "rollback", Monitor: 10 * time.Second, Order: "start-first"},
		RollbackConfig: &swarm.UpdateConfig{
			Parallelism: 0,
		},
		EndpointSpec: &swarm.EndpointSpec{Ports: []swarm.PortConfig{
			{Protocol: "", TargetPort: 8080, PublishedPort: 18080, PublishMode: swarm.PortConfigPublishModeHost},
			{Protocol: network.TCP, TargetPort: 8081, PublishedPort: 18081, PublishMode: swarm.PortConfigPublishModeIngress},
		}},
	}
}

// liveSpec is desiredSpec as the daemon returns it after a stack deploy,
// with every rewrite observed on a real swarm.
func liveSpec() swarm.ServiceSpec {
	s := desiredSpec()
	rewriteLive(&s)
	return s
}

func rewriteLive(s *swarm.ServiceSpec) {
	c := s.TaskTemplate.ContainerSpec
	if c == nil {
		return
	}
	if s.Labels != nil {
		s.Labels["io.flotilla.revision"] = "7"
	}
	c.Image = "flotilla-test/app:1@sha256:" + strings.Repeat("ab", 32)
	c.Isolation = container.IsolationDefault
	for i := range c.Mounts {
		c.Mounts[i].Consistency = ""
	}
	s.TaskTemplate.Runtime = swarm.RuntimeContainer
	s.TaskTemplate.Networks = []swarm.NetworkAttachmentConfig{
		{Target: "id-front", Aliases: []string{"web", "www"}},
		{Target: "id-back", Aliases: []string{"web"}},
	}
	if s.EndpointSpec != nil {
		s.EndpointSpec.Mode = swarm.ResolutionModeVIP
		for i := range s.EndpointSpec.Ports {
			if s.EndpointSpec.Ports[i].Protocol == "" {
				s.EndpointSpec.Ports[i].Protocol = network.TCP
			}
		}
	}
	for _, u := range []*swarm.UpdateConfig{s.UpdateConfig, s.RollbackConfig} {
		if u != nil && u.FailureAction == "" {
			u.FailureAction = swarm.UpdateFailureActionPause
		}
		if u != nil && u.Order == "" {
			u.Order = swarm.UpdateOrderStopFirst
		}
	}
}

func opts() Options { return Options{NetworkNames: netNames} }

func TestDiff_untouched(t *testing.T) {
	if cs := Diff(desiredSpec(), liveSpec(), opts()); len(cs) != 0 {
		t.Errorf("untouched service drifted: %+v", cs)
	}
}

// Each case rewrites the live spec the way the daemon or the docker client
// does for a spec that means the same; none may be reported.
func TestDiff_normalisations(t *testing.T) {
	tests := []struct {
		name    string
		desired func(*swarm.ServiceSpec)
		live    func(*swarm.ServiceSpec)
	}{
		{name: "digest pinned to the tag", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Image = "flotilla-test/app:1@sha256:" + strings.Repeat("cd", 32)
		}},
		{name: "implicit latest and docker.io/library", desired: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Image = "docker.io/library/nginx"
		}, live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Image = "nginx:latest@sha256:" + strings.Repeat("ef", 32)
		}},
		{name: "env order", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = []string{"DB_PASSWORD=hunter2", "B=2", "A=1"}
		}},
		{name: "env duplicate, last wins", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = append([]string{"A=0"}, s.TaskTemplate.ContainerSpec.Env...)
		}},
		{name: "nil and empty slices and maps", desired: func(s *swarm.ServiceSpec) {
			c := s.TaskTemplate.ContainerSpec
			c.Command, c.Groups, c.Hosts, c.CapabilityAdd, c.Sysctls = []string{}, []string{}, []string{}, []string{}, map[string]string{}
			s.TaskTemplate.Placement.Constraints = []string{}
		}, live: func(s *swarm.ServiceSpec) {
			c := s.TaskTemplate.ContainerSpec
			c.Command, c.Groups, c.Hosts, c.CapabilityAdd, c.Sysctls = nil, nil, nil, nil, nil
			s.TaskTemplate.Placement.Constraints = nil
		}},
		{name: "ordering of lists without meaning", live: func(s *swarm.ServiceSpec) {
			c := s.TaskTemplate.ContainerSpec
			c.Mounts[0], c.Mounts[2] = c.Mounts[2], c.Mounts[0]
			c.Hosts[0], c.Hosts[1] = c.Hosts[1], c.Hosts[0]
			c.Ulimits[0], c.Ulimits[1] = c.Ulimits[1], c.Ulimits[0]
			p := s.EndpointSpec.Ports
			p[0], p[1] = p[1], p[0]
			s.TaskTemplate.Placement.Constraints = []string{"node.platform.os==linux", "node.role == manager"}
			c.Secrets[0], c.Secrets[1] = c.Secrets[1], c.Secrets[0]
		}, desired: func(s *swarm.ServiceSpec) {
			c := s.TaskTemplate.ContainerSpec
			c.Secrets = append(c.Secrets, &swarm.SecretReference{SecretName: "a", File: &swarm.SecretReferenceFileTarget{Name: "a", UID: "0", GID: "0", Mode: 0o444}})
		}},
		{name: "update and rollback defaults written out", desired: func(s *swarm.ServiceSpec) {
			s.UpdateConfig, s.RollbackConfig = nil, nil
		}, live: func(s *swarm.ServiceSpec) {
			def := swarm.UpdateConfig{Parallelism: 1, FailureAction: "pause", Monitor: 5 * time.Second, MaxFailureRatio: 0, Order: "stop-first"}
			s.UpdateConfig, s.RollbackConfig = &def, &def
		}},
		{name: "restart policy defaults written out", desired: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy = nil
		}, live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy = &swarm.RestartPolicy{Condition: "any", Delay: ptr(5 * time.Second), MaxAttempts: ptr(uint64(0))}
		}},
		{name: "restart policy max attempts returned as 0", desired: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy = &swarm.RestartPolicy{Condition: "any"}
		}, live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy = &swarm.RestartPolicy{Condition: "any", MaxAttempts: ptr(uint64(0))}
		}},
		{name: "insertDefaults container fields", desired: func(s *swarm.ServiceSpec) {
			c := s.TaskTemplate.ContainerSpec
			c.StopGracePeriod, c.DNSConfig, c.Privileges = nil, nil, &swarm.Privileges{}
			s.TaskTemplate.Resources, s.TaskTemplate.Placement = nil, nil
		}, live: func(s *swarm.ServiceSpec) {
			c := s.TaskTemplate.ContainerSpec
			c.StopGracePeriod, c.DNSConfig, c.Privileges = ptr(10*time.Second), &swarm.DNSConfig{}, &swarm.Privileges{NoNewPrivileges: false}
			s.TaskTemplate.Resources, s.TaskTemplate.Placement = &swarm.ResourceRequirements{}, &swarm.Placement{}
		}},
		{name: "resources nil and empty", desired: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Resources = &swarm.ResourceRequirements{}
		}, live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Resources = &swarm.ResourceRequirements{Limits: &swarm.Limit{}, Reservations: nil}
		}},
		{name: "endpoint spec absent", desired: func(s *swarm.ServiceSpec) {
			s.EndpointSpec = &swarm.EndpointSpec{}
		}, live: func(s *swarm.ServiceSpec) {
			s.EndpointSpec = nil
		}},
		{name: "replicas unset means one", desired: func(s *swarm.ServiceSpec) {
			s.Mode = swarm.ServiceMode{Replicated: &swarm.ReplicatedService{}}
		}},
		{name: "no mode means replicated", desired: func(s *swarm.ServiceSpec) {
			s.Mode = swarm.ServiceMode{}
		}},
		{name: "replicated job counts", desired: func(s *swarm.ServiceSpec) {
			s.Mode = swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{}}
		}, live: func(s *swarm.ServiceSpec) {
			s.Mode = swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: ptr(uint64(1)), TotalCompletions: ptr(uint64(1))}}
		}},
		{name: "platforms added by digest resolution", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.Platforms = []swarm.Platform{{OS: "linux", Architecture: "amd64"}}
		}},
		{name: "force update", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ForceUpdate = 3
		}},
		{name: "capabilities spelled differently", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.CapabilityAdd = []string{"net_admin"}
		}},
		{name: "secret uid and gid left empty", desired: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Configs[0].File.UID, s.TaskTemplate.ContainerSpec.Configs[0].File.GID = "", ""
		}},
		{name: "secret and config ids", live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Secrets[0].SecretID = "other"
			s.TaskTemplate.ContainerSpec.Configs[0].ConfigID = "other"
		}},
		{name: "empty mount options", live: func(s *swarm.ServiceSpec) {
			m := s.TaskTemplate.ContainerSpec.Mounts
			m[1].BindOptions = &mount.BindOptions{}
			m[0].VolumeOptions.DriverConfig = &mount.Driver{}
		}},
		{name: "flotilla labels and ignored prefixes", live: func(s *swarm.ServiceSpec) {
			s.Labels["io.flotilla.spec-hash"] = "abc"
			s.Labels["ops.note"] = "restarted by hand"
		}},
		{name: "empty log driver", desired: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.LogDriver = nil
		}, live: func(s *swarm.ServiceSpec) {
			s.TaskTemplate.LogDriver = &swarm.Driver{}
		}},
		{name: "nil container spec", desired: func(s *swarm.ServiceSpec) {
			*s = swarm.ServiceSpec{}
		}, live: func(s *swarm.ServiceSpec) {
			*s = swarm.ServiceSpec{TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Isolation: "default"}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, l := desiredSpec(), liveSpec()
			if tt.desired != nil {
				tt.desired(&d)
				tt.desired(&l)
				rewriteLive(&l)
			}
			if tt.live != nil {
				tt.live(&l)
			}
			o := opts()
			o.IgnoreLabels = []string{"ops."}
			if cs := Diff(d, l, o); len(cs) != 0 {
				t.Errorf("reported drift: %+v", cs)
			}
		})
	}
}

// Each case changes one thing in the live spec, as `docker service update`
// would; exactly that field must be reported.
func TestDiff_fields(t *testing.T) {
	c := func(s *swarm.ServiceSpec) *swarm.ContainerSpec { return s.TaskTemplate.ContainerSpec }
	tests := []struct {
		field string
		live  func(*swarm.ServiceSpec)
	}{
		{"image", func(s *swarm.ServiceSpec) { c(s).Image = "flotilla-test/app:2" }},
		{"image", func(s *swarm.ServiceSpec) { c(s).Image = "flotilla-test/app@sha256:" + strings.Repeat("ab", 32) }},
		{"image", func(s *swarm.ServiceSpec) { c(s).Image = "other/app:1" }},
		{"command", func(s *swarm.ServiceSpec) { c(s).Command = []string{"/app"} }},
		{"args", func(s *swarm.ServiceSpec) { c(s).Args = []string{"serve", ":9090"} }},
		{"env.C", func(s *swarm.ServiceSpec) { c(s).Env = append(c(s).Env, "C=3") }},
		{"env.A", func(s *swarm.ServiceSpec) { c(s).Env = c(s).Env[1:] }},
		{"env.B", func(s *swarm.ServiceSpec) { c(s).Env[1] = "B" }},
		{"labels.x", func(s *swarm.ServiceSpec) { s.Labels["x"] = "y" }},
		{"labels.traefik.enable", func(s *swarm.ServiceSpec) { delete(s.Labels, "traefik.enable") }},
		{"containerLabels.tier", func(s *swarm.ServiceSpec) { c(s).Labels["tier"] = "back" }},
		{"replicas", func(s *swarm.ServiceSpec) { s.Mode.Replicated.Replicas = ptr(uint64(0)) }},
		{"mode", func(s *swarm.ServiceSpec) { s.Mode = swarm.ServiceMode{Global: &swarm.GlobalService{}} }},
		{"resources.limits.memory", func(s *swarm.ServiceSpec) { s.TaskTemplate.Resources.Limits.MemoryBytes = 128 << 20 }},
		{"resources.limits.cpus", func(s *swarm.ServiceSpec) { s.TaskTemplate.Resources.Limits.NanoCPUs = 1e9 }},
		{"resources.limits.pids", func(s *swarm.ServiceSpec) { s.TaskTemplate.Resources.Limits.Pids = 100 }},
		{"resources.reservations.cpus", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Resources.Reservations = nil
			s.TaskTemplate.Resources.Limits = nil
			s.TaskTemplate.Resources = &swarm.ResourceRequirements{Limits: &swarm.Limit{NanoCPUs: 500_000_000, MemoryBytes: 64 << 20}, Reservations: &swarm.Resources{MemoryBytes: 16 << 20}}
		}},
		{"resources.reservations.memory", func(s *swarm.ServiceSpec) { s.TaskTemplate.Resources.Reservations.MemoryBytes = 32 << 20 }},
		{"placement.constraints", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.Constraints = append(s.TaskTemplate.Placement.Constraints, "node.labels.zone==a")
		}},
		{"placement.preferences", func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.Preferences = nil }},
		{"placement.maxReplicas", func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.MaxReplicas = 2 }},
		{"networks", func(s *swarm.ServiceSpec) { s.TaskTemplate.Networks = s.TaskTemplate.Networks[:1] }},
		{"networks", func(s *swarm.ServiceSpec) { s.TaskTemplate.Networks[0].Aliases = []string{"web"} }},
		{"networks", func(s *swarm.ServiceSpec) { s.TaskTemplate.Networks[1].Target = "id-unknown" }},
		{"ports", func(s *swarm.ServiceSpec) { s.EndpointSpec.Ports[0].PublishedPort = 18090 }},
		{"ports", func(s *swarm.ServiceSpec) { s.EndpointSpec.Ports[1].PublishMode = swarm.PortConfigPublishModeHost }},
		{"ports", func(s *swarm.ServiceSpec) { s.EndpointSpec.Ports[1].Protocol = network.UDP }},
		{"endpointMode", func(s *swarm.ServiceSpec) { s.EndpointSpec.Mode = swarm.ResolutionModeDNSRR }},
		{"mounts", func(s *swarm.ServiceSpec) { c(s).Mounts[0].ReadOnly = true }},
		{"mounts", func(s *swarm.ServiceSpec) { c(s).Mounts = c(s).Mounts[1:] }},
		{"mounts", func(s *swarm.ServiceSpec) { c(s).Mounts[2].TmpfsOptions.SizeBytes = 2 << 20 }},
		{"secrets", func(s *swarm.ServiceSpec) { c(s).Secrets[0].File.Mode = 0o440 }},
		{"secrets", func(s *swarm.ServiceSpec) { c(s).Secrets[0].File.UID = "0" }},
		{"secrets", func(s *swarm.ServiceSpec) { c(s).Secrets[0].File.Name = "pw" }},
		{"secrets", func(s *swarm.ServiceSpec) { c(s).Secrets = nil }},
		{"configs", func(s *swarm.ServiceSpec) { c(s).Configs[0].ConfigName = "shop_app_conf-ffff" }},
		{"configs", func(s *swarm.ServiceSpec) { c(s).Configs[0].File.GID = "1000" }},
		{"healthcheck", func(s *swarm.ServiceSpec) { c(s).Healthcheck.Interval = 30 * time.Second }},
		{"healthcheck", func(s *swarm.ServiceSpec) { c(s).Healthcheck.StartPeriod = 0 }},
		{"healthcheck", func(s *swarm.ServiceSpec) { c(s).Healthcheck = &container.HealthConfig{Test: []string{"NONE"}} }},
		{"updateConfig.parallelism", func(s *swarm.ServiceSpec) { s.UpdateConfig.Parallelism = 2 }},
		{"updateConfig.delay", func(s *swarm.ServiceSpec) { s.UpdateConfig.Delay = 0 }},
		{"updateConfig.failureAction", func(s *swarm.ServiceSpec) { s.UpdateConfig.FailureAction = "pause" }},
		{"updateConfig.monitor", func(s *swarm.ServiceSpec) { s.UpdateConfig.Monitor = 0 }},
		{"updateConfig.maxFailureRatio", func(s *swarm.ServiceSpec) { s.UpdateConfig.MaxFailureRatio = 0.2 }},
		{"updateConfig.order", func(s *swarm.ServiceSpec) { s.UpdateConfig.Order = "stop-first" }},
		{"rollbackConfig.parallelism", func(s *swarm.ServiceSpec) { s.RollbackConfig.Parallelism = 1 }},
		{"rollbackConfig.order", func(s *swarm.ServiceSpec) { s.RollbackConfig.Order = "start-first" }},
		{"restartPolicy.condition", func(s *swarm.ServiceSpec) { s.TaskTemplate.RestartPolicy.Condition = "any" }},
		{"restartPolicy.delay", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy.Delay = nil
			s.TaskTemplate.RestartPolicy.Delay = ptr(time.Second)
		}},
		{"restartPolicy.maxAttempts", func(s *swarm.ServiceSpec) { s.TaskTemplate.RestartPolicy.MaxAttempts = nil }},
		{"restartPolicy.window", func(s *swarm.ServiceSpec) { s.TaskTemplate.RestartPolicy.Window = nil }},
		{"user", func(s *swarm.ServiceSpec) { c(s).User = "root" }},
		{"groups", func(s *swarm.ServiceSpec) { c(s).Groups = []string{"audio"} }},
		{"workdir", func(s *swarm.ServiceSpec) { c(s).Dir = "/tmp" }},
		{"hostname", func(s *swarm.ServiceSpec) { c(s).Hostname = "other" }},
		{"dns", func(s *swarm.ServiceSpec) {
			c(s).DNSConfig.Nameservers = []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("1.1.1.1")}
		}},
		{"dnsSearch", func(s *swarm.ServiceSpec) { c(s).DNSConfig.Search = nil }},
		{"dnsOptions", func(s *swarm.ServiceSpec) { c(s).DNSConfig.Options = []string{"ndots:2"} }},
		{"hosts", func(s *swarm.ServiceSpec) { c(s).Hosts = append(c(s).Hosts, "10.1.1.1 extra.internal") }},
		{"stopSignal", func(s *swarm.ServiceSpec) { c(s).StopSignal = "SIGINT" }},
		{"stopGracePeriod", func(s *swarm.ServiceSpec) { c(s).StopGracePeriod = nil }},
		{"capabilities.add", func(s *swarm.ServiceSpec) { c(s).CapabilityAdd = append(c(s).CapabilityAdd, "CAP_SYS_TIME") }},
		{"capabilities.drop", func(s *swarm.ServiceSpec) { c(s).CapabilityDrop = nil }},
		{"sysctls.net.core.somaxconn", func(s *swarm.ServiceSpec) { c(s).Sysctls["net.core.somaxconn"] = "4096" }},
		{"ulimits", func(s *swarm.ServiceSpec) { c(s).Ulimits = append(c(s).Ulimits, &container.Ulimit{Name: "core"}) }},
		{"logging", func(s *swarm.ServiceSpec) { s.TaskTemplate.LogDriver.Options["max-size"] = "20m" }},
		{"logging", func(s *swarm.ServiceSpec) { s.TaskTemplate.LogDriver = nil }},
		{"init", func(s *swarm.ServiceSpec) { c(s).Init = ptr(false) }},
		{"init", func(s *swarm.ServiceSpec) { c(s).Init = nil }},
		{"readOnly", func(s *swarm.ServiceSpec) { c(s).ReadOnly = false }},
		{"tty", func(s *swarm.ServiceSpec) { c(s).TTY = true }},
		{"stdinOpen", func(s *swarm.ServiceSpec) { c(s).OpenStdin = true }},
		{"isolation", func(s *swarm.ServiceSpec) { c(s).Isolation = container.IsolationProcess }},
		{"oomScoreAdj", func(s *swarm.ServiceSpec) { c(s).OomScoreAdj = 500 }},
		{"privileges", func(s *swarm.ServiceSpec) { c(s).Privileges.NoNewPrivileges = true }},
		{"placement.platforms", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.Platforms = []swarm.Platform{{OS: "linux", Architecture: "arm64"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			d := desiredSpec()
			if tt.field == "placement.platforms" {
				d.TaskTemplate.Placement.Platforms = []swarm.Platform{{OS: "linux", Architecture: "amd64"}}
			}
			l := liveSpec()
			l.TaskTemplate.Placement.Platforms = d.TaskTemplate.Placement.Platforms
			tt.live(&l)
			cs := Diff(d, l, opts())
			if len(cs) != 1 || cs[0].Field != tt.field {
				t.Fatalf("want exactly one change of %s, got %+v", tt.field, cs)
			}
			if cs[0].Desired == cs[0].Live && !cs[0].Masked {
				t.Errorf("change shows the same value on both sides: %+v", cs[0])
			}
		})
	}
}

func TestDiff_networksUnknown(t *testing.T) {
	l := liveSpec()
	l.TaskTemplate.Networks = l.TaskTemplate.Networks[:1]
	if cs := Diff(desiredSpec(), l, Options{}); len(cs) != 0 {
		t.Errorf("networks compared without names: %+v", cs)
	}
	if cs := Diff(desiredSpec(), liveSpec(), Options{NetworkNames: map[string]string{}}); len(cs) != 1 || !strings.Contains(cs[0].Live, "id-front") {
		t.Errorf("an unknown network id should show as itself: %+v", cs)
	}
}

func TestDiff_masking(t *testing.T) {
	tests := []struct {
		name  string
		field string
		live  func(*swarm.ServiceSpec)
	}{
		{"secret-looking env key", "env.DB_PASSWORD", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Env[2] = "DB_PASSWORD=letmein" }},
		{"lower case key", "env.github_token", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "github_token=ghp_xyz")
		}},
		{"url with a password", "env.DATABASE_URL", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "DATABASE_URL=postgres://app:letmein@db/app")
		}},
		{"label", "labels.basicauth.users", func(s *swarm.ServiceSpec) { s.Labels["basicauth.users"] = "admin:$apr1$letmein" }},
		{"log option", "logging", func(s *swarm.ServiceSpec) { s.TaskTemplate.LogDriver.Options["splunk-token"] = "letmein" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := liveSpec()
			tt.live(&l)
			cs := Diff(desiredSpec(), l, opts())
			if len(cs) != 1 || cs[0].Field != tt.field || !cs[0].Masked {
				t.Fatalf("want one masked change of %s, got %+v", tt.field, cs)
			}
			for _, v := range []string{cs[0].Desired, cs[0].Live} {
				if strings.Contains(v, "letmein") || strings.Contains(v, "hunter2") || strings.Contains(v, "ghp_") {
					t.Errorf("secret value shown: %q", v)
				}
			}
		})
	}

	t.Run("custom pattern", func(t *testing.T) {
		l := liveSpec()
		l.TaskTemplate.ContainerSpec.Env[0] = "A=9"
		cs := Diff(desiredSpec(), l, Options{NetworkNames: netNames, SecretEnvPattern: regexp.MustCompile(`^A$`)})
		if len(cs) != 1 || cs[0].Desired != "***" || cs[0].Live != "***" {
			t.Errorf("custom pattern not applied: %+v", cs)
		}
	})
	t.Run("absence is not masked", func(t *testing.T) {
		l := liveSpec()
		l.TaskTemplate.ContainerSpec.Env = l.TaskTemplate.ContainerSpec.Env[:2]
		cs := Diff(desiredSpec(), l, opts())
		if len(cs) != 1 || cs[0].Desired != "***" || cs[0].Live != none {
			t.Errorf("got %+v", cs)
		}
	})
}

func TestSameImage(t *testing.T) {
	dg := "@sha256:" + strings.Repeat("ab", 32)
	other := "@sha256:" + strings.Repeat("cd", 32)
	tests := []struct {
		desired, live string
		same          bool
	}{
		{"app:1", "app:1", true},
		{"app:1", "app:1" + dg, true},
		{"app", "app:latest", true},
		{"app", "app:latest" + dg, true},
		{"docker.io/library/app:1", "app:1", true},
		{"registry.example.com:5000/team/app:1", "registry.example.com:5000/team/app:1" + dg, true},
		{"app" + dg, "app:1" + dg, true},
		{"app:1" + dg, "app:2" + dg, true},
		{"app:1", "app:2", false},
		{"app:1", "app:2" + dg, false},
		{"app:1", "app" + dg, false},
		{"app" + dg, "app" + other, false},
		{"app:1", "other:1", false},
		{"app:1", "example.com/app:1", false},
		{"App:1", "App:1", true},
		{"not a ref", "app:1", false},
	}
	for _, tt := range tests {
		if got := SameImage(tt.desired, tt.live); got != tt.same {
			t.Errorf("SameImage(%q, %q) = %v, want %v", tt.desired, tt.live, got, tt.same)
		}
	}
}

func TestDiff_modeChangeHidesReplicas(t *testing.T) {
	l := liveSpec()
	l.Mode = swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: ptr(uint64(3)), TotalCompletions: ptr(uint64(3))}}
	cs := Diff(desiredSpec(), l, opts())
	if len(cs) != 1 || cs[0].Field != "mode" || cs[0].Desired != "replicated" || cs[0].Live != "replicated-job" {
		t.Errorf("got %+v", cs)
	}
}

func TestDiff_sortedAndStable(t *testing.T) {
	l := liveSpec()
	l.TaskTemplate.ContainerSpec.User = "root"
	l.Labels["z"] = "1"
	l.TaskTemplate.ContainerSpec.Env = append(l.TaskTemplate.ContainerSpec.Env, "Z=1")
	cs := Diff(desiredSpec(), l, opts())
	var got []string
	for _, c := range cs {
		got = append(got, c.Field)
	}
	if strings.Join(got, " ") != "env.Z labels.z user" {
		t.Errorf("fields = %v", got)
	}
}
