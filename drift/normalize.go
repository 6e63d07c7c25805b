package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
)

// Defaults the daemon stands for when a field is unset. Swarmkit applies
// them when it runs a task and, for a read with ?insertDefaults=true (what
// `docker service inspect` asks for), writes them into the returned spec; a
// plain read returns the field unset. Either way unset and default mean the
// same, so both sides are rendered with the default filled in.
const (
	defaultStopGrace     = 10 * time.Second
	defaultRestartDelay  = 5 * time.Second
	defaultUpdateMonitor = 5 * time.Second
)

// flatten reduces one spec to its canonical fields. Every rule that makes two
// different-looking specs equal lives here, next to what the daemon does.
func flatten(s swarm.ServiceSpec, opts Options) fields {
	f := fields{}
	c := s.TaskTemplate.ContainerSpec
	if c == nil {
		c = &swarm.ContainerSpec{}
	}

	// The image is compared by SameImage, not as text: see there.
	f.set("image", c.Image)
	// The daemon treats an empty Command or Args like an absent one (the
	// image's entrypoint and cmd apply), and JSON round trips turn one
	// into the other.
	f.set("command", words(c.Command, "(image default)"))
	f.set("args", words(c.Args, "(image default)"))

	// Env order carries no meaning except that a later duplicate wins;
	// convert sorts it, `docker service update --env-add` appends.
	for k, v := range envMap(c.Env) {
		if opts.MaskEnv[k] || opts.SecretEnvPattern.MatchString(k) || looksLikeCredentialURL(v) {
			f.secret("env."+k, v)
		} else {
			f.set("env."+k, v)
		}
	}
	for k, v := range s.Labels {
		if ignoredLabel(k, opts.IgnoreLabels) {
			continue
		}
		f.label(opts, "labels."+k, k, v)
	}
	for k, v := range c.Labels {
		f.label(opts, "containerLabels."+k, k, v)
	}

	flattenMode(f, s.Mode)
	flattenResources(f, s.TaskTemplate.Resources)
	flattenPlacement(f, s.TaskTemplate.Placement)
	if opts.NetworkNames != nil {
		f.set("networks", renderNetworks(s.TaskTemplate.Networks, opts.NetworkNames))
	}
	flattenEndpoint(f, s.EndpointSpec)

	f.set("mounts", renderMounts(c.Mounts))
	f.set("secrets", renderSecrets(c.Secrets))
	f.set("configs", renderConfigs(c.Configs))
	f.set("healthcheck", renderHealthcheck(c.Healthcheck))
	flattenUpdate(f, "updateConfig", s.UpdateConfig)
	flattenUpdate(f, "rollbackConfig", s.RollbackConfig)
	flattenRestart(f, s.TaskTemplate.RestartPolicy)

	f.set("user", c.User)
	f.set("groups", sortedList(c.Groups))
	f.set("workdir", c.Dir)
	f.set("hostname", c.Hostname)
	// DNS server and search order is the resolver's order: kept as is.
	// The daemon writes an empty DNSConfig for an absent one on
	// insertDefaults reads.
	var dns swarm.DNSConfig
	if c.DNSConfig != nil {
		dns = *c.DNSConfig
	}
	f.set("dns", joinAddrs(dns.Nameservers))
	f.set("dnsSearch", strings.Join(dns.Search, ", "))
	f.set("dnsOptions", strings.Join(dns.Options, ", "))
	f.set("hosts", renderHosts(c.Hosts))
	f.set("stopSignal", c.StopSignal)
	// An unset stop grace period reads back as 10s on insertDefaults.
	grace := defaultStopGrace
	if c.StopGracePeriod != nil {
		grace = *c.StopGracePeriod
	}
	f.set("stopGracePeriod", grace.String())
	f.set("capabilities.add", renderCaps(c.CapabilityAdd))
	f.set("capabilities.drop", renderCaps(c.CapabilityDrop))
	for k, v := range c.Sysctls {
		f.set("sysctls."+k, v)
	}
	f.set("ulimits", renderUlimits(c.Ulimits))
	text, display := renderLogging(s.TaskTemplate.LogDriver, opts)
	f["logging"] = value{text: text, display: display, masked: text != display}
	// Init is a pointer on purpose: unset means the daemon's own default
	// (dockerd --init), which need not be false. The daemon keeps nil.
	init := "(daemon default)"
	if c.Init != nil {
		init = strconv.FormatBool(*c.Init)
	}
	f.set("init", init)
	f.set("readOnly", strconv.FormatBool(c.ReadOnly))
	f.set("tty", strconv.FormatBool(c.TTY))
	f.set("stdinOpen", strconv.FormatBool(c.OpenStdin))
	// The daemon writes Isolation "default" for an unset one.
	iso := c.Isolation
	if iso == "" {
		iso = container.IsolationDefault
	}
	f.set("isolation", string(iso))
	f.set("oomScoreAdj", strconv.FormatInt(c.OomScoreAdj, 10))
	f.set("privileges", renderPrivileges(c.Privileges))
	// Not compared, on purpose:
	//   - TaskTemplate.ForceUpdate: `docker service update --force` bumps
	//     it to restart tasks without changing what runs, and stack deploy
	//     carries the live value forward.
	//   - TaskTemplate.Runtime: the daemon writes "container" for an unset
	//     one, and compose cannot declare anything else.
	//   - Secret and config ids: desired ones are resolved against today's
	//     swarm by name, and names are unique, so the name says it all.
	return f
}

