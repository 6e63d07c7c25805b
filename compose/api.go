package compose

import "context"

// Dir is a compose project inside a repository checkout.
type Dir struct {
	// Root is the checkout root: no file outside it may be read.
	Root string
	// Path is the project directory relative to Root ("" or "." for Root).
	Path string
	// Files are compose files relative to Path, merged in order. Default
	// docker-compose.yml (or compose.yaml / compose.yml / docker-compose.yaml,
	// whichever exists first). As with `docker stack deploy`, relative paths
	// inside them (config, secret and env_file paths) are relative to the
	// directory of the first file.
	Files []string
	// EnvFiles feed interpolation, relative to Path. The process
	// environment never does.
	EnvFiles []string
	// Decrypt sees every file read (compose files, env files, config and
	// secret files) before it is used, and returns its plaintext; see
	// DecryptFunc. Default nil: no keys, so a SOPS-encrypted file fails
	// the render instead of being deployed as ciphertext.
	Decrypt DecryptFunc
	// SealKey keys the digests that stand for decrypted values in the
	// manifest and in the names of decrypted secrets and configs
	// ((*sopsage.Identities).SealKey gives one). Default nil: a key derived
	// from the encrypted files themselves, stable but computable by anyone
	// who can read the repository.
	SealKey []byte
	// SecretRef resolves top-level secrets and configs, and service
	// environment values, declared by reference to a secret store
	// (x-flotilla.secretRef, see secretref.go). Default nil: such a
	// reference fails the render with ErrNoSecretStore.
	SecretRef SecretRefFunc
	// Limits bound what a render reads and writes; zero fields take the
	// defaults (see Limits).
	Limits Limits
	// APIVersion is the engine API version the render is checked against:
	// every service field that version cannot carry is named in
	// Rendered.Warnings (a deploy drops it). Default "": no check.
	APIVersion string
}

// Rendered is a compose project turned into a manifest.
type Rendered struct {
	// Manifest is the self-contained, deterministic text a deploy converts
	// and a release record stores. It never holds secret plaintext: secrets
	// appear by their content-hashed name only.
	Manifest string
	// Secrets maps each secret's scoped content-hashed name to its
	// plaintext, for DeployRequest.Secrets. Memory only.
	Secrets map[string][]byte
	// Sealed maps each placeholder in Manifest to the plaintext it stands
	// for: values decrypted with SOPS (environment values, config files),
	// for DeployRequest.Sealed and Unseal. Memory only, like Secrets.
	Sealed map[string]string
	// Refs are the secrets, configs and environment values taken from a
	// secret store, sorted by kind, service and key.
	Refs []ResolvedRef
	// Warnings name what the render ignored, as `docker stack deploy`
	// would warn about it: service options Swarm does not support, and
	// fields Dir.APIVersion cannot carry.
	Warnings []string
}

// Resolver gives the swarm ids of configs and secrets by name, so service
// references can be written. A conversion for declaration only passes nil
// and gets references without ids.
type Resolver interface {
	ConfigIDs(ctx context.Context, names []string) (map[string]string, error)
	SecretIDs(ctx context.Context, names []string) (map[string]string, error)
}
