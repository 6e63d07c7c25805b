package compose

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
)

// A top-level secret or config, or a service's environment variable, may
// name an entry of a secret store instead of carrying its value:
//
//	secrets:
//	  db_password:
//	    x-flotilla:
//	      secretRef: {store: vault, path: kv/data/shop/db, key: password}
//	configs:
//	  app_conf:
//	    x-flotilla:
//	      secretRef: {store: vault, path: kv/data/shop/app, key: conf}
//	services:
//	  api:
//	    x-flotilla:
//	      env:
//	        DB_PASSWORD:
//	          secretRef: {store: vault, path: kv/data/shop/db, key: password}
//
// The render asks Dir.SecretRef for the value and treats it as it treats
// material decrypted with SOPS: a secret's or config's swarm name carries a
// keyed digest of the value's tag (so a rotated value is a new object, and
// the services that mount it are the only ones that change); a config's
// data and an environment value are sealed (decrypt_seal.go) with a
// placeholder derived from the tag. The manifest holds the reference and
// digests of the tag SecretRefFunc gives (never of the value itself, which
// a digest under a known key would let anyone test guesses against), and
// the plaintext travels in Rendered.Secrets and Rendered.Sealed only. Which
// stores and paths an application may name is decided by the caller's
// SecretRefFunc, before it reads anything.

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

// SecretRefFunc returns the value of ref for the use named use (what
// ResolvedRef.Use gives: a secret's key, "configs.<key>" or
// "services.<service>.environment.<variable>"), and a tag: an opaque string that changes whenever the value does
// and tells nothing about it (a store version, or a digest under a key the
// caller keeps). The tag, not the value, names the swarm secret and goes
// into the manifest. Its error must never quote a value; the render reports
// it against the secret's field.
type SecretRefFunc func(use string, ref SecretRef) (value []byte, tag string, err error)

// The kinds of ResolvedRef.
const (
	// RefSecret is a top-level secret; its Kind is "" so that records
	// written before configs and environment values could name a store
	// read the same.
	RefSecret = ""
	// RefConfig is a top-level config.
	RefConfig = "config"
	// RefEnv is one environment variable of one service.
	RefEnv = "env"
)

// ResolvedRef is one value a render took from a store.
type ResolvedRef struct {
	// Kind is RefSecret, RefConfig or RefEnv.
	Kind string `json:"kind,omitempty"`
	// Secret is the top-level secret's or config's key in the compose
	// file, or the environment variable's name.
	Secret string `json:"secret"`
	// Service is, for an environment value, the service that has it.
	Service string `json:"service,omitempty"`
	// Name is the scoped swarm name of a secret or config, which changes
	// with the value; for an environment value, the sealed placeholder
	// that stands for it in the manifest, which changes with it too.
	Name string `json:"name"`
	// Ref is where the value came from.
	Ref SecretRef `json:"ref"`
	tag string
}

// Use names where the value is used, as SecretRefFunc is told.
func (r ResolvedRef) Use() string {
	switch r.Kind {
	case RefConfig:
		return "configs." + r.Secret
	case RefEnv:
		return "services." + r.Service + ".environment." + r.Secret
	}
	return r.Secret
}

// ErrNoSecretStore is a secretRef rendered without a SecretRefFunc: the
// applications file grants this render no store.
var ErrNoSecretStore = errors.New("no secret store is granted to this render")

// secretRefOf reads the secretRef extension of a top-level secret or
// config, nil when it has none. Unknown fields are refused, so a typo does
// not deploy a secret without its value.
func secretRefOf(obj composetypes.FileObjectConfig) (*SecretRef, error) {
	ext, ok := obj.Extras[extensionKey]
	if !ok {
		return nil, nil
	}
	ref, err := parseRefHolder(ext)
	if err != nil {
		return nil, fmt.Errorf("%s%w", extensionKey, err)
	}
	return ref, nil
}