func (f fields) label(opts Options, field, key, v string) {
	if opts.SecretEnvPattern.MatchString(key) {
		f.secret(field, v)
		return
	}
	f.set(field, v)
}

// SameImage reports whether two image references name the same image; it is
// the rule Diff uses for the "image" field, exported so that a writer that
// keeps a live digest pinned can keep it only when this says so.
// The docker client writes the familiar form with a tag
// (docker.io/library/app becomes app:latest) before sending a service, and
// a digest may be pinned after the tag (app:1@sha256:…) by the client or the
// backend resolving it against a registry. A tag in the repository and
// tag@digest on the swarm are therefore the same image unless the tag
// differs; a digest in the repository must match the live digest.
func SameImage(desired, live string) bool {
	if desired == live {
		return true
	}
	d, err := reference.ParseNormalizedNamed(desired)
	if err != nil {
		return false
	}
	l, err := reference.ParseNormalizedNamed(live)
	if err != nil {
		return false
	}
	if d.Name() != l.Name() {
		return false
	}
	if dd, ok := d.(reference.Digested); ok {
		ld, ok := l.(reference.Digested)
		return ok && dd.Digest() == ld.Digest()
	}
	dt := "latest"
	if t, ok := d.(reference.Tagged); ok {
		dt = t.Tag()
	}
	lt, ok := l.(reference.Tagged)
	if !ok {
		// Live is pinned to a bare digest: someone replaced the tag, and
		// nothing here can tell whether the digest is still the tag's.
		return false
	}
	return dt == lt.Tag()
}

func words(ws []string, empty string) string {
	if len(ws) == 0 {
		return empty
	}
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = strconv.Quote(w)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// envMap reads KEY=VALUE entries; a later duplicate wins, as in the
// container. A bare KEY (no "=") reads as "(unset)".
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			v = "(unset)"
		}
		m[k] = v
	}
	return m
}

// looksLikeCredentialURL catches values such as DATABASE_URL whose key says
// nothing but whose value carries a password.
func looksLikeCredentialURL(v string) bool {
	if !strings.Contains(v, "://") || !strings.Contains(v, "@") {
		return false
	}
	u, err := url.Parse(v)
	if err != nil {
		return true // cannot tell: hide it
	}
	_, hasPassword := u.User.Password()
	return hasPassword
}

