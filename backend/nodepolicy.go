package backend

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
)

// The node policy decides what a service may ask of the node that runs its
// tasks: kernel privileges, node filesystems and devices, node ports,
// drivers and plugins. Compose files and charts both reach it as a
// swarm.ServiceSpec. It is default-deny: every field of the spec is
// classified below, and a field Flotilla does not know (a newer Docker's)
// is refused when set, so a new daemon feature cannot open a hole unseen.

// fieldClass says how the node policy treats one struct field.
type fieldClass int

const (
	// harmless fields cannot reach outside the task's own sandbox (or are
	// checked by the other guards: names, references, labels).
	harmless fieldClass = iota + 1
	// descend fields are structs (or pointers, slices of them) whose own
	// fields are classified in turn.
	descend
	// ruled fields are checked by a rule of nodePolicy itself.
	ruled
)

// nodeFields classifies every field reachable from swarm.ServiceSpec,
// keyed "pkg.Type.Field". TestNodeFields_everyFieldIsClassified fails when
// a Docker upgrade adds one.
var nodeFields = map[string]fieldClass{
	"swarm.ServiceSpec.Annotations":    harmless, // name and labels, guarded by names and reservedLabels
	"swarm.ServiceSpec.TaskTemplate":   descend,
	"swarm.ServiceSpec.Mode":           harmless,
	"swarm.ServiceSpec.UpdateConfig":   harmless,
	"swarm.ServiceSpec.RollbackConfig": harmless,
	"swarm.ServiceSpec.EndpointSpec":   ruled, // host-mode ports

	"swarm.TaskSpec.ContainerSpec":         descend,
	"swarm.TaskSpec.PluginSpec":            ruled, // installs a plugin on the node
	"swarm.TaskSpec.NetworkAttachmentSpec": ruled, // swarm-internal
	"swarm.TaskSpec.Resources":             harmless,
	"swarm.TaskSpec.RestartPolicy":         harmless,
	"swarm.TaskSpec.Placement":             harmless,
	"swarm.TaskSpec.Networks":              harmless, // attachments, guarded by service
	"swarm.TaskSpec.LogDriver":             harmless, // sends output away, reads nothing of the node
	"swarm.TaskSpec.ForceUpdate":           harmless,
	"swarm.TaskSpec.Runtime":               ruled,

	"swarm.ContainerSpec.Image":           harmless,
	"swarm.ContainerSpec.Labels":          harmless,
	"swarm.ContainerSpec.Command":         harmless,
	"swarm.ContainerSpec.Args":            harmless,
	"swarm.ContainerSpec.Hostname":        harmless,
	"swarm.ContainerSpec.Env":             harmless,
	"swarm.ContainerSpec.Dir":             harmless,
	"swarm.ContainerSpec.User":            harmless,
	"swarm.ContainerSpec.Groups":          harmless,
	"swarm.ContainerSpec.Privileges":      descend,
	"swarm.ContainerSpec.Init":            harmless,
	"swarm.ContainerSpec.StopSignal":      harmless,
	"swarm.ContainerSpec.TTY":             harmless,
	"swarm.ContainerSpec.OpenStdin":       harmless,
	"swarm.ContainerSpec.ReadOnly":        harmless,
	"swarm.ContainerSpec.Mounts":          descend,
	"swarm.ContainerSpec.StopGracePeriod": harmless,
	"swarm.ContainerSpec.Healthcheck":     harmless,
	"swarm.ContainerSpec.Hosts":           harmless,
	"swarm.ContainerSpec.DNSConfig":       harmless,
	"swarm.ContainerSpec.Secrets":         harmless, // references, guarded by objects
	"swarm.ContainerSpec.Configs":         harmless, // references, guarded by objects
	"swarm.ContainerSpec.Isolation":       ruled,
	"swarm.ContainerSpec.Sysctls":         ruled,
	"swarm.ContainerSpec.CapabilityAdd":   ruled,
	"swarm.ContainerSpec.CapabilityDrop":  harmless, // dropping only narrows
	"swarm.ContainerSpec.Ulimits":         harmless, // bounds the task's own processes
	"swarm.ContainerSpec.OomScoreAdj":     ruled,

	"swarm.Privileges.CredentialSpec":  ruled,
	"swarm.Privileges.SELinuxContext":  ruled,
	"swarm.Privileges.Seccomp":         ruled,
	"swarm.Privileges.AppArmor":        ruled,
	"swarm.Privileges.NoNewPrivileges": harmless, // true only narrows

	"mount.Mount.Type":           ruled,
	"mount.Mount.Source":         ruled,
	"mount.Mount.Target":         harmless,
	"mount.Mount.ReadOnly":       harmless,
	"mount.Mount.Consistency":    harmless,
	"mount.Mount.BindOptions":    harmless, // the source is what reaches the node, and it is ruled
	"mount.Mount.VolumeOptions":  descend,
	"mount.Mount.ImageOptions":   harmless,
	"mount.Mount.TmpfsOptions":   harmless, // size, mode and flags of a fresh tmpfs
	"mount.Mount.ClusterOptions": ruled,    // CSI volumes

	"mount.VolumeOptions.NoCopy":       harmless,
	"mount.VolumeOptions.Labels":       harmless, // reservedLabels
	"mount.VolumeOptions.Subpath":      harmless, // the daemon keeps it inside the volume
	"mount.VolumeOptions.DriverConfig": ruled,
}

