package registryclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/moby/moby/api/pkg/authconfig"

	"github.com/flotilla-gitops/flotilla/regauth"
)

// CredentialFor returns the credential an application's registryAuth holds
// for image's registry: the same one its service writes carry, so the
// controller reads tags with exactly what the nodes pull with. A nil
// resolver, or none for that registry, is anonymous.
func CredentialFor(ctx context.Context, r regauth.Resolver, image string) (Credential, error) {
	if r == nil {
		return Credential{}, nil
	}
	enc, err := r.RegistryAuth(ctx, image)
	if err != nil {
		return Credential{}, fmt.Errorf("registry credentials for %s: %w", image, err)
	}
	if enc == "" {
		return Credential{}, nil
	}
	ac, err := authconfig.Decode(enc)
	if err != nil || ac == nil {
		// The decoder's message may quote the value; say only what failed.
		return Credential{}, fmt.Errorf("registry credentials for %s: %w", image, errors.New("unreadable"))
	}
	return Credential{
		Username:      ac.Username,
		Password:      ac.Password,
		IdentityToken: ac.IdentityToken,
		RegistryToken: ac.RegistryToken,
	}, nil
}