// flattenMode renders the mode and the counts that belong to it. The daemon
// stores an unset replica count as 1; for a replicated job an unset
// MaxConcurrent as 1 and an unset TotalCompletions as MaxConcurrent.
func flattenMode(f fields, m swarm.ServiceMode) {
	switch {
	case m.Global != nil:
		f.set("mode", "global")
	case m.GlobalJob != nil:
		f.set("mode", "global-job")
	case m.ReplicatedJob != nil:
		f.set("mode", "replicated-job")
		maxConc := uint64(1)
		if m.ReplicatedJob.MaxConcurrent != nil {
			maxConc = *m.ReplicatedJob.MaxConcurrent
		}
		total := maxConc
		if m.ReplicatedJob.TotalCompletions != nil {
			total = *m.ReplicatedJob.TotalCompletions
		}
		f.set("replicas", strconv.FormatUint(total, 10))
		f.set("maxConcurrent", strconv.FormatUint(maxConc, 10))
	default:
		// No mode at all is a replicated service to the daemon.
		f.set("mode", "replicated")
		n := uint64(1)
		if m.Replicated != nil && m.Replicated.Replicas != nil {
			n = *m.Replicated.Replicas
		}
		f.set("replicas", strconv.FormatUint(n, 10))
	}
}

// flattenResources: convert always sends a Resources struct, empty when
// nothing is declared; the daemon returns it empty, or writes an empty one
// for a nil one on insertDefaults. Unset limits read as 0.
func flattenResources(f fields, r *swarm.ResourceRequirements) {
	var lim swarm.Limit
	var res swarm.Resources
	if r != nil && r.Limits != nil {
		lim = *r.Limits
	}
	if r != nil && r.Reservations != nil {
		res = *r.Reservations
	}
	f.set("resources.limits.cpus", cpus(lim.NanoCPUs))
	f.set("resources.limits.memory", bytesize(lim.MemoryBytes))
	f.set("resources.limits.pids", strconv.FormatInt(lim.Pids, 10))
	f.set("resources.reservations.cpus", cpus(res.NanoCPUs))
	f.set("resources.reservations.memory", bytesize(res.MemoryBytes))
	var generic []string
	for _, g := range res.GenericResources {
		switch {
		case g.DiscreteResourceSpec != nil:
			generic = append(generic, fmt.Sprintf("%s=%d", g.DiscreteResourceSpec.Kind, g.DiscreteResourceSpec.Value))
		case g.NamedResourceSpec != nil:
			generic = append(generic, fmt.Sprintf("%s=%s", g.NamedResourceSpec.Kind, g.NamedResourceSpec.Value))
		}
	}
	f.set("resources.reservations.generic", sortedList(generic))
}

func cpus(nano int64) string {
	return strconv.FormatFloat(float64(nano)/1e9, 'f', -1, 64)
}

func bytesize(b int64) string {
	switch {
	case b == 0:
		return "0"
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// flattenPlacement: convert always sends a Placement with empty lists; the
// daemon drops empty lists and writes an empty Placement for a nil one on
// insertDefaults. Constraints are a conjunction, so their order carries no
// meaning; preferences are a hierarchy, so theirs does.
//
// Platforms are left to Diff: the docker client adds them when it resolves
// an image against a registry, so live platforms the repository never
// declared are not drift.
func flattenPlacement(f fields, p *swarm.Placement) {
	if p == nil {
		p = &swarm.Placement{}
	}
	cons := make([]string, len(p.Constraints))
	for i, c := range p.Constraints {
		cons[i] = normalizeConstraint(c)
	}
	f.set("placement.constraints", sortedList(cons))
	var prefs []string
	for _, pr := range p.Preferences {
		if pr.Spread != nil {
			prefs = append(prefs, "spread="+pr.Spread.SpreadDescriptor)
		}
	}
	f.set("placement.preferences", strings.Join(prefs, ", "))
	f.set("placement.maxReplicas", strconv.FormatUint(p.MaxReplicas, 10))
	if len(p.Platforms) > 0 {
		var plats []string
		for _, pl := range p.Platforms {
			plats = append(plats, pl.OS+"/"+pl.Architecture)
		}
		f.set("placement.platforms", sortedList(plats))
	}
}

// normalizeConstraint drops the spaces around the operator, which swarm
// ignores when it parses "node.role == manager".
func normalizeConstraint(c string) string {
	for _, op := range []string{"==", "!="} {
		if l, r, ok := strings.Cut(c, op); ok {
			return strings.TrimSpace(l) + op + strings.TrimSpace(r)
		}
	}
	return strings.TrimSpace(c)
}

// renderNetworks names each attachment. The daemon replaces every target
// name with the network's id when it stores the service; desired specs name
// them. Both are mapped through names (a name maps to itself), and an id the
// map does not know stays an id: an attachment to a network that no longer
// exists is exactly the drift worth seeing. Aliases are a set; convert adds
// the service's own name to every user-defined network and the daemon keeps
// it.
func renderNetworks(nets []swarm.NetworkAttachmentConfig, names map[string]string) string {
	out := make([]string, 0, len(nets))
	for _, n := range nets {
		name := n.Target
		if nm, ok := names[n.Target]; ok {
			name = nm
		}
		var extra []string
		if len(n.Aliases) > 0 {
			extra = append(extra, "aliases "+sortedList(n.Aliases))
		}
		if len(n.DriverOpts) > 0 {
			extra = append(extra, "driver opts "+renderMap(n.DriverOpts))
		}
		if len(extra) > 0 {
			name += " (" + strings.Join(extra, "; ") + ")"
		}
		out = append(out, name)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return none
	}
	return strings.Join(out, ", ")
}

// flattenEndpoint: the daemon stores an unset resolution mode as "vip", an
// unset protocol as "tcp" and an unset publish mode as "ingress" (each is
// the zero value of its protobuf enum). Port order carries no meaning;
// convert sorts by published port, `docker service update --publish-add`
// appends.
func flattenEndpoint(f fields, e *swarm.EndpointSpec) {
	if e == nil {
		e = &swarm.EndpointSpec{}
	}
	mode := e.Mode
	if mode == "" {
		mode = swarm.ResolutionModeVIP
	}
	f.set("endpointMode", string(mode))
	ports := make([]string, 0, len(e.Ports))
	for _, p := range e.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = network.TCP
		}
		pm := p.PublishMode
		if pm == "" {
			pm = swarm.PortConfigPublishModeIngress
		}
		s := fmt.Sprintf("%d:%d/%s %s", p.PublishedPort, p.TargetPort, proto, pm)
		if p.Name != "" {
			s += " name=" + p.Name
		}
		ports = append(ports, s)
	}
	f.set("ports", sortedList(ports))
}

