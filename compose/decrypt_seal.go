package compose

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/flotilla-gitops/flotilla/fault"
	"gopkg.in/yaml.v3"
)

// Sealing keeps values decrypted with SOPS out of the manifest, which is
// stored in a release record and served to every reader of the API. A
// sealed value is replaced by a placeholder carrying a keyed digest of it,
// so the manifest still changes when the value does (and the plan sees an
// upgrade) while the digest cannot be tested against guesses by someone
// without the key. The plaintext travels beside the manifest, in
// Rendered.Sealed, the way secret plaintext travels in Rendered.Secrets,
// and is put back by Unseal where the specs are written.
//
// Sealed are: environment values that came from a decrypted env_file, that
// were encrypted in a decrypted compose file, or that contain a value of a
// decrypted env file (interpolation carries those into plain files); and
// the content of config files that were decrypted. A decrypted value that
// would land anywhere else in the manifest fails the render instead.

// sealPrefix starts every placeholder. The digest after it is 32 hex.
const sealPrefix = "flotilla-sealed:"

// sealedRE finds placeholders in a manifest's text.
var sealedRE = regexp.MustCompile(regexp.QuoteMeta(sealPrefix) + `[0-9a-f]{32}`)

// IsSealed reports whether v is a placeholder for a sealed value.
func IsSealed(v string) bool { return sealedRE.MatchString(v) && len(v) == len(sealPrefix)+32 }

// SealedValues lists the placeholders a manifest holds, sorted and unique:
// what a deploy of it needs in DeployRequest.Sealed.
func SealedValues(manifest string) []string {
	return sortedUnique(sealedRE.FindAllString(manifest, -1))
}

// ErrSealedMissing is a manifest whose sealed value was not supplied: it
// can be deployed only with the plaintext a render of its commit gives.
var ErrSealedMissing = errors.New("sealed value not supplied")

// Unseal puts the plaintext of every sealed value back into st: service
// environment entries and config data. A placeholder sealed does not hold
// is an error wrapping ErrSealedMissing, so nothing is ever written with a
// placeholder where a value belongs. Specs are copied, not changed in
// place, since Convert's callers may share them.
func Unseal(st *Stack, sealed map[string]string) error {
	for name, spec := range st.Services {
		cs := spec.TaskTemplate.ContainerSpec
		if cs == nil {
			continue
		}
		var env []string
		for i, e := range cs.Env {
			k, v, _ := strings.Cut(e, "=")
			if !IsSealed(v) {
				continue
			}
			plain, ok := sealed[v]
			if !ok {
				return fmt.Errorf("service %s: env %s: %w", name, k, ErrSealedMissing)
			}
			if env == nil {
				env = slices.Clone(cs.Env)
			}
			env[i] = k + "=" + plain
		}
		if env != nil {
			c := *cs
			c.Env = env
			spec.TaskTemplate.ContainerSpec = &c
			st.Services[name] = spec
		}
	}
	for name, spec := range st.Configs {
		if !IsSealed(string(spec.Data)) {
			continue
		}
		plain, ok := sealed[string(spec.Data)]
		if !ok {
			return fmt.Errorf("config %s: %w", name, ErrSealedMissing)
		}
		spec.Data = []byte(plain)
		st.Configs[name] = spec
	}
	return nil
}

// SealedEnv names the environment variables of a converted service whose
// values are sealed: what a comparison with the live spec must never show.
func SealedEnv(env []string) map[string]bool {
	var out map[string]bool
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		if IsSealed(v) {
			if out == nil {
				out = map[string]bool{}
			}
			out[k] = true
		}
	}
	return out
}

// sealKey is the key of the digests in placeholders and in the names of
// decrypted secrets and configs: Dir.SealKey, or, without one, a fixed key.
// The fixed key keeps a render deterministic (re-encrypting the same
// plaintext changes nothing) but makes the digests no better than plain
// hashes, which is why the controller always passes its identities' key.
func (p *project) sealKey() []byte {
	if len(p.sops.key) > 0 {
		return p.sops.key
	}
	return []byte("flotilla seal without a key v1")
}

