package sopsage

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// metadata is the part of a file's "sops" entry that decryption needs.
// Keys of the types this build does not open are kept only by name, to
// say which ones a file needs.
type metadata struct {
	KeyGroups               []keyGroup `json:"key_groups" yaml:"key_groups"`
	ShamirThreshold         int        `json:"shamir_threshold" yaml:"shamir_threshold"`
	LastModified            string     `json:"lastmodified" yaml:"lastmodified"`
	MAC                     string     `json:"mac" yaml:"mac"`
	UnencryptedSuffix       string     `json:"unencrypted_suffix" yaml:"unencrypted_suffix"`
	EncryptedSuffix         string     `json:"encrypted_suffix" yaml:"encrypted_suffix"`
	UnencryptedRegex        string     `json:"unencrypted_regex" yaml:"unencrypted_regex"`
	EncryptedRegex          string     `json:"encrypted_regex" yaml:"encrypted_regex"`
	UnencryptedCommentRegex string     `json:"unencrypted_comment_regex" yaml:"unencrypted_comment_regex"`
	EncryptedCommentRegex   string     `json:"encrypted_comment_regex" yaml:"encrypted_comment_regex"`
	MACOnlyEncrypted        bool       `json:"mac_only_encrypted" yaml:"mac_only_encrypted"`
	// The keys of a file with a single group sit at the top level.
	keyGroup `yaml:",inline"`
}

// keyGroup holds the keys of one group. Only age stanzas are read; the
// other kinds are counted, for messages.
type keyGroup struct {
	Age     []ageStanza `json:"age" yaml:"age"`
	PGP     []any       `json:"pgp" yaml:"pgp"`
	KMS     []any       `json:"kms" yaml:"kms"`
	GCPKMS  []any       `json:"gcp_kms" yaml:"gcp_kms"`
	HCKMS   []any       `json:"hckms" yaml:"hckms"`
	AzureKV []any       `json:"azure_kv" yaml:"azure_kv"`
	Vault   []any       `json:"hc_vault" yaml:"hc_vault"`
}

type ageStanza struct {
	Recipient string `json:"recipient" yaml:"recipient"`
	Enc       string `json:"enc" yaml:"enc"`
}

// others names the kinds of non-age key in g, as sops spells them.
func (g keyGroup) others() []string {
	var out []string
	for _, k := range []struct {
		name string
		n    int
	}{{"pgp", len(g.PGP)}, {"kms", len(g.KMS)}, {"gcp_kms", len(g.GCPKMS)}, {"hckms", len(g.HCKMS)}, {"azure_kv", len(g.AzureKV)}, {"hc_vault", len(g.Vault)}} {
		if k.n > 0 {
			out = append(out, k.name)
		}
	}
	return out
}

func (g keyGroup) empty() bool { return len(g.Age) == 0 && len(g.others()) == 0 }

// rules is what decides, for each value, whether it was encrypted, and
// the associated data of the MAC. It is checked as sops checks it when
// the file is read.
type rules struct {
	groups           []keyGroup
	lastModified     string // as the MAC's associated data: RFC 3339
	mac              string
	unencSuffix      string
	encSuffix        string
	unencRegex       *regexp.Regexp
	encRegex         *regexp.Regexp
	macOnlyEncrypted bool
}

// errLibraryOnly marks a file that uses a sops feature this package reads
// only through the full sops library (the kms build): comment-driven
// encryption rules or Shamir key groups.
type errLibraryOnly struct{ feature string }

func (e errLibraryOnly) Error() string { return "it uses " + e.feature }

// compile checks m and turns it into rules. The errors do not quote the
// file beyond its metadata, which is never secret.
func (m *metadata) compile() (*rules, error) {
	t, err := time.Parse(time.RFC3339, m.LastModified)
	if err != nil {
		return nil, errors.New("lastmodified is not an RFC 3339 time")
	}
	r := &rules{
		lastModified:     t.Format(time.RFC3339),
		mac:              m.MAC,
		unencSuffix:      m.UnencryptedSuffix,
		encSuffix:        m.EncryptedSuffix,
		macOnlyEncrypted: m.MACOnlyEncrypted,
	}
	if !m.keyGroup.empty() {
		r.groups = []keyGroup{m.keyGroup}
	} else {
		r.groups = m.KeyGroups
	}
	set := 0
	for _, s := range []string{m.UnencryptedSuffix, m.EncryptedSuffix, m.UnencryptedRegex, m.EncryptedRegex, m.UnencryptedCommentRegex, m.EncryptedCommentRegex} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return nil, errors.New("more than one encryption rule (suffix or regex) is set")
	}
	if set == 0 {
		r.unencSuffix = "_unencrypted"
	}
	if m.UnencryptedRegex != "" {
		if r.unencRegex, err = regexp.Compile(m.UnencryptedRegex); err != nil {
			return nil, errors.New("unencrypted_regex does not compile")
		}
	}
	if m.EncryptedRegex != "" {
		if r.encRegex, err = regexp.Compile(m.EncryptedRegex); err != nil {
			return nil, errors.New("encrypted_regex does not compile")
		}
	}
	if m.UnencryptedCommentRegex != "" || m.EncryptedCommentRegex != "" {
		return r, errLibraryOnly{"comment-driven encryption rules (encrypted_comment_regex, unencrypted_comment_regex)"}
	}
	if len(r.groups) > 1 {
		return r, errLibraryOnly{fmt.Sprintf("%d key groups (Shamir secret sharing)", len(r.groups))}
	}
	return r, nil
}