// renderMounts renders mounts sorted by target, which is unique within a
// container. The daemon drops Consistency (swarm has no such field: it only
// ever meant something to Docker for Mac) and returns empty option structs
// as absent, so both are removed before rendering.
func renderMounts(ms []mount.Mount) string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		s := string(m.Type) + " "
		if m.Source != "" {
			s += m.Source + ":"
		}
		s += m.Target
		var o []string
		if m.ReadOnly {
			o = append(o, "ro")
		}
		if b := m.BindOptions; b != nil {
			if b.Propagation != "" {
				o = append(o, "propagation="+string(b.Propagation))
			}
			if b.NonRecursive {
				o = append(o, "non-recursive")
			}
			if b.CreateMountpoint {
				o = append(o, "create-mountpoint")
			}
			if b.ReadOnlyNonRecursive {
				o = append(o, "ro-non-recursive")
			}
			if b.ReadOnlyForceRecursive {
				o = append(o, "ro-force-recursive")
			}
		}
		if v := m.VolumeOptions; v != nil {
			if v.NoCopy {
				o = append(o, "nocopy")
			}
			if v.Subpath != "" {
				o = append(o, "subpath="+v.Subpath)
			}
			if len(v.Labels) > 0 {
				o = append(o, "labels "+renderMap(v.Labels))
			}
			if v.DriverConfig != nil && (v.DriverConfig.Name != "" || len(v.DriverConfig.Options) > 0) {
				o = append(o, "driver "+v.DriverConfig.Name+" "+renderMap(v.DriverConfig.Options))
			}
		}
		if t := m.TmpfsOptions; t != nil {
			if t.SizeBytes != 0 {
				o = append(o, "size="+bytesize(t.SizeBytes))
			}
			if t.Mode != 0 {
				o = append(o, fmt.Sprintf("mode=%#o", t.Mode))
			}
			for _, opt := range t.Options {
				o = append(o, strings.Join(opt, "="))
			}
		}
		if len(o) > 0 {
			s += " (" + strings.Join(o, ", ") + ")"
		}
		out = append(out, s)
	}
	return sortedList(out)
}