// keyedDigest is the hex HMAC-SHA256 of the parts under the seal key.
func (p *project) keyedDigest(parts ...string) string {
	mac := hmac.New(sha256.New, p.sealKey())
	for _, s := range parts {
		mac.Write([]byte(strconv.Itoa(len(s))))
		mac.Write([]byte{':'})
		mac.Write([]byte(s))
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// seal returns the placeholder for value and remembers its plaintext.
func (p *project) seal(out *Rendered, kind, name, value string) string {
	ph := sealPrefix + p.keyedDigest("sealed", kind, name, value)[:32]
	if out.Sealed == nil {
		out.Sealed = map[string]string{}
	}
	out.Sealed[ph] = value
	return ph
}

// noteEnvFile remembers that service svc's variable key came from a
// decrypted env_file with value.
func (p *project) noteEnvFile(svc, key, value string) {
	if p.sops.envSealed == nil {
		p.sops.envSealed = map[string]map[string]string{}
	}
	if p.sops.envSealed[svc] == nil {
		p.sops.envSealed[svc] = map[string]string{}
	}
	p.sops.envSealed[svc][key] = value
	if len(value) >= minRedacted {
		p.sops.values = append(p.sops.values, value)
	}
}

// noteInterpolation remembers the values of a decrypted interpolation env
// file: interpolation can carry them into any field of a plain file.
func (p *project) noteInterpolation(vars map[string]string) {
	if p.sops.interp == nil {
		p.sops.interp = map[string]string{}
	}
	for _, k := range sortedKeys(vars) {
		if v := vars[k]; len(v) >= minRedacted {
			p.sops.interp[v] = k
		}
	}
}

// ErrEncryptedOutsideEnvironment is a value encrypted in a SOPS-encrypted
// compose file outside a service's environment. Only environment values
// are sealed; any other field (command, labels, image...) would be written
// into the manifest, and so into the release record, in plaintext.
var ErrEncryptedOutsideEnvironment = errors.New("an encrypted value outside environment would be stored in plaintext")

// noteEncryptedCompose records, for a decrypted compose file, which
// environment entries were encrypted in its stored text, and refuses the
// file when any other field was: only environment values are sealed.
func (p *project) noteEncryptedCompose(rel string, plain map[string]any) error {
	stored, ok := p.sops.cipher[rel]
	if !ok {
		return nil
	}
	cipher, err := parseYAML(stored)
	if err != nil {
		return &fault.Error{File: rel, Err: fmt.Errorf("read the encrypted text: %w", err)}
	}
	var exposed []string
	for _, top := range sortedKeys(cipher) {
		if top != "services" && top != "sops" && hasEncrypted(cipher[top]) {
			exposed = append(exposed, top)
		}
	}
	services, _ := cipher["services"].(map[string]any)
	plainServices, _ := plain["services"].(map[string]any)
	for _, name := range sortedKeys(services) {
		csvc, _ := services[name].(map[string]any)
		psvc, _ := plainServices[name].(map[string]any)
		for _, field := range sortedKeys(csvc) {
			if field != "environment" {
				if hasEncrypted(csvc[field]) {
					exposed = append(exposed, "services."+name+"."+field)
				}
				continue
			}
			p.noteEncryptedEnv(name, csvc[field], psvc[field])
		}
	}
	if len(exposed) > 0 {
		return &fault.Error{File: rel, Field: exposed[0], Line: lineOf(stored, exposed[0]), Err: fmt.Errorf(
			"%w (encrypted: %s): only environment values are sealed; move the secret into environment, or into an encrypted file mounted as a secret",
			ErrEncryptedOutsideEnvironment, strings.Join(exposed, ", "))}
	}
	return nil
}

// noteEncryptedEnv records the entries of one service's environment that
// were encrypted in the stored text, in either of its forms: a map value,
// or a list entry "K=V", which SOPS encrypts whole.
func (p *project) noteEncryptedEnv(svc string, stored, plain any) {
	if list, ok := stored.([]any); ok {
		plainList, _ := plain.([]any)
		for i, e := range list {
			s, _ := e.(string)
			if !strings.HasPrefix(s, "ENC[") || i >= len(plainList) {
				continue
			}
			if ps, ok := scalarString(plainList[i]); ok {
				k, v, _ := strings.Cut(ps, "=")
				p.noteEnvFile(svc, k, v)
			}
		}
		return
	}
	cenv, _ := environmentMap(stored)
	penv, _ := environmentMap(plain)
	for _, k := range sortedKeys(cenv) {
		if cv, _ := cenv[k].(string); strings.HasPrefix(cv, "ENC[") {
			if pv, ok := scalarString(penv[k]); ok {
				p.noteEnvFile(svc, k, pv)
			}
		}
	}
}

// scalarString is a YAML scalar as the loader puts it in an environment.
func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v), true
	}
	return "", false
}