// walkNodeFields refuses, through bad, every set field of v that
// nodeFields does not classify, descending where it says so.
func walkNodeFields(v reflect.Value, path string, bad func(path string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkNodeFields(v.Elem(), path, bad)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walkNodeFields(v.Index(i), path+"["+strconv.Itoa(i)+"]", bad)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			walkNodeFields(it.Value(), path+"["+it.Key().String()+"]", bad)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			fv := v.Field(i)
			p := joinPath(path, f.Name)
			switch nodeFields[t.String()+"."+f.Name] {
			case harmless, ruled:
			case descend:
				walkNodeFields(fv, p, bad)
			default:
				if !fv.IsZero() {
					bad(p)
				}
			}
		}
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// defaultCapabilities is the set Docker grants every container; adding one
// of them changes nothing (a stack may have dropped it with cap_drop ALL).
var defaultCapabilities = map[string]bool{
	"CHOWN": true, "DAC_OVERRIDE": true, "FSETID": true, "FOWNER": true, "MKNOD": true,
	"NET_RAW": true, "SETGID": true, "SETUID": true, "SETFCAP": true, "SETPCAP": true,
	"NET_BIND_SERVICE": true, "SYS_CHROOT": true, "KILL": true, "AUDIT_WRITE": true,
}

// CapabilityName is a capability as Docker reads it: case-insensitive,
// with or without the CAP_ prefix. "ALL" stays "ALL".
func CapabilityName(c string) string {
	c = strings.ToUpper(strings.TrimSpace(c))
	return strings.TrimPrefix(c, "CAP_")
}

// nodePolicy checks what service p's spec asks of the node.
func (g *guardCheck) nodePolicy(p string, spec swarm.ServiceSpec) {
	walkNodeFields(reflect.ValueOf(spec), "", func(field string) {
		g.refuse(p, "field %s is not understood by Flotilla's node policy, so it is refused", field)
	})
	ts := spec.TaskTemplate
	if ts.PluginSpec != nil || ts.NetworkAttachmentSpec != nil {
		g.refuse(p, "plugin and network-attachment tasks install or reach node components; only container services are deployed")
	}
	if rt := strings.ToLower(string(ts.Runtime)); rt != "" && rt != string(swarm.RuntimeContainer) {
		g.refuse(p, "task runtime %q is not allowed; only container services are deployed", ts.Runtime)
	}
	if ts.ContainerSpec != nil {
		g.containerPolicy(p, ts.ContainerSpec)
	}
	if spec.EndpointSpec != nil {
		for i, port := range spec.EndpointSpec.Ports {
			// Without a published port the node picks a free one, which
			// takes nothing another service needs.
			if port.PublishMode == swarm.PortConfigPublishModeHost && port.PublishedPort != 0 && !slices.Contains(g.allow.HostPorts, port.PublishedPort) {
				g.refuse(p+".ports["+strconv.Itoa(i)+"]", "port %d published in host mode binds the node's own port on every node the task runs on; add %d to allow.hostPorts of the application to permit it",
					port.PublishedPort, port.PublishedPort)
			}
		}
	}
}

func (g *guardCheck) containerPolicy(p string, cs *swarm.ContainerSpec) {
	for _, c := range cs.CapabilityAdd {
		name := CapabilityName(c)
		switch {
		case name == "ALL":
			if !slices.Contains(g.allow.Capabilities, "ALL") {
				g.refuse(p+".cap_add", "cap_add ALL grants every capability, which is root on the node; only allow.capabilities listing ALL itself permits it")
			}
		case defaultCapabilities[name]:
		case !slices.Contains(g.allow.Capabilities, name):
			g.refuse(p+".cap_add", "capability %s is beyond Docker's default set and reaches the node's kernel; add %s to allow.capabilities of the application to grant it", c, name)
		}
	}
	for _, k := range sortedKeys(cs.Sysctls) {
		if !slices.Contains(g.allow.Sysctls, SysctlName(k)) {
			g.refuse(p+".sysctls", "sysctl %s tunes the kernel; add %s to allow.sysctls of the application to set it", k, SysctlName(k))
		}
	}
	if cs.OomScoreAdj < 0 {
		g.refuse(p+".oom_score_adj", "oom_score_adj %d would make the kernel kill node processes (the Docker daemon among them) before this task; only values of 0 or more are deployed", cs.OomScoreAdj)
	}
	switch strings.ToLower(string(cs.Isolation)) {
	case "", "default", "hyperv":
	default:
		g.refuse(p+".isolation", "isolation %q weakens the task's separation from the node; only default and hyperv are deployed", cs.Isolation)
	}
	if pr := cs.Privileges; pr != nil {
		if cr := pr.CredentialSpec; cr != nil && (cr.File != "" || cr.Registry != "") {
			g.refuse(p+".credential_spec", "a credential spec read from the node's files or registry is not allowed; use credential_spec.config with a config of the stack")
		}
		if pr.SELinuxContext != nil {
			g.refuse(p+".security_opt", "an SELinux context override can lift the task's confinement; it is not deployed")
		}
		if s := pr.Seccomp; s != nil && s.Mode != "" && s.Mode != swarm.SeccompModeDefault {
			g.refuse(p+".security_opt", "seccomp mode %q lifts the default syscall filter; it is not deployed", s.Mode)
		}
		if a := pr.AppArmor; a != nil && a.Mode != "" && a.Mode != swarm.AppArmorModeDefault {
			g.refuse(p+".security_opt", "AppArmor mode %q lifts the task's confinement; it is not deployed", a.Mode)
		}
	}
	for i, m := range cs.Mounts {
		if m.ClusterOptions != nil {
			g.refuse(p+".volumes["+strconv.Itoa(i)+"]", "cluster (CSI) volumes are not deployed")
		}
	}
}

// SysctlName is a sysctl key as the kernel reads it: "/" and "." both
// separate components.
func SysctlName(k string) string {
	return strings.ReplaceAll(strings.TrimSpace(k), "/", ".")
}

// remoteFilesystems are local-driver volume types whose device is a remote
// address, not a path on the node.
var remoteFilesystems = map[string]bool{"nfs": true, "nfs4": true, "cifs": true, "smb3": true}

// pathFilesystems are local-driver volume types whose device (and, for
// overlay, the directories in o) are node paths; allow.hostPaths must cover
// every one. Any type not here, tmpfs or remote is refused: procfs, sysfs,
// cgroup and the like show the node itself whatever the device says.
var pathFilesystems = map[string]bool{
	"": true, "none": true, "overlay": true,
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true,
	"vfat": true, "exfat": true, "ntfs": true, "ntfs3": true, "f2fs": true,
	"iso9660": true, "squashfs": true,
}

// localVolumeKeys are the driver options Docker's local driver reads.
var localVolumeKeys = map[string]bool{"type": true, "device": true, "o": true, "size": true}

// overlayDirKeys name node directories in an overlay mount's o.
var overlayDirKeys = map[string]bool{"lowerdir": true, "upperdir": true, "workdir": true, "datadir": true}

// volumeDevice checks a volume mount's driver. A driver other than local
// runs node code of the operator's choosing and needs allow.volumeDrivers.
// The local driver hands type, device and o to mount(2), so a volume that
// names node paths there is the bind mount it really is: every path needs
// allow.hostPaths, and a relative one is refused (the daemon resolves it
// against its own working directory).
func (g *guardCheck) volumeDevice(field string, m mount.Mount) {
	if m.VolumeOptions == nil || m.VolumeOptions.DriverConfig == nil {
		return
	}
	dc := m.VolumeOptions.DriverConfig
	what := "volume " + strconv.Quote(m.Source)
	if dc.Name != "" && dc.Name != "local" {
		if !slices.Contains(g.allow.VolumeDrivers, dc.Name) {
			g.refuse(field, "%s uses volume driver %q, which runs on the node; add it to allow.volumeDrivers of the application to use it", what, dc.Name)
		}
		return
	}
	opts := map[string]string{}
	for _, k := range sortedKeys(dc.Options) {
		lk := strings.ToLower(strings.TrimSpace(k))
		if !localVolumeKeys[lk] {
			g.refuse(field, "%s: driver option %q is not understood by Flotilla's node policy", what, k)
			continue
		}
		if _, dup := opts[lk]; dup {
			g.refuse(field, "%s: driver option %q is given twice", what, lk)
		}
		opts[lk] = dc.Options[k]
	}
	fsType := strings.ToLower(strings.TrimSpace(opts["type"]))
	device := strings.TrimSpace(opts["device"])
	bind := false
	var dirs []string // node paths named in o
	for _, o := range strings.Split(opts["o"], ",") {
		o = strings.TrimSpace(o)
		key, val, hasVal := strings.Cut(o, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		switch {
		case key == "bind" || key == "rbind":
			bind = true
		case key == "move" || key == "remount":
			g.refuse(field, "%s: mount option %q acts on existing node mounts; it is not deployed", what, key)
		case hasVal && (overlayDirKeys[key] || strings.ContainsAny(val, "/")):
			dirs = append(dirs, strings.Split(val, ":")...)
		}
	}
	switch {
	case fsType == "tmpfs" || remoteFilesystems[fsType]:
		if bind {
			g.refuse(field, "%s: type %s with a bind option mounts a node path; it is not deployed", what, fsType)
		}
		return
	case !pathFilesystems[fsType]:
		g.refuse(field, "%s: filesystem type %q is not understood by Flotilla's node policy; tmpfs, nfs/cifs and bind, overlay or block filesystems under allow.hostPaths are deployed", what, opts["type"])
		return
	}
	if device != "" && (bind || fsType != "overlay") {
		verb := " mounts device"
		if bind {
			verb = " binds"
		}
		g.hostPath(field, what+verb, device)
	}
	for _, d := range dirs {
		g.hostPath(field, what+" mounts directory", d)
	}
}

// nodeObjects checks what the stack's own objects ask of the nodes:
// network drivers other than overlay (bridge, macvlan, ipvlan reach the
// node's own networks) and non-default IPAM drivers, and config or secret
// drivers and templating (a template reads other secrets and configs of the
// swarm, a secret driver is a node plugin).
func (g *guardCheck) nodeObjects() {
	d := g.decl
	for _, name := range sortedKeys(d.Networks) {
		n := d.Networks[name]
		field := g.keys.field("networks", name)
		if drv := n.Driver; drv != "" && drv != "overlay" && !slices.Contains(g.allow.NetworkDrivers, drv) {
			g.refuse(field, "network %q uses driver %q, which reaches the node's own network; add it to allow.networkDrivers of the application to use it", name, drv)
		}
		if n.IPAM != nil && n.IPAM.Driver != "" && n.IPAM.Driver != "default" && !slices.Contains(g.allow.NetworkDrivers, n.IPAM.Driver) {
			g.refuse(field+".ipam", "network %q uses IPAM driver %q; add it to allow.networkDrivers of the application to use it", name, n.IPAM.Driver)
		}
		if n.ConfigFrom != "" || n.Ingress {
			g.refuse(field, "network %q takes its configuration from another network or replaces the ingress network; neither is deployed", name)
		}
	}
	for _, name := range sortedKeys(d.Configs) {
		g.templating(g.keys.field("configs", name), "config", name, d.Configs[name].Templating)
	}
	for _, name := range sortedKeys(d.Secrets) {
		s := d.Secrets[name]
		field := g.keys.field("secrets", name)
		g.templating(field, "secret", name, s.Templating)
		if s.Driver != nil && s.Driver.Name != "" {
			g.refuse(field, "secret %q uses secret driver %q, a plugin on the node; secret drivers are not deployed", name, s.Driver.Name)
		}
	}
}

func (g *guardCheck) templating(field, kind, name string, t *swarm.Driver) {
	if t == nil || t.Name == "" || slices.Contains(g.allow.TemplateDrivers, t.Name) {
		return
	}
	g.refuse(field, "%s %q uses template driver %q, whose templates can read the swarm's other secrets and configs; add it to allow.templateDrivers of the application to use it", kind, name, t.Name)
}