// fileTarget renders where a secret or config lands. An empty uid or gid is
// root to the daemon; convert always writes "0", `docker service update
// --secret-add` may leave them empty.
func fileTarget(name, uid, gid string, mode uint32) string {
	if uid == "" {
		uid = "0"
	}
	if gid == "" {
		gid = "0"
	}
	return fmt.Sprintf("%s (uid %s, gid %s, mode %#o)", name, uid, gid, mode)
}

// renderSecrets renders references by name and target, never by id; a
// secret's data is not part of a reference and cannot appear. Convert sorts
// by name, `docker service update --secret-add` appends.
func renderSecrets(rs []*swarm.SecretReference) string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		if r == nil {
			continue
		}
		s := r.SecretName + " -> "
		if r.File != nil {
			s += fileTarget(r.File.Name, r.File.UID, r.File.GID, uint32(r.File.Mode))
		} else {
			s += "(no file)"
		}
		out = append(out, s)
	}
	return sortedList(out)
}

// renderConfigs is renderSecrets for configs, which may also be runtime
// configs (a credential spec) rather than files.
func renderConfigs(rs []*swarm.ConfigReference) string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		if r == nil {
			continue
		}
		s := r.ConfigName + " -> "
		switch {
		case r.File != nil:
			s += fileTarget(r.File.Name, r.File.UID, r.File.GID, uint32(r.File.Mode))
		case r.Runtime != nil:
			s += "(runtime)"
		default:
			s += "(no target)"
		}
		out = append(out, s)
	}
	return sortedList(out)
}

// renderHealthcheck: nil inherits the image's healthcheck and stays nil on
// the daemon; ["NONE"] disables it. Zero durations mean "the default" and
// are left out.
func renderHealthcheck(h *container.HealthConfig) string {
	if h == nil {
		return "(image default)"
	}
	if len(h.Test) == 1 && h.Test[0] == "NONE" {
		return "disabled"
	}
	s := words(h.Test, "(image test)")
	var o []string
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"interval", h.Interval}, {"timeout", h.Timeout}, {"start period", h.StartPeriod}, {"start interval", h.StartInterval}} {
		if d.v != 0 {
			o = append(o, d.name+" "+d.v.String())
		}
	}
	if h.Retries != 0 {
		o = append(o, "retries "+strconv.Itoa(h.Retries))
	}
	if len(o) > 0 {
		s += " (" + strings.Join(o, ", ") + ")"
	}
	return s
}

// flattenUpdate renders an update or rollback config with the daemon's
// defaults filled in. A nil config is swarmkit's default (parallelism 1,
// failure action pause, monitor 5s, order stop-first), which the daemon
// writes out on insertDefaults reads. A config given without failure action
// or order is stored as "pause" and "stop-first", and a zero monitor is
// stored as unset and means 5s.
func flattenUpdate(f fields, prefix string, u *swarm.UpdateConfig) {
	c := swarm.UpdateConfig{Parallelism: 1}
	if u != nil {
		c = *u
	}
	if c.FailureAction == "" {
		c.FailureAction = swarm.UpdateFailureActionPause
	}
	if c.Order == "" {
		c.Order = swarm.UpdateOrderStopFirst
	}
	if c.Monitor == 0 {
		c.Monitor = defaultUpdateMonitor
	}
	f.set(prefix+".parallelism", strconv.FormatUint(c.Parallelism, 10))
	f.set(prefix+".delay", c.Delay.String())
	f.set(prefix+".failureAction", string(c.FailureAction))
	f.set(prefix+".monitor", c.Monitor.String())
	f.set(prefix+".maxFailureRatio", strconv.FormatFloat(float64(c.MaxFailureRatio), 'f', -1, 32))
	f.set(prefix+".order", string(c.Order))
}

// flattenRestart renders a restart policy with the daemon's defaults: nil is
// condition any with a 5s delay; an unset condition is stored as any, an
// unset delay as 5s (on insertDefaults reads), an unset max attempts is
// returned as 0 and an unset window means 0.
func flattenRestart(f fields, r *swarm.RestartPolicy) {
	var p swarm.RestartPolicy
	if r != nil {
		p = *r
	}
	cond := p.Condition
	if cond == "" {
		cond = swarm.RestartPolicyConditionAny
	}
	delay := defaultRestartDelay
	if p.Delay != nil {
		delay = *p.Delay
	}
	var attempts uint64
	if p.MaxAttempts != nil {
		attempts = *p.MaxAttempts
	}
	var window time.Duration
	if p.Window != nil {
		window = *p.Window
	}
	f.set("restartPolicy.condition", string(cond))
	f.set("restartPolicy.delay", delay.String())
	f.set("restartPolicy.maxAttempts", strconv.FormatUint(attempts, 10))
	f.set("restartPolicy.window", window.String())
}