// hasEncrypted reports whether a stored YAML value holds an encrypted leaf.
func hasEncrypted(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.HasPrefix(v, "ENC[")
	case map[string]any:
		for _, e := range v {
			if hasEncrypted(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasEncrypted(e) {
				return true
			}
		}
	}
	return false
}

// sealEnv replaces every environment value that came from decrypted
// material by its placeholder.
func (p *project) sealEnv(cfg *composetypes.Config, out *Rendered) error {
	for i := range cfg.Services {
		svc := &cfg.Services[i]
		for _, k := range sortedKeys(svc.Environment) {
			v := svc.Environment[k]
			if v == nil {
				continue
			}
			if IsSealed(*v) {
				// Only a render writes placeholders; one copied into a
				// repository would be filled in with another value.
				return p.fault("services."+svc.Name+".environment."+k, errPlaceholder)
			}
			if len(p.sops.cipher) == 0 || !p.fromCipher(svc.Name, k, *v) {
				continue
			}
			ph := p.seal(out, "env", k, *v)
			svc.Environment[k] = &ph
		}
	}
	return nil
}

// errPlaceholder refuses a sealed placeholder written into a repository.
var errPlaceholder = errors.New("holds a sealed-value placeholder (" + sealPrefix + "...): those are written by the controller in place of decrypted values, never by hand")

// fromCipher reports whether a service's environment value came from
// decrypted material.
func (p *project) fromCipher(svc, key, value string) bool {
	if v, ok := p.sops.envSealed[svc][key]; ok && v == value {
		return true
	}
	for s := range p.sops.interp {
		if strings.Contains(value, s) {
			return true
		}
	}
	return false
}

// checkUnsealed refuses a manifest whose compose section still holds a
// value decrypted with SOPS: it would be stored in the release record in
// plaintext. The fault names the field, never the value.
func (p *project) checkUnsealed(text string) error {
	if len(p.sops.interp) == 0 {
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "compose" {
			continue
		}
		if field, name := p.findDecrypted(root.Content[i+1], ""); field != "" {
			return p.fault(field, fmt.Errorf(
				"holds the value of %s, which an env file decrypted with SOPS sets: only environment values and config and secret files are sealed, "+
					"so it would be stored in plaintext in the release record; pass it through environment or a secret, or set it in a plain env file if it is no secret", name))
		}
	}
	return nil
}

// findDecrypted returns the dotted path of the first string scalar under n
// that contains a decrypted interpolation value, and that value's variable;
// "" for none.
func (p *project) findDecrypted(n *yaml.Node, path string) (string, string) {
	join := func(s string) string {
		if path == "" {
			return s
		}
		return path + "." + s
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" {
			return "", ""
		}
		for _, v := range sortedKeys(p.sops.interp) {
			if strings.Contains(n.Value, v) {
				return path, p.sops.interp[v]
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, name := p.findDecrypted(n.Content[i+1], join(n.Content[i].Value)); f != "" {
				return f, name
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if f, name := p.findDecrypted(c, path); f != "" {
				return f, name
			}
		}
	}
	return "", ""
}
