package backend

import (
	"context"
	"fmt"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/regauth"
)

// WithRegistryAuth returns a copy of b whose service creates and updates
// carry r's credential for each service's image, as `docker stack deploy
// --with-registry-auth` does, so every node can pull it. Only that copy's
// writes carry it: another application's copy sends its own or none.
//
// The credential travels with a write and only with one. An unchanged
// service is not written, so a steady-state pass sends no credential, and
// the registry is never asked anything on its behalf (writes go out with
// QueryRegistry off; digest pinning, when enabled, uses the credential
// only for an image whose reference changed). A rotated credential
// therefore reaches a service with its next change. A service written
// without a credential keeps the one it was last written with; the daemon
// does that by itself.
func (b *Backend) WithRegistryAuth(r regauth.Resolver) charts.Backend {
	c := b.clone()
	c.regAuth = r
	return c
}

// registryAuths resolves the credential of every service in specs before
// anything is written, so a resolver that fails stops the deploy while it
// is still all or nothing. The result is keyed by scoped service name and
// holds only services that get a credential.
func (b *Backend) registryAuths(ctx context.Context, specs map[string]swarm.ServiceSpec) (map[string]string, error) {
	if b.regAuth == nil {
		return nil, nil
	}
	out := make(map[string]string)
	for _, name := range sortedKeys(specs) {
		cs := specs[name].TaskTemplate.ContainerSpec
		if cs == nil || cs.Image == "" {
			continue
		}
		enc, err := b.regAuth.RegistryAuth(ctx, cs.Image)
		if err != nil {
			// The resolver's error names the image at most; the credential
			// itself never reaches an error.
			return nil, fmt.Errorf("registry credential for service %s: %w", name, err)
		}
		if enc != "" {
			out[name] = enc
		}
	}
	return out, nil
}