// renderHosts: convert writes "IP host" in the file's order, `docker service
// update --host-add` appends; order only matters for a duplicated name,
// which a hosts file resolves to the first and nobody relies on.
func renderHosts(hs []string) string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = strings.Join(strings.Fields(h), " ")
	}
	return sortedList(out)
}

// renderCaps normalises capabilities as the docker CLI does before sending
// them (upper case, CAP_ prefix), so "net_admin" and "CAP_NET_ADMIN" match.
func renderCaps(cs []string) string {
	out := make([]string, 0, len(cs))
	seen := map[string]bool{}
	for _, c := range cs {
		c = strings.ToUpper(strings.TrimSpace(c))
		if c != "ALL" && !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return sortedList(out)
}

// renderUlimits: convert sorts by name; the daemon keeps the order it got.
func renderUlimits(us []*container.Ulimit) string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		if u != nil {
			out = append(out, fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
		}
	}
	return sortedList(out)
}

// renderLogging renders the log driver with its options, twice: as
// compared, and as shown, with the values of options that look secret (a
// token for a remote sink) replaced by "***".
func renderLogging(d *swarm.Driver, opts Options) (text, display string) {
	if d == nil || (d.Name == "" && len(d.Options) == 0) {
		return "(daemon default)", "(daemon default)"
	}
	keys := make([]string, 0, len(d.Options))
	for k := range d.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts, shown := []string{d.Name}, []string{d.Name}
	for _, k := range keys {
		v := d.Options[k]
		parts = append(parts, k+"="+v)
		if opts.SecretEnvPattern.MatchString(k) || looksLikeCredentialURL(v) {
			v = mask
		}
		shown = append(shown, k+"="+v)
	}
	return strings.Join(parts, " "), strings.Join(shown, " ")
}

// fingerprint stands for a long value in a rendering.
func fingerprint(b []byte) string {
	if len(b) == 0 {
		return none
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// renderPrivileges: convert sends an empty Privileges; the daemon returns
// it with nil members, and on insertDefaults reads adds NoNewPrivileges
// false. Only what is set is rendered.
func renderPrivileges(p *swarm.Privileges) string {
	if p == nil {
		return "(default)"
	}
	var o []string
	if cs := p.CredentialSpec; cs != nil && (cs.Config != "" || cs.File != "" || cs.Registry != "") {
		o = append(o, fmt.Sprintf("credential spec config=%s file=%s registry=%s", cs.Config, cs.File, cs.Registry))
	}
	if se := p.SELinuxContext; se != nil && (se.Disable || se.User != "" || se.Role != "" || se.Type != "" || se.Level != "") {
		o = append(o, fmt.Sprintf("selinux disable=%t user=%s role=%s type=%s level=%s", se.Disable, se.User, se.Role, se.Type, se.Level))
	}
	if sc := p.Seccomp; sc != nil && (sc.Mode != "" || len(sc.Profile) > 0) {
		// A profile is long JSON; a short fingerprint shows it changed.
		o = append(o, fmt.Sprintf("seccomp %s profile=%s", sc.Mode, fingerprint(sc.Profile)))
	}
	if aa := p.AppArmor; aa != nil && aa.Mode != "" {
		o = append(o, "apparmor "+string(aa.Mode))
	}
	if p.NoNewPrivileges {
		o = append(o, "no-new-privileges")
	}
	if len(o) == 0 {
		return "(default)"
	}
	return strings.Join(o, "; ")
}

func sortedList(ss []string) string {
	if len(ss) == 0 {
		return none
	}
	c := append([]string(nil), ss...)
	sort.Strings(c)
	return strings.Join(c, ", ")
}

func renderMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

// joinAddrs renders name server addresses in the resolver's order.
func joinAddrs(addrs []netip.Addr) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return strings.Join(out, ", ")
}
