package backend

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
)

// Every field reachable from a ServiceSpec is classified, and every entry
// of the table names a field that exists: a Docker upgrade that adds a
// field fails here instead of passing the node policy unseen.
func TestNodeFields_everyFieldIsClassified(t *testing.T) {
	reached := map[string]bool{}
	var walk func(rt reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Array || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < rt.NumField(); i++ {
			key := rt.String() + "." + rt.Field(i).Name
			reached[key] = true
			switch nodeFields[key] {
			case descend:
				walk(rt.Field(i).Type)
			case harmless, ruled:
			default:
				t.Errorf("field %s is not classified in nodeFields", key)
			}
		}
	}
	walk(reflect.TypeOf(swarm.ServiceSpec{}))
	for key := range nodeFields {
		if !reached[key] {
			t.Errorf("nodeFields classifies %s, which a ServiceSpec does not reach", key)
		}
	}
}

// A field the table does not know is refused when set, whatever its type.
func TestWalkNodeFields_refusesUnknownSetFields(t *testing.T) {
	type inner struct{ Known, Unknown string }
	type outer struct {
		In  *inner
		Off []inner
	}
	saved := nodeFields
	t.Cleanup(func() { nodeFields = saved })
	nodeFields = map[string]fieldClass{
		"backend.outer.In": descend, "backend.outer.Off": descend, "backend.inner.Known": harmless,
	}
	var bad []string
	walkNodeFields(reflect.ValueOf(outer{In: &inner{Known: "x"}, Off: []inner{{}, {Unknown: "y"}}}), "", func(p string) { bad = append(bad, p) })
	if strings.Join(bad, ",") != "Off[1].Unknown" {
		t.Fatalf("refused %q, want Off[1].Unknown", bad)
	}
}

func nodeGuard(allow application.Allow) *guardCheck {
	b := (&Backend{}).WithAllowedReferences(allow).(*Backend)
	return &guardCheck{stack: "np", allow: b.allow, decl: &compose.Stack{}, keys: manifestKeys{}}
}

// checkService runs the node policy and the mount checks of service on spec.
func checkService(allow application.Allow, spec swarm.ServiceSpec) error {
	g := nodeGuard(allow)
	g.nodePolicy("services.web", spec)
	if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
		for _, m := range cs.Mounts {
			if m.Type == mount.TypeVolume {
				g.volumeDevice("services.web.volumes[0]", m)
			}
		}
	}
	return errors.Join(g.faults...)
}

func withContainer(cs swarm.ContainerSpec) swarm.ServiceSpec {
	cs.Image = "app:1"
	return swarm.ServiceSpec{TaskTemplate: swarm.TaskSpec{ContainerSpec: &cs}}
}

func localVolume(opts map[string]string) swarm.ServiceSpec {
	return withContainer(swarm.ContainerSpec{Mounts: []mount.Mount{{
		Type: mount.TypeVolume, Source: "np_data", Target: "/data",
		VolumeOptions: &mount.VolumeOptions{DriverConfig: &mount.Driver{Name: "local", Options: opts}},
	}}})
}

