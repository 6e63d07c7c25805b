package application

// Allow is one application's allowlist of what its stacks may reach outside
// their own namespace. It lives only in the applications file, never in the
// repository it governs. The zero value allows nothing outside the stack.
type Allow struct {
	// Networks are external network names the stack may attach to.
	Networks []string `yaml:"networks,omitempty" json:"networks,omitempty"`
	// Configs are external config names the stack may mount.
	Configs []string `yaml:"configs,omitempty" json:"configs,omitempty"`
	// Secrets are external secret names the stack may mount.
	Secrets []string `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	// Volumes are external named volumes the stack may mount.
	Volumes []string `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	// HostPaths are host path prefixes bind mounts may use, compared after
	// cleaning. "/var/run/docker.sock" must be listed (or its directory) for
	// the Docker socket to be mounted.
	HostPaths []string `yaml:"hostPaths,omitempty" json:"hostPaths,omitempty"`

	// The keys below grant what a service may ask of the node that runs it
	// (docs: README "Guards"). Each defaults to nothing.

	// Capabilities are Linux capabilities cap_add may grant beyond Docker's
	// default set, written with or without CAP_ and in any case. ALL must
	// be listed as ALL.
	Capabilities []string `yaml:"capabilities,omitempty" json:"capabilities,omitempty"`
	// Sysctls are the sysctl names (net.core.somaxconn) a service may set.
	Sysctls []string `yaml:"sysctls,omitempty" json:"sysctls,omitempty"`
	// HostPorts are the ports a service may publish in host mode, binding
	// the node's own port. Ingress-mode ports need no entry.
	HostPorts []uint32 `yaml:"hostPorts,omitempty" json:"hostPorts,omitempty"`
	// VolumeDrivers are volume drivers other than local (node plugins) a
	// volume may use.
	VolumeDrivers []string `yaml:"volumeDrivers,omitempty" json:"volumeDrivers,omitempty"`
	// NetworkDrivers are network (or IPAM) drivers other than overlay (and
	// default) a declared network may use: bridge, macvlan, ipvlan reach
	// the node's own networks.
	NetworkDrivers []string `yaml:"networkDrivers,omitempty" json:"networkDrivers,omitempty"`
	// TemplateDrivers are config and secret template drivers (golang)
	// allowed; a template can read the swarm's other secrets and configs.
	TemplateDrivers []string `yaml:"templateDrivers,omitempty" json:"templateDrivers,omitempty"`
}