// parseRefHolder reads a mapping whose one field is secretRef. Errors
// start with the field they concern (".secretRef.path: ..."), for the
// caller to prefix.
func parseRefHolder(ext any) (*SecretRef, error) {
	m, ok := ext.(map[string]any)
	if !ok {
		return nil, errors.New(" must be a mapping with secretRef")
	}
	var ref *SecretRef
	for k, v := range m {
		if k != "secretRef" {
			return nil, fmt.Errorf(".%s: unknown field (known: secretRef)", k)
		}
		rm, ok := v.(map[string]any)
		if !ok {
			return nil, errors.New(".secretRef must be a mapping with store, path and key")
		}
		ref = &SecretRef{}
		for f, fv := range rm {
			if f != "store" && f != "path" && f != "key" {
				return nil, fmt.Errorf(".secretRef.%s: unknown field (known: store, path, key)", f)
			}
			s, ok := fv.(string)
			if !ok {
				return nil, fmt.Errorf(".secretRef.%s must be a string", f)
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
			return nil, fmt.Errorf(".secretRef: %s required", strings.Join(missing, ", "))
		}
	}
	return ref, nil
}

// refObject resolves a secret or config (kind "secrets" or "configs")
// declared by reference and names it, as fileObject does for a file. It
// returns data nil for one without a reference.
func (p *project) refObject(stack, kind, key string, obj *composetypes.FileObjectConfig, out *Rendered) (data []byte, name string, ref *SecretRef, err error) {
	field := kind + "." + key
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
	noun, refKind := "secret", RefSecret
	if kind == "configs" {
		noun, refKind = "config", RefConfig
	}
	if obj.Name != "" {
		return nil, "", nil, p.fault(field+".name", fmt.Errorf("a %s taken from a store is named by its content: leave name: out", noun))
	}
	r := ResolvedRef{Kind: refKind, Secret: key, Ref: *ref}
	data, err = p.resolveRef(field+"."+extensionKey, &r)
	if err != nil {
		return nil, "", nil, err
	}
	if name, err = nameWithSum(stack, key, digest([]byte("name\x00" + r.tag))[:hashLen]); err != nil {
		return nil, "", nil, p.fault(field, err)
	}
	obj.File = ""
	obj.Name = name
	r.Name = name
	addRef(out, r)
	return data, name, ref, nil
}

// resolveRef asks the store for r's value and tag; field is where the
// fault is reported.
func (p *project) resolveRef(field string, r *ResolvedRef) ([]byte, error) {
	if p.refFn == nil {
		return nil, p.fault(field, fmt.Errorf("store %q: %w", r.Ref.Store, ErrNoSecretStore))
	}
	data, tag, err := p.refFn(r.Use(), r.Ref)
	if err != nil {
		return nil, p.fault(field, err)
	}
	if tag == "" {
		return nil, p.fault(field, errors.New("the secret store gave no tag for the value"))
	}
	p.usedRefs = true
	if len(data) >= minRedacted {
		p.sops.values = append(p.sops.values, string(data))
	}
	r.tag = tag
	return data, nil
}

// addRef adds r to out's refs, kept sorted by kind, service and key.
func addRef(out *Rendered, r ResolvedRef) {
	out.Refs = append(out.Refs, r)
	slices.SortFunc(out.Refs, func(a, b ResolvedRef) int {
		return cmpOr(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Service, b.Service), strings.Compare(a.Secret, b.Secret))
	})
}

func cmpOr(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// sealRef returns the placeholder for a value taken from a store and
// remembers its plaintext, as seal does for decrypted material; its digest
// is of the reference's tag, not of the value (see SecretRefFunc).
func (p *project) sealRef(out *Rendered, kind, name string, r ResolvedRef, value string) string {
	ph := sealPrefix + p.keyedDigest("store", kind, name, r.Ref.String(), r.tag)[:32]
	if out.Sealed == nil {
		out.Sealed = map[string]string{}
	}
	out.Sealed[ph] = value
	return ph
}

// refTag is the tag of the resolved secret or config key of kind in out.
func refTag(out *Rendered, kind, key string) string {
	for _, r := range out.Refs {
		if r.Kind == kind && r.Secret == key {
			return r.tag
		}
	}
	return ""
}

// envRefs reads the environment values a service takes from a store:
// x-flotilla.env.<VARIABLE>.secretRef. Each is sealed into the service's
// environment, so the manifest holds a placeholder and the plaintext
// travels in Rendered.Sealed. A variable also set by environment: or an
// env_file is refused: which of the two wins would be a guess.
func (p *project) envRefs(cfg *composetypes.Config, out *Rendered) error {
	for i := range cfg.Services {
		svc := &cfg.Services[i]
		ext, ok := svc.Extras[Extension].(map[string]any)
		if !ok {
			continue
		}
		raw, ok := ext["env"]
		if !ok {
			continue
		}
		field := "services." + svc.Name + "." + Extension + ".env"
		vars, ok := raw.(map[string]any)
		if !ok {
			return p.fault(field, errors.New("must be a mapping of variable names to {secretRef: {store, path, key}}"))
		}
		for _, k := range sortedKeys(vars) {
			vf := field + "." + k
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return p.fault(vf, errors.New("not a valid variable name"))
			}
			ref, err := parseRefHolder(vars[k])
			if err != nil {
				return p.fault(vf, fmt.Errorf("%s.env.%s%w", Extension, k, err))
			}
			if ref == nil {
				return p.fault(vf, errors.New("secretRef: {store, path, key} required"))
			}
			if _, set := svc.Environment[k]; set {
				return p.fault(vf, errors.New("the variable is also set by environment or env_file: set it in one place"))
			}
			r := ResolvedRef{Kind: RefEnv, Secret: k, Service: svc.Name, Ref: *ref}
			data, err := p.resolveRef(vf, &r)
			if err != nil {
				return err
			}
			if strings.ContainsRune(string(data), 0) {
				return p.fault(vf, errors.New("the store's value holds a NUL byte, which an environment value cannot"))
			}
			ph := p.sealRef(out, "env", svc.Name+"."+k, r, string(data))
			r.Name = ph
			if svc.Environment == nil {
				svc.Environment = composetypes.MappingWithEquals{}
			}
			svc.Environment[k] = &ph
			addRef(out, r)
		}
	}
	return nil
}
