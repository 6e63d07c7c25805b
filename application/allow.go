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
}
