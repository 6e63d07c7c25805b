package chartengine

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/flotilla-gitops/flotilla/fault"
)

// sealMark begins every placeholder that stands for a decrypted text value
// while templates run. It is upper case letters and digits only, so YAML
// never quotes, escapes or folds it, and upper/lower keep it findable.
const sealMark = "FLOTILLASEALED"

// seals are the placeholders a render put in place of decrypted text
// values: templates never see the plaintext, so no transform of it (b64enc,
// upper, printf, quoting, a block scalar) can carry it into the manifest.
type seals struct {
	key     []byte
	byValue map[string]string // plaintext -> token
	path    map[string]string // token -> first values path holding it
	forms   map[string]string // encoded form of a token (lower case) -> token
}

// newSeals keys the placeholders with key, or with a key of this render
// alone when there is none: a placeholder must not let anyone guess the
// value it stands for.
func newSeals(key []byte) (*seals, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("seal key: %w", err)
		}
	}
	return &seals{key: key, byValue: map[string]string{}, path: map[string]string{}, forms: map[string]string{}}, nil
}

// seal replaces, in place, every text value of vals equal to a decrypted
// value with its placeholder. Numbers and booleans stay as they are, so a
// decrypted value can still decide a replica count or an `if`.
func (s *seals) seal(vals map[string]any, secrets []string) {
	set := map[string]bool{}
	for _, v := range secrets {
		set[v] = true
	}
	s.walk(vals, "", set)
}

func (s *seals) walk(v any, at string, secret map[string]bool) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			v[k] = s.walk(v[k], joinPath(at, k), secret)
		}
		return v
	case []any:
		for i := range v {
			v[i] = s.walk(v[i], at+"["+strconv.Itoa(i)+"]", secret)
		}
		return v
	case string:
		if len(v) < minRedacted || !secret[v] {
			return v
		}
		return s.token(v, at)
	}
	return v
}

func joinPath(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func (s *seals) token(plain, at string) string {
	if t, ok := s.byValue[plain]; ok {
		return t
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(plain))
	t := sealMark + strings.ToUpper(hex.EncodeToString(m.Sum(nil)[:10]))
	s.byValue[plain] = t
	s.path[t] = at
	for _, f := range encodedForms(t) {
		s.forms[strings.ToLower(f)] = t
	}
	return t
}

// encodedForms are the spellings of a token a template's transforms give:
// itself (in any case), hex, and base64 at each of the three alignments it
// can have inside a longer encoded text. A form is long enough that it
// cannot turn up by chance.
func encodedForms(t string) []string {
	forms := []string{t, hex.EncodeToString([]byte(t))}
	for shift := 0; shift < 3; shift++ {
		pad := strings.Repeat("\x00", shift)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			e := enc.EncodeToString([]byte(pad + t))
			// Drop the characters that also depend on the neighbours.
			start := (shift*4 + 2) / 3
			end := len(e) - 4
			if end > start {
				forms = append(forms, e[start:end])
			}
		}
	}
	return forms
}

// find is the token a text holds in any of its forms, or "".
func (s *seals) find(text string) string {
	if len(s.byValue) == 0 {
		return ""
	}
	lower := strings.ToLower(text)
	for f, t := range s.forms {
		if strings.Contains(lower, f) {
			return t
		}
	}
	return ""
}

// refuseSealed refuses a rendered document that holds a placeholder, in
// any of its forms, anywhere: keys and values alike. The error names the
// chart, the template that wrote the field, the field and the values path
// the decrypted value came from, never the value.
func (s *renderSet) refuseSealed(doc map[string]any, origin map[string]string, sl *seals) error {
	if len(sl.byValue) == 0 {
		return nil
	}
	field, tok := sealedField(doc, "", sl)
	if tok == "" {
		return nil
	}
	c := s.top
	file := c.rel(TemplatesDir)
	if t := originOf(origin, field); t != "" {
		file = s.fileOf(t)
	}
	return &fault.Error{File: file, Field: field, Err: fmt.Errorf(
		"%w: chart %s: the template writes value %s, which came from an encrypted value file, into the output (transformed or not), where the release record would keep it: put the secret in an encrypted file under files/ and mount it as a secret, whose content is never recorded",
		ErrPlaintextSecret, c.Meta.Name, sl.path[tok])}
}

// sealedField is the first field (dotted; a list element's is its list's)
// of v that holds a placeholder, and the placeholder.
func sealedField(v any, at string, sl *seals) (string, string) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			f := joinPath(at, k)
			if t := sl.find(k); t != "" {
				return f, t
			}
			if f, t := sealedField(v[k], f, sl); t != "" {
				return f, t
			}
		}
	case []any:
		for _, e := range v {
			if f, t := sealedField(e, at, sl); t != "" {
				return f, t
			}
		}
	case string:
		if t := sl.find(v); t != "" {
			return at, t
		}
	default:
		if v != nil {
			if t := sl.find(fmt.Sprint(v)); t != "" {
				return at, t
			}
		}
	}
	return "", ""
}