func TestNodePolicy_decisions(t *testing.T) {
	t.Parallel()
	none := application.Allow{}
	hostMode := func(published uint32) swarm.ServiceSpec {
		s := withContainer(swarm.ContainerSpec{})
		s.EndpointSpec = &swarm.EndpointSpec{Ports: []swarm.PortConfig{{TargetPort: 80, PublishedPort: published, PublishMode: swarm.PortConfigPublishModeHost}}}
		return s
	}
	for _, tt := range []struct {
		name  string
		spec  swarm.ServiceSpec
		allow application.Allow
		words []string // nil: allowed
	}{
		{name: "plain service", spec: withContainer(swarm.ContainerSpec{})},
		{name: "default capability", spec: withContainer(swarm.ContainerSpec{CapabilityAdd: []string{"cap_chown", "NET_BIND_SERVICE"}})},
		{name: "cap_drop ALL", spec: withContainer(swarm.ContainerSpec{CapabilityDrop: []string{"ALL"}})},
		{name: "SYS_ADMIN lowercase with prefix", spec: withContainer(swarm.ContainerSpec{CapabilityAdd: []string{"cap_sys_admin"}}),
			words: []string{"cap_sys_admin", "SYS_ADMIN", "allow.capabilities"}},
		{name: "SYS_ADMIN allowed in another spelling", spec: withContainer(swarm.ContainerSpec{CapabilityAdd: []string{"Sys_Admin"}}),
			allow: application.Allow{Capabilities: []string{"CAP_SYS_ADMIN"}}},
		{name: "ALL", spec: withContainer(swarm.ContainerSpec{CapabilityAdd: []string{"all"}}),
			allow: application.Allow{Capabilities: []string{"SYS_ADMIN", "SYS_MODULE"}}, words: []string{"ALL"}},
		{name: "ALL listed", spec: withContainer(swarm.ContainerSpec{CapabilityAdd: []string{"ALL"}}),
			allow: application.Allow{Capabilities: []string{"ALL"}}},
		{name: "sysctl", spec: withContainer(swarm.ContainerSpec{Sysctls: map[string]string{"net/ipv4/ip_forward": "1"}}),
			words: []string{"net.ipv4.ip_forward", "allow.sysctls"}},
		{name: "sysctl allowed", spec: withContainer(swarm.ContainerSpec{Sysctls: map[string]string{"net.ipv4.ip_forward": "1"}}),
			allow: application.Allow{Sysctls: []string{"net/ipv4/ip_forward"}}},
		{name: "oom_score_adj below zero", spec: withContainer(swarm.ContainerSpec{OomScoreAdj: -1000}), words: []string{"oom_score_adj", "-1000"}},
		{name: "oom_score_adj above zero", spec: withContainer(swarm.ContainerSpec{OomScoreAdj: 500})},
		{name: "seccomp unconfined", spec: withContainer(swarm.ContainerSpec{Privileges: &swarm.Privileges{Seccomp: &swarm.SeccompOpts{Mode: swarm.SeccompModeUnconfined}}}),
			words: []string{"seccomp"}},
		{name: "apparmor disabled", spec: withContainer(swarm.ContainerSpec{Privileges: &swarm.Privileges{AppArmor: &swarm.AppArmorOpts{Mode: swarm.AppArmorModeDisabled}}}),
			words: []string{"AppArmor"}},
		{name: "selinux type", spec: withContainer(swarm.ContainerSpec{Privileges: &swarm.Privileges{SELinuxContext: &swarm.SELinuxContext{Type: "spc_t"}}}),
			words: []string{"SELinux"}},
		{name: "credential spec file", spec: withContainer(swarm.ContainerSpec{Privileges: &swarm.Privileges{CredentialSpec: &swarm.CredentialSpec{File: "x.json"}}}),
			words: []string{"credential spec"}},
		{name: "credential spec config", spec: withContainer(swarm.ContainerSpec{Privileges: &swarm.Privileges{CredentialSpec: &swarm.CredentialSpec{Config: "cfg"}, NoNewPrivileges: true}})},
		{name: "process isolation", spec: withContainer(swarm.ContainerSpec{Isolation: "process"}), words: []string{"isolation"}},
		{name: "plugin task", spec: swarm.ServiceSpec{TaskTemplate: swarm.TaskSpec{Runtime: swarm.RuntimePlugin}}, words: []string{"runtime"}},
		{name: "host port", spec: hostMode(22), words: []string{"22", "allow.hostPorts"}},
		{name: "host port allowed", spec: hostMode(443), allow: application.Allow{HostPorts: []uint32{443}}},
		{name: "host port picked by the node", spec: hostMode(0)},

		{name: "tmpfs volume", spec: localVolume(map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=100m"})},
		{name: "nfs volume", spec: localVolume(map[string]string{"type": "nfs", "device": ":/export", "o": "addr=10.0.0.1,nfsvers=4"})},
		{name: "nfs with bind", spec: localVolume(map[string]string{"type": "nfs", "device": "/etc", "o": "addr=10.0.0.1,rbind"}), words: []string{"bind"}},
		{name: "overlay lowerdir last", spec: localVolume(map[string]string{"TYPE": "Overlay", "device": "overlay", "o": "workdir=/tmp/w,upperdir=/tmp/u,lowerdir=/var/lib/docker/swarm:/etc"}),
			words: []string{"/var/lib/docker/swarm", "allow.hostPaths"}},
		{name: "overlay relative lowerdir", spec: localVolume(map[string]string{"type": "overlay", "device": "overlay", "o": "LowerDir=etc"}),
			allow: application.Allow{HostPaths: []string{"/"}}, words: []string{"etc", "absolute"}},
		{name: "overlay under allowed paths", spec: localVolume(map[string]string{"type": "overlay", "device": "overlay", "o": "lowerdir=/srv/a:/srv/b,upperdir=/srv/u,workdir=/srv/w"}),
			allow: application.Allow{HostPaths: []string{"/srv"}}},
		{name: "relative block device", spec: localVolume(map[string]string{"type": "ext4", "device": "dev/sda1"}),
			allow: application.Allow{HostPaths: []string{"/"}}, words: []string{"dev/sda1", "absolute"}},
		{name: "absolute block device", spec: localVolume(map[string]string{"type": "xfs", "device": "/dev/sda1"}), words: []string{"/dev/sda1"}},
		{name: "block device allowed", spec: localVolume(map[string]string{"type": "ext4", "device": "/dev/sdb1"}), allow: application.Allow{HostPaths: []string{"/dev/sdb1"}}},
		{name: "device key in capitals", spec: localVolume(map[string]string{"type": "none", "Device": "/etc", "o": "BIND"}), words: []string{"/etc"}},
		{name: "procfs", spec: localVolume(map[string]string{"type": "proc", "device": "/srv"}), allow: application.Allow{HostPaths: []string{"/srv"}},
			words: []string{"proc", "not understood"}},
		{name: "move option", spec: localVolume(map[string]string{"type": "none", "device": "/srv/x", "o": "move"}), allow: application.Allow{HostPaths: []string{"/srv"}},
			words: []string{"move"}},
		{name: "unknown driver option", spec: localVolume(map[string]string{"mountpoint": "/etc"}), words: []string{"mountpoint", "not understood"}},
		{name: "non-local driver", spec: withContainer(swarm.ContainerSpec{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: "v", Target: "/v",
			VolumeOptions: &mount.VolumeOptions{DriverConfig: &mount.Driver{Name: "rexray/dobs"}}}}}), words: []string{"rexray/dobs", "allow.volumeDrivers"}},
		{name: "non-local driver allowed", spec: withContainer(swarm.ContainerSpec{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: "v", Target: "/v",
			VolumeOptions: &mount.VolumeOptions{DriverConfig: &mount.Driver{Name: "rexray/dobs"}}}}}), allow: application.Allow{VolumeDrivers: []string{"rexray/dobs"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkService(tt.allow, tt.spec)
			if tt.words == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("allowed, want refused naming %q", tt.words)
			}
			for _, w := range tt.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not name %q", err, w)
				}
			}
			if none := checkService(none, tt.spec); none == nil {
				t.Errorf("refused with %+v but allowed with nothing", tt.allow)
			}
		})
	}
}

