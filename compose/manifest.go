package compose

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/moby/moby/client/pkg/versions"
	"gopkg.in/yaml.v3"
)

// manifestKind names the manifest format so a stored release can be told
// apart from anything else and a future format can be recognised.
const manifestKind = "flotilla.compose/v1"

// manifestOut is the manifest as Render writes it. See the package
// documentation for the format.
type manifestOut struct {
	Kind    string                    `yaml:"kind"`
	Stack   string                    `yaml:"stack"`
	Compose *composetypes.Config      `yaml:"compose"`
	Configs map[string]manifestConfig `yaml:"configs,omitempty"`
	Secrets map[string]manifestSecret `yaml:"secrets,omitempty"`
}

// manifestIn is the same document as Convert reads it: the compose part is
// kept as a node and handed back to the loader, so it is read by exactly
// the code that read the original files.
type manifestIn struct {
	Kind    string                    `yaml:"kind"`
	Stack   string                    `yaml:"stack"`
	Compose yaml.Node                 `yaml:"compose"`
	Configs map[string]manifestConfig `yaml:"configs"`
	Secrets map[string]manifestSecret `yaml:"secrets"`
}

// manifestConfig is the content of one config the stack creates. Text is
// stored as text so that a manifest diff reads like a file diff; anything
// that is not UTF-8 is stored as base64.
type manifestConfig struct {
	Key    string `yaml:"key"`
	Data   string `yaml:"data,omitempty"`
	Base64 string `yaml:"base64,omitempty"`
	// Sealed stands for content decrypted with SOPS: a placeholder whose
	// plaintext is in Rendered.Sealed, never here.
	Sealed string `yaml:"sealed,omitempty"`
	// From is the store reference ("store:path#key") of a config taken
	// from a secret store; its data is then sealed.
	From string `yaml:"from,omitempty"`
}

// manifestSecret stands for one secret the stack creates: its compose key
// and a digest, so that a changed secret changes the manifest even when
// its name was fixed with `name:`. Never the plaintext.
type manifestSecret struct {
	Key    string `yaml:"key"`
	SHA256 string `yaml:"sha256,omitempty"`
	// HMAC replaces SHA256 for a secret decrypted with SOPS: a keyed
	// digest, since a plain one of a short secret can be brute-forced by
	// anyone who reads the record.
	HMAC string `yaml:"hmacSHA256,omitempty"`
	// From is the store reference ("store:path#key") of a secret taken from
	// a secret store; its value is keyed in HMAC like a decrypted one's.
	From string `yaml:"from,omitempty"`
	// StoreTag is, for such a secret, a digest of the store's tag for the
	// value (its version, or a digest under the controller's key): it
	// changes with the value and tells nothing of it.
	StoreTag string `yaml:"storeTag,omitempty"`
}

func newManifestConfig(key string, data []byte) manifestConfig {
	if utf8.Valid(data) {
		return manifestConfig{Key: key, Data: string(data)}
	}
	return manifestConfig{Key: key, Base64: base64.StdEncoding.EncodeToString(data)}
}

func (c manifestConfig) bytes() ([]byte, error) {
	if c.Sealed != "" {
		if c.Data != "" || c.Base64 != "" {
			return nil, errors.New("both sealed and data are set")
		}
		if !IsSealed(c.Sealed) {
			return nil, errors.New("sealed is not a placeholder")
		}
		// Unseal puts the plaintext in.
		return []byte(c.Sealed), nil
	}
	if c.Base64 != "" {
		if c.Data != "" {
			return nil, errors.New("both data and base64 are set")
		}
		return base64.StdEncoding.DecodeString(c.Base64)
	}
	return []byte(c.Data), nil
}

// manifestIndent is the indentation a manifest is written with.
const manifestIndent = 2

// encodeManifest writes m deterministically: yaml.v3 sorts map keys, and the
// compose model carries no paths, file names or extension fields.
func encodeManifest(m *manifestOut) (string, error) {
	var v any = m
	if f := (fragile{}); f.find(reflect.ValueOf(m)) {
		doc, err := f.node(m)
		if err != nil {
			return "", fmt.Errorf("encode manifest: %w", err)
		}
		v = doc
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(manifestIndent)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encode manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("encode manifest: %w", err)
	}
	return b.String(), nil
}

