package regauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
)

// maxConfigFile bounds a credentials file: a config.json with many
// registries is a few KiB.
const maxConfigFile = 1 << 20

// hubDomain is the registry an image reference without a domain lives on,
// and the key its credential is stored under here.
const hubDomain = "docker.io"

// hubServerAddress is what the docker CLI calls Docker Hub in a credential.
// The daemon does not need it to pick the registry (the image names that),
// but sending what the CLI sends keeps the header unsurprising.
const hubServerAddress = "https://index.docker.io/v1/"

// hubAliases are the names a config.json may store a Docker Hub credential
// under.
var hubAliases = map[string]bool{
	"docker.io":            true,
	"index.docker.io":      true,
	"registry-1.docker.io": true,
}

// ErrNoCredentials is returned by FromDockerConfig for a config that holds
// no usable credential at all. A registryAuth file that authenticates
// nothing is certainly a mistake, and failing loudly beats pulls that fail
// on some node later.
var ErrNoCredentials = errors.New("no registry credentials in docker config")

// dockerConfig is the part of a Docker config.json this package reads.
type dockerConfig struct {
	Auths       map[string]authEntry `json:"auths"`
	CredsStore  string               `json:"credsStore"`
	CredHelpers map[string]string    `json:"credHelpers"`
}

type authEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// Credentials is a Resolver holding, per registry, the X-Registry-Auth value
// an image on that registry is written with. It prints, formats and logs as
// the list of registries only: the encoded values never leave it except
// through RegistryAuth. The zero value has no credentials.
type Credentials struct {
	encoded map[string]string // registry domain -> base64url JSON
}

var (
	_ Resolver       = (*Credentials)(nil)
	_ fmt.Stringer   = (*Credentials)(nil)
	_ fmt.GoStringer = (*Credentials)(nil)
	_ slog.LogValuer = (*Credentials)(nil)
)

// FromFile reads a Docker config.json (typically a swarm secret mounted into
// the controller) with FromDockerConfig. The file is read once: swarm
// secrets are immutable, so a rotated credential arrives with a restarted
// controller or a reloaded applications file, either of which calls this
// again.
//
// Only a regular file of at most maxConfigFile bytes is read. Reading is
// then local and bounded: a named pipe or a device put there by mistake
// would block the pass (opening a pipe waits for a writer) or never end.
func FromFile(path string) (*Credentials, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read registry credentials: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("read registry credentials: %s is not a regular file", path)
	}
	if info.Size() > maxConfigFile {
		return nil, fmt.Errorf("read registry credentials: %s is larger than %d bytes", path, maxConfigFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read registry credentials: %w", err)
	}
	c, err := FromDockerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	return c, nil
}

// FromDockerConfig parses the auths section of a Docker config.json. Each
// entry is either a base64 "auth" of user:password, or username and
// password, or an identity token (with or without a username); entries that
// are empty (what `docker login` leaves when a credential helper holds the
// secret) are skipped. Credential helpers are never run: the controller has
// none and running programs named by a file would be a hole of its own.
//
// Errors name the registry an entry is for, never any of its content.
func FromDockerConfig(data []byte) (*Credentials, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, jsonError(err)
	}
	c := &Credentials{encoded: make(map[string]string, len(cfg.Auths))}
	for _, key := range slices.Sorted(maps.Keys(cfg.Auths)) {
		domain, err := registryDomain(key)
		if err != nil {
			return nil, err
		}
		ac, ok, err := cfg.Auths[key].authConfig()
		if err != nil {
			return nil, fmt.Errorf("auths entry for %s: %w", domain, err)
		}
		if !ok {
			continue
		}
		if _, dup := c.encoded[domain]; dup {
			return nil, fmt.Errorf("auths has two entries for registry %s", domain)
		}
		ac.ServerAddress = domain
		if domain == hubDomain {
			ac.ServerAddress = hubServerAddress
		}
		enc, err := authconfig.Encode(ac)
		if err != nil {
			return nil, fmt.Errorf("auths entry for %s: encode: %w", domain, err)
		}
		c.encoded[domain] = enc
	}
	if len(c.encoded) == 0 {
		if cfg.CredsStore != "" || len(cfg.CredHelpers) > 0 {
			return nil, fmt.Errorf("%w: it relies on credential helpers, which the controller does not run; write the credentials into auths", ErrNoCredentials)
		}
		return nil, ErrNoCredentials
	}
	return c, nil
}

// authConfig turns one auths entry into the fields the daemon reads. ok is
// false for an entry with nothing in it.
func (e authEntry) authConfig() (ac registry.AuthConfig, ok bool, err error) {
	ac = registry.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		// Like the docker CLI, a base64 auth wins over separate fields.
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(e.Auth))
		if err != nil {
			return ac, false, errors.New(`"auth" is not valid base64`)
		}
		user, pass, found := strings.Cut(string(raw), ":")
		if !found {
			return ac, false, errors.New(`"auth" does not decode to username:password`)
		}
		ac.Username, ac.Password = user, pass
	}
	switch {
	case ac.IdentityToken != "" || ac.RegistryToken != "":
		return ac, true, nil
	case ac.Username == "" && ac.Password == "":
		return ac, false, nil
	case ac.Username == "" || ac.Password == "":
		return ac, false, errors.New("username and password must both be set")
	}
	return ac, true, nil
}

// registryDomain reduces an auths key (a bare host[:port], or a URL such as
// https://index.docker.io/v1/) to the domain an image reference names, with
// Docker Hub's aliases folded into one.
func registryDomain(key string) (string, error) {
	host := strings.TrimSpace(key)
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("auths key %q is not a registry address", key)
		}
		host = u.Host
	} else {
		host, _, _ = strings.Cut(host, "/")
	}
	host = strings.ToLower(host)
	if host == "" {
		return "", fmt.Errorf("auths key %q is not a registry address", key)
	}
	if hubAliases[host] {
		return hubDomain, nil
	}
	return host, nil
}

// RegistryAuth returns the encoded credential for the registry image lives
// on, or "" when the config has none for it. An image without a domain is
// on Docker Hub, as it is for docker pull.
func (c *Credentials) RegistryAuth(_ context.Context, image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	domain := strings.ToLower(reference.Domain(named))
	if hubAliases[domain] {
		domain = hubDomain
	}
	if c == nil {
		return "", nil
	}
	return c.encoded[domain], nil
}

// Registries lists the registries c holds a credential for, sorted.
func (c *Credentials) Registries() []string {
	if c == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(c.encoded))
}

// String names the registries and nothing else.
func (c *Credentials) String() string {
	return "registry credentials for [" + strings.Join(c.Registries(), " ") + "] (redacted)"
}

// GoString keeps %#v from printing the encoded values.
func (c *Credentials) GoString() string { return "regauth.Credentials{" + c.String() + "}" }

// LogValue keeps slog from printing the encoded values.
func (c *Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("registries", c.Registries()), slog.String("credentials", "redacted"))
}

// MarshalJSON writes the registries only, so an API response or event that
// carries a Credentials by mistake still holds no secret.
func (c *Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Registries []string `json:"registries"`
	}{c.Registries()})
}

// jsonError describes a parse failure by position only: encoding/json's own
// messages quote the character they stopped at, which may be part of a
// password.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("docker config is not valid JSON (byte %d)", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("docker config: %s has the wrong type (byte %d)", typ.Field, typ.Offset)
	default:
		return errors.New("docker config is not valid JSON")
	}
}