func TestNodeObjects_driversAndTemplates(t *testing.T) {
	t.Parallel()
	g := nodeGuard(application.Allow{})
	g.decl.Networks = map[string]client.NetworkCreateOptions{"np_lan": {Driver: "macvlan", Options: map[string]string{"parent": "eth0"}}, "np_front": {Driver: "overlay"}}
	g.decl.Configs = map[string]swarm.ConfigSpec{"np_tmpl": {Templating: &swarm.Driver{Name: "golang"}}}
	g.decl.Secrets = map[string]swarm.SecretSpec{"np_s": {Driver: &swarm.Driver{Name: "vault"}}}
	g.nodeObjects()
	err := errors.Join(g.faults...)
	for _, w := range []string{"macvlan", "allow.networkDrivers", "golang", "allow.templateDrivers", "vault"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %v does not name %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "np_front") {
		t.Errorf("overlay network refused: %v", err)
	}

	g = nodeGuard(application.Allow{NetworkDrivers: []string{"macvlan"}, TemplateDrivers: []string{"golang"}})
	g.decl.Networks = map[string]client.NetworkCreateOptions{"np_lan": {Driver: "macvlan"}}
	g.decl.Configs = map[string]swarm.ConfigSpec{"np_tmpl": {Templating: &swarm.Driver{Name: "golang"}}}
	g.nodeObjects()
	if err := errors.Join(g.faults...); err != nil {
		t.Fatalf("allowed drivers refused: %v", err)
	}
}

// FuzzNodePolicy feeds arbitrary specs to the node policy: it never
// panics, each refusal is a *fault.Error naming the service's field, and
// a spec refused with the empty allowlist is still refused after the JSON
// round trip the daemon's API makes of it.
func FuzzNodePolicy(f *testing.F) {
	for _, s := range []swarm.ServiceSpec{
		withContainer(swarm.ContainerSpec{CapabilityAdd: []string{"ALL"}}),
		withContainer(swarm.ContainerSpec{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}, OomScoreAdj: -5}),
		localVolume(map[string]string{"type": "overlay", "o": "lowerdir=/etc"}),
		localVolume(map[string]string{"type": "ext4", "device": "dev/sda1"}),
		localVolume(map[string]string{"type": "tmpfs"}),
	} {
		data, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"TaskTemplate":{"ContainerSpec":{"Mounts":[{"Type":"volume","VolumeOptions":{"DriverConfig":{"Options":{"o":"lowerdir=a:b,,=,"}}}}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec swarm.ServiceSpec
		if json.Unmarshal(data, &spec) != nil {
			return
		}
		err := checkService(application.Allow{}, spec)
		if err == nil {
			return
		}
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *fault.Error
			if !errors.As(e, &fe) || !strings.HasPrefix(fe.Field, "services.web") {
				t.Fatalf("refusal %v is not a *fault.Error naming the service's field", e)
			}
		}
		again, merr := json.Marshal(spec)
		if merr != nil {
			return
		}
		var round swarm.ServiceSpec
		if uerr := json.Unmarshal(again, &round); uerr != nil {
			t.Fatalf("round trip: %v", uerr)
		}
		if checkService(application.Allow{}, round) == nil {
			t.Fatalf("refused (%v) but allowed after a JSON round trip: %s", err, again)
		}
	})
}
