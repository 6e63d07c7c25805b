package compose

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
)

// A top-level secret may name an entry of a secret store instead of a file:
//
//	secrets:
//	  db_password:
//	    x-flotilla:
//	      secretRef: {store: vault, path: kv/data/shop/db, key: password}
//
// The render asks Dir.SecretRef for the value and treats it as it treats a
// file decrypted with SOPS: the swarm name carries a keyed digest of the
// value's tag (so a rotated value is a new secret, and the services that mount it
// are the only ones that change), the manifest holds the reference and a
// digest of the tag SecretRefFunc gives (never of the value itself, which
// a digest under a known key would let anyone test guesses against), and the plaintext travels in
// Rendered.Secrets only. Which stores and paths an application may name is
// decided by the caller's SecretRefFunc, before it reads anything.

// extensionKey is the extension field Flotilla reads on a top-level secret.
const extensionKey = "x-flotilla"

// SecretRef names one value in a secret store: the store's name in the
// applications file, the path of the entry and the key inside it (empty:
// the whole entry, for a store that has such a value).
type SecretRef struct {
	Store string `json:"store" yaml:"store"`
	Path  string `json:"path" yaml:"path"`
	Key   string `json:"key" yaml:"key"`
}

// String is the reference as documents show it: store:path#key.
func (r SecretRef) String() string { return r.Store + ":" + r.Path + "#" + r.Key }

// SecretRefFunc returns the value of ref for the top-level secret named
// secret, and a tag: an opaque string that changes whenever the value does
// and tells nothing about it (a store version, or a digest under a key the
// caller keeps). The tag, not the value, names the swarm secret and goes
// into the manifest. Its error must never quote a value; the render reports
// it against the secret's field.
type SecretRefFunc func(secret string, ref SecretRef) (value []byte, tag string, err error)

// ResolvedRef is one secret a render took from a store.
type ResolvedRef struct {
	// Secret is the top-level secret's key in the compose file.
	Secret string `json:"secret"`
	// Name is its scoped swarm name, which changes with the value.
	Name string `json:"name"`
	// Ref is where the value came from.
	Ref SecretRef `json:"ref"`
	tag string
}

// ErrNoSecretStore is a secretRef rendered without a SecretRefFunc: the
// applications file grants this render no store.
var ErrNoSecretStore = errors.New("no secret store is granted to this render")

// secretRefOf reads the secretRef extension of a top-level secret, nil when
// it has none. Unknown fields are refused, so a typo does not deploy a
// secret without its value.
func secretRefOf(obj composetypes.FileObjectConfig) (*SecretRef, error) {
	ext, ok := obj.Extras[extensionKey]
	if !ok {
		return nil, nil
	}
	m, ok := ext.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be a mapping", extensionKey)
	}
	var ref *SecretRef
	for k, v := range m {
		if k != "secretRef" {
			return nil, fmt.Errorf("%s.%s: unknown field (known: secretRef)", extensionKey, k)
		}
		rm, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s.secretRef must be a mapping with store, path and key", extensionKey)
		}
		ref = &SecretRef{}
		for f, fv := range rm {
			if f != "store" && f != "path" && f != "key" {
				return nil, fmt.Errorf("%s.secretRef.%s: unknown field (known: store, path, key)", extensionKey, f)
			}
			s, ok := fv.(string)
			if !ok {
				return nil, fmt.Errorf("%s.secretRef.%s must be a string", extensionKey, f)
			}
			switch f {
			case "store":
				ref.Store = s
			case "path":
				ref.Path = s
			case "key":
				ref.Key = s
			}
		}
		// key may be left out: the store says what a whole entry is (AWS
		// Secrets Manager: the secret's whole value) or refuses it (Vault).
		var missing []string
		for _, f := range []struct{ name, v string }{{"store", ref.Store}, {"path", ref.Path}} {
			if strings.TrimSpace(f.v) == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%s.secretRef: %s required", extensionKey, strings.Join(missing, ", "))
		}
	}
	return ref, nil
}

// refObject resolves a secret declared by reference and names it, as
// fileObject does for a file. It returns data nil for a secret without a
// reference.
func (p *project) refObject(stack, key string, obj *composetypes.FileObjectConfig, out *Rendered) (data []byte, name string, ref *SecretRef, err error) {
	field := "secrets." + key
	ref, err = secretRefOf(*obj)
	if err != nil {
		return nil, "", nil, p.fault(field+"."+extensionKey, err)
	}
	if ref == nil {
		return nil, "", nil, nil
	}
	hasFile := obj.File != "" && obj.File != path.Join(loaderRoot, p.work)
	if obj.External.External || obj.Driver != "" || hasFile {
		return nil, "", nil, p.fault(field, errors.New("set x-flotilla.secretRef, or file, external or driver: not both"))
	}
	if obj.Name != "" {
		return nil, "", nil, p.fault(field+".name", errors.New("a secret taken from a store is named by its content: leave name: out"))
	}
	if p.refFn == nil {
		return nil, "", nil, p.fault(field+"."+extensionKey, fmt.Errorf("store %q: %w", ref.Store, ErrNoSecretStore))
	}
	data, tag, err := p.refFn(key, *ref)
	if err != nil {
		return nil, "", nil, p.fault(field+"."+extensionKey, err)
	}
	if tag == "" {
		return nil, "", nil, p.fault(field+"."+extensionKey, errors.New("the secret store gave no tag for the value"))
	}
	p.usedRefs = true
	if len(data) >= minRedacted {
		p.sops.values = append(p.sops.values, string(data))
	}
	if name, err = nameWithSum(stack, key, digest([]byte("name\x00" + tag))[:hashLen]); err != nil {
		return nil, "", nil, p.fault(field, err)
	}
	obj.File = ""
	obj.Name = name
	out.Refs = append(out.Refs, ResolvedRef{Secret: key, Name: name, Ref: *ref, tag: tag})
	slices.SortFunc(out.Refs, func(a, b ResolvedRef) int { return strings.Compare(a.Secret, b.Secret) })
	return data, name, ref, nil
}

// refTag is the tag of the resolved secret key of out.
func refTag(out *Rendered, key string) string {
	for _, r := range out.Refs {
		if r.Secret == key {
			return r.tag
		}
	}
	return ""
}