// manifestCompose parses a manifest and returns it with its compose
// section as the loader is given it: the section's text and its parsed
// map. Unknown keys are refused: a manifest is machine-written, so one is
// a sign of a different format rather than a typo.
func manifestCompose(text string) (*manifestIn, []byte, map[string]any, error) {
	var m manifestIn
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, nil, nil, fmt.Errorf("parse manifest: %w", err)
	}
	if m.Kind != manifestKind {
		return nil, nil, nil, fmt.Errorf("parse manifest: kind %q, want %q", m.Kind, manifestKind)
	}
	if m.Compose.Kind == 0 {
		return nil, nil, nil, errors.New("parse manifest: no compose section")
	}
	quoteAtRisk(&m.Compose)
	raw, err := yaml.Marshal(&m.Compose)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse manifest: %w", err)
	}
	dict, err := loader.ParseYAML(raw)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse manifest compose section: %w", err)
	}
	return &m, raw, dict, nil
}

// decodeManifest parses a manifest and loads its compose part.
func decodeManifest(text string) (*manifestIn, *composetypes.Config, error) {
	m, raw, dict, err := manifestCompose(text)
	if err != nil {
		return nil, nil, err
	}
	sum := digest(raw)
	validated := memo.validated.has(sum) || memo.validated.has(manifestSum(text))
	cfg, err := load(composetypes.ConfigDetails{
		WorkingDir:  loaderRoot,
		ConfigFiles: []composetypes.ConfigFile{{Filename: "manifest", Config: dict}},
		Environment: map[string]string{},
	}, loadOptions{skipInterpolation: true, skipValidation: validated})
	if err != nil {
		return nil, nil, fmt.Errorf("load manifest compose section: %w", err)
	}
	if !validated {
		memo.validated.add(sum)
	}
	return m, cfg, nil
}

// manifestSum names a whole manifest in the validated set: one rendered
// incrementally was validated in pieces (every service and the top-level
// sections, which is all the schema checks), never as one compose section.
func manifestSum(text string) string { return "manifest:" + digest([]byte(text)) }

// digestSet is a small set that forgets everything when it fills up,
// which costs one re-validation per manifest and needs no bookkeeping.
type digestSet struct {
	mu  sync.Mutex
	max int
	m   map[string]struct{}
}

func (s *digestSet) has(d string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[d]
	return ok
}

// reset forgets every digest.
func (s *digestSet) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = nil
}

func (s *digestSet) add(d string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= s.max {
		s.m = make(map[string]struct{}, s.max)
	}
	s.m[d] = struct{}{}
}

// minManifestVersion is the oldest compose file version whose schema holds
// everything a manifest writes: the long syntax the loader turns ports and
// volumes into (3.2) and the name it gives every external or file-backed
// network, config and secret (3.5).
const minManifestVersion = "3.5"

// manifestVersion is the compose version a manifest's compose section
// declares. The section is the loaded model written back out, not the
// user's text, so it must validate against a schema that knows the
// normalised shape; the file itself was already validated against its own
// version. Only the schema depends on the version — the loader reads a
// loaded model the same way under any 3.x — so raising an old version
// changes nothing a deploy does, and a file at 3.5 or above keeps its own.
func manifestVersion(v string) string {
	if v == "" || versions.LessThan(v, minManifestVersion) {
		return minManifestVersion
	}
	return v
}

// stripExtras drops every x- extension field. The loader keeps them but
// nothing converts them into a swarm object, and dropping them keeps a
// change to a YAML anchor holder (x-common: &common) from changing the
// manifest when no service changed.
func stripExtras(cfg *composetypes.Config) {
	cfg.Extras = nil
	for i := range cfg.Services {
		cfg.Services[i].Extras = nil
	}
	for k, v := range cfg.Networks {
		v.Extras = nil
		cfg.Networks[k] = v
	}
	for k, v := range cfg.Volumes {
		v.Extras = nil
		cfg.Volumes[k] = v
	}
	for k, v := range cfg.Configs {
		v.Extras = nil
		cfg.Configs[k] = v
	}
	for k, v := range cfg.Secrets {
		v.Extras = nil
		cfg.Secrets[k] = v
	}
}

// ServiceNames returns the unscoped names of the services a manifest
// declares, sorted. It reads only the manifest and needs no daemon.
func ServiceNames(manifest string) ([]string, error) {
	_, cfg, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cfg.Services))
	for _, s := range cfg.Services {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names, nil
}

// ManifestStack returns the stack name a manifest was rendered for.
func ManifestStack(manifest string) (string, error) {
	var head struct {
		Kind  string `yaml:"kind"`
		Stack string `yaml:"stack"`
	}
	if err := yaml.Unmarshal([]byte(manifest), &head); err != nil {
		return "", fmt.Errorf("parse manifest: %w", err)
	}
	if head.Kind != manifestKind {
		return "", fmt.Errorf("parse manifest: kind %q, want %q", head.Kind, manifestKind)
	}
	return head.Stack, nil
}
