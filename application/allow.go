package application

import (
	"net/url"
	"slices"
	"strings"
)

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
	// (docs/security.md, "The guards in short"). Each defaults to nothing.

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

	// AnalysisURLs are the URL prefixes a rollout's analysis may call
	// (Traefik's metrics, a Prometheus server, a webhook), written
	// scheme://host[:port][/path]. The controller makes those calls from
	// its own network, so a URL written in a repository would otherwise
	// let its author reach whatever the controller can: each must be
	// granted here. Default: none, and a rollout with an analysis is
	// refused.
	AnalysisURLs []string `yaml:"analysisURLs,omitempty" json:"analysisURLs,omitempty"`
}

// AdmitsAnalysisURL reports whether raw, a URL from a rollout's analysis,
// falls under one of AnalysisURLs: the same scheme, host and port (a
// missing port is the scheme's own), and a path under the entry's at a
// segment boundary (paths compared decoded, and one with a ".." segment
// never admitted). Credentials in raw play no part.
func (a *Allow) AdmitsAnalysisURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	for _, entry := range a.AnalysisURLs {
		p, err := url.Parse(entry)
		if err != nil {
			continue
		}
		if strings.EqualFold(u.Scheme, p.Scheme) && sameHostPort(u, p) && underPath(u.Path, p.Path) {
			return true
		}
	}
	return false
}

func sameHostPort(u, p *url.URL) bool {
	return strings.EqualFold(u.Hostname(), p.Hostname()) && portOf(u) == portOf(p)
}

func portOf(u *url.URL) string {
	if port := u.Port(); port != "" {
		return port
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// underPath reports whether path lies at or below prefix, segment by
// segment: /api admits /api and /api/v1, never /apikeys or /api/../admin.
func underPath(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	if slices.Contains(strings.Split(path, "/"), "..") {
		return false
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
