// Package drift compares the ServiceSpec a repository converts to with the
// one the swarm holds, field by field, and says what differs in words a
// person can read.
//
// The hard half is not the comparison but what comes before it: the daemon
// and the docker client fill in defaults, rewrite references and reorder
// nothing consistently, so two specs that mean the same thing rarely look
// the same. Each side is first reduced to a flat set of fields in one
// canonical form (see normalize.go, which says what the daemon does for each
// rule), and only then compared. An untouched stack must report nothing.
//
// It is a pure function of two specs: no daemon, no clock.
package drift

import (
	"regexp"
	"sort"
	"strings"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/redact"
)

// Change is one field that differs between the desired and the live spec.
type Change struct {
	// Field is a stable dotted path: "image", "env.FOO", "labels.x",
	// "resources.limits.memory", "placement.constraints", "ports", ...
	Field string `json:"field"`
	// Desired and Live are readable renderings of each side; "(none)" for
	// a side that does not have the field. Masked values read "***".
	Desired string `json:"desired"`
	Live    string `json:"live"`
	// Masked is true when either value was hidden because it looks like a
	// credential.
	Masked bool `json:"masked,omitempty"`
}

// Options say what the caller knows beyond the two specs.
type Options struct {
	// NetworkNames maps network ids to names. Live specs attach networks
	// by id, desired ones by name, so without it the two cannot be matched:
	// nil means unknown, and network attachments are then left out of the
	// comparison entirely. The caller knows it passed nil and reports
	// "networks not compared"; an empty non-nil map means "no networks
	// exist" and every live attachment shows by id.
	NetworkNames map[string]string
	// IgnoreLabels lists service label key prefixes that never count as
	// drift. LabelPrefix is always ignored in addition.
	IgnoreLabels []string
	// SecretEnvPattern matches env, label and log option keys whose values
	// are masked. Nil uses DefaultSecretPattern.
	SecretEnvPattern *regexp.Regexp
	// MaskEnv names env variables whose values are masked whatever their
	// name: the caller knows they were decrypted (from a SOPS-encrypted
	// file), so neither side may be shown.
	MaskEnv map[string]bool
}

// LabelPrefix starts the service labels Flotilla stamps on every deploy
// (owner, revision, spec hash). They are metadata about the deploy, not
// part of what the repository declares, so they never drift.
const LabelPrefix = labels.Prefix

// DefaultSecretPattern matches keys whose values are treated as credentials.
var DefaultSecretPattern = regexp.MustCompile(`(?i)(PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|KEY|CREDENTIAL|PRIVATE|AUTH|SALT)`)

// Diff returns the fields that differ between desired (what the repository
// converts to) and live (what the swarm holds), sorted by Field. Both specs
// are normalised first, so defaults the daemon fills in, digests it pins to
// a tag, ids it writes for names and orderings that carry no meaning are not
// reported. It returns nil when the specs mean the same thing.
func Diff(desired, live swarm.ServiceSpec, opts Options) []Change {
	if opts.SecretEnvPattern == nil {
		opts.SecretEnvPattern = DefaultSecretPattern
	}
	d, l := flatten(desired, opts), flatten(live, opts)

	var out []Change
	for _, f := range unionKeys(d, l) {
		dv, dok := d[f]
		lv, lok := l[f]
		if f == "placement.platforms" && !dok {
			// The client adds platforms when it pins a digest; a
			// repository that declares none accepts any.
			continue
		}
		if f == "image" && dok && lok {
			if SameImage(dv.text, lv.text) {
				continue
			}
		} else if dv.text == lv.text && dok == lok {
			continue
		}
		c := Change{Field: f, Desired: dv.show(dok), Live: lv.show(lok), Masked: dv.masked || lv.masked}
		out = append(out, c)
	}
	return dropModeEchoes(out)
}

// dropModeEchoes removes the replica counts of a service whose mode changed:
// a replicated service turned global has no replicas to compare, and the
// mode change already says everything.
func dropModeEchoes(cs []Change) []Change {
	modeChanged := false
	for _, c := range cs {
		if c.Field == "mode" {
			modeChanged = true
		}
	}
	if !modeChanged {
		return cs
	}
	out := cs[:0]
	for _, c := range cs {
		if c.Field != "replicas" && c.Field != "maxConcurrent" {
			out = append(out, c)
		}
	}
	return out
}

// none is how a side that lacks a field reads.
const none = "(none)"

// mask replaces a hidden value.
const mask = redact.Mark

// value is one field of one side, already rendered canonically. text is
// what is compared; display, when set, is what a masked value shows instead
// of "***" (a log driver with only its token hidden).
type value struct {
	text    string
	display string
	masked  bool
}

func (v value) show(present bool) string {
	switch {
	case !present:
		return none
	case v.display != "":
		return v.display
	case v.masked:
		return mask
	}
	return v.text
}

// fields is a flattened, normalised spec: field path to rendered value.
type fields map[string]value

func (f fields) set(field, text string) { f[field] = value{text: text} }

func (f fields) secret(field, text string) { f[field] = value{text: text, masked: true} }

func unionKeys(a, b fields) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func ignoredLabel(key string, prefixes []string) bool {
	if strings.HasPrefix(key, LabelPrefix) {
		return true
	}
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
