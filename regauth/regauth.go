// Package regauth resolves the registry credential an application's service
// writes carry, so that every node can pull that application's private images
// and no other application's credential is ever sent with them.
package regauth

import "context"

// Resolver returns the encoded X-Registry-Auth value for an image reference,
// or "" when no credential applies to its registry.
type Resolver interface {
	RegistryAuth(ctx context.Context, image string) (string, error)
}
