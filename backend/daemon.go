package backend

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/docker/go-connections/sockets"
	"github.com/docker/go-connections/tlsconfig"
	"github.com/moby/moby/client"
)

// countingClient returns a client whose every request passes through a
// countingTransport and a deadlineTransport around the transport opts
// names, or one that dials the daemon opts (or the environment) names.
//
// The moby client keeps its HTTP client to itself, so the transport is
// built here and handed to it rather than taken from a client and wrapped.
func countingClient(opts Options, cnt *counter) (*client.Client, error) {
	host, version, tr := opts.Host, opts.APIVersion, opts.Transport
	var tlsConf *tls.Config
	if host == "" {
		host = os.Getenv(client.EnvOverrideHost)
		if host == "" {
			host = client.DefaultDockerHost
		}
		if version == "" {
			version = os.Getenv(client.EnvOverrideAPIVersion)
		}
		var err error
		if tlsConf, err = tlsFromEnv(); err != nil {
			return nil, err
		}
	}
	if tr == nil {
		var err error
		if tr, err = dialTransport(host, tlsConf); err != nil {
			return nil, err
		}
	}
	hc := &http.Client{
		Transport:     &countingTransport{next: &deadlineTransport{next: tr, timeout: opts.RequestTimeout}, c: cnt},
		CheckRedirect: client.CheckRedirect,
	}
	copts := []client.Opt{
		client.WithHost(host), // before WithHTTPClient: it configures the default transport
		client.WithHTTPClient(hc),
		client.WithAPIVersion(version), // empty: negotiate
	}
	// The client picks https by finding TLS on its own transport, which
	// the wrapper hides.
	if tlsConf != nil {
		copts = append(copts, client.WithScheme("https"))
	}
	return client.New(copts...)
}

// dialTransport is a transport that reaches host as the docker CLI does:
// over its unix socket, named pipe or tcp address, with TLS when tlsConf is
// set.
func dialTransport(host string, tlsConf *tls.Config) (*http.Transport, error) {
	u, err := client.ParseHostURL(host)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{TLSClientConfig: tlsConf}
	if err := sockets.ConfigureTransport(tr, u.Scheme, u.Host); err != nil {
		return nil, fmt.Errorf("docker host %s: %w", host, err)
	}
	return tr, nil
}

// tlsFromEnv is the TLS configuration DOCKER_CERT_PATH and DOCKER_TLS_VERIFY
// describe, nil when DOCKER_CERT_PATH is unset: the certificates of the
// directory, the server's verified only when DOCKER_TLS_VERIFY is set.
func tlsFromEnv() (*tls.Config, error) {
	dir := os.Getenv(client.EnvOverrideCertPath)
	if dir == "" {
		return nil, nil
	}
	conf, err := tlsconfig.Client(tlsconfig.Options{
		CAFile:             filepath.Join(dir, "ca.pem"),
		CertFile:           filepath.Join(dir, "cert.pem"),
		KeyFile:            filepath.Join(dir, "key.pem"),
		InsecureSkipVerify: os.Getenv(client.EnvTLSVerify) == "",
		MinVersion:         tls.VersionTLS12,
	})
	if err != nil {
		return nil, fmt.Errorf("TLS from %s=%s: %w", client.EnvOverrideCertPath, dir, err)
	}
	return conf, nil
}