// recipients lists the age recipients of every group, and the other kinds
// of key the file names, sorted and without duplicates.
func (r *rules) recipients() (recipients, others []string) {
	for _, g := range r.groups {
		for _, a := range g.Age {
			recipients = append(recipients, a.Recipient)
		}
		others = append(others, g.others()...)
	}
	slices.Sort(recipients)
	slices.Sort(others)
	return slices.Compact(recipients), slices.Compact(others)
}

// encrypted reports whether sops encrypted the value at path, by the same
// rules, in the same order of precedence, that it applies.
func (r *rules) encrypted(path []string) bool {
	enc := true
	if r.unencSuffix != "" && slices.ContainsFunc(path, func(p string) bool { return strings.HasSuffix(p, r.unencSuffix) }) {
		enc = false
	}
	if r.encSuffix != "" {
		enc = slices.ContainsFunc(path, func(p string) bool { return strings.HasSuffix(p, r.encSuffix) })
	}
	if r.unencRegex != nil && slices.ContainsFunc(path, r.unencRegex.MatchString) {
		enc = false
	}
	if r.encRegex != nil {
		enc = slices.ContainsFunc(path, r.encRegex.MatchString)
	}
	return enc
}

// flatMetadata rebuilds the metadata that the dotenv and INI stores keep
// flattened into keys such as age__list_0__map_recipient.
func flatMetadata(flat map[string]string) (*metadata, error) {
	root := map[string]any{}
	for k, v := range flat {
		v = strings.ReplaceAll(v, "\\n", "\n")
		var val any = v
		switch k {
		case "mac_only_encrypted":
			val = v == "true"
		case "shamir_threshold":
			n, err := strconv.Atoi(v)
			if err != nil {
				f, ferr := strconv.ParseFloat(v, 64)
				if ferr != nil || float64(int(f)) != f {
					return nil, errors.New("shamir_threshold is not an integer")
				}
				n = int(f)
			}
			val = n
		}
		if err := setFlat(root, k, val); err != nil {
			return nil, err
		}
	}
	js, err := json.Marshal(listsOf(root))
	if err != nil {
		return nil, err
	}
	var m metadata
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, errors.New("the flattened metadata does not have the shape sops writes")
	}
	return &m, nil
}

// setFlat stores val in root under the path a flattened key spells:
// "__map_NAME" descends into a map, "__list_N" into element N of a list
// (kept as a map from index until listsOf turns it into a slice).
func setFlat(root map[string]any, key string, val any) error {
	type token struct {
		name string
		list bool
	}
	var tokens []token
	start, list := 0, false
	for i := 0; i < len(key); {
		switch {
		case strings.HasPrefix(key[i:], "__map_"):
			tokens = append(tokens, token{key[start:i], list})
			i += len("__map_")
			start, list = i, false
		case strings.HasPrefix(key[i:], "__list_"):
			tokens = append(tokens, token{key[start:i], list})
			i += len("__list_")
			start, list = i, true
		default:
			i++
		}
	}
	tokens = append(tokens, token{key[start:], list})
	cur := root
	for i, t := range tokens {
		if i == len(tokens)-1 {
			if _, taken := cur[t.name]; taken {
				return errors.New("the flattened metadata names one entry twice")
			}
			cur[t.name] = val
			return nil
		}
		child, ok := cur[t.name].(map[string]any)
		if !ok {
			if _, taken := cur[t.name]; taken {
				return errors.New("the flattened metadata names one entry twice")
			}
			child = map[string]any{}
			cur[t.name] = child
		}
		if tokens[i+1].list {
			child[listMark] = true
		}
		cur = child
	}
	return nil
}

// listMark marks a map setFlat built for a list.
const listMark = "\x00list"

// listsOf turns the maps setFlat marked as lists into slices, ordered by
// index.
func listsOf(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if m[listMark] == true {
		delete(m, listMark)
		idx := make([]int, 0, len(m))
		byIdx := map[int]any{}
		for k, e := range m {
			n, err := strconv.Atoi(k)
			if err != nil {
				continue
			}
			idx = append(idx, n)
			byIdx[n] = listsOf(e)
		}
		slices.Sort(idx)
		out := make([]any, 0, len(idx))
		for _, n := range idx {
			out = append(out, byIdx[n])
		}
		return out
	}
	for k, e := range m {
		m[k] = listsOf(e)
	}
	return m
}
