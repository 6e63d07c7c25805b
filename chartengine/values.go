package chartengine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/fault"
)

// parseValues reads one values document: a mapping, or nothing at all.
func parseValues(file string, data []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]any{}, nil
		}
		return nil, yamlFault(file, ErrValues, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &fault.Error{File: file, Err: fmt.Errorf("%w: a values file holds one YAML document", ErrValues)}
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := normalize(v).(map[string]any)
	if !ok {
		return nil, &fault.Error{File: file, Err: fmt.Errorf("%w: must be a mapping, found %s", ErrValues, describe(v))}
	}
	return m, nil
}

// normalize turns what yaml.v3 decodes into the shapes JSON has: mappings
// with string keys (yaml allows others), lists, scalars. Templates and the
// schema then see one representation whatever the source.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case nil:
		return "nothing"
	}
	return "a " + fmt.Sprintf("%T", v)
}

// mergeValues lays over onto base, in place, and returns base: mappings
// merge key by key, anything else replaces, and a null removes the key (as
// `--set key=null` does in Helm).
func mergeValues(base, over map[string]any) map[string]any {
	for k, v := range over {
		if v == nil {
			delete(base, k)
			continue
		}
		if om, ok := v.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = mergeValues(bm, om)
				continue
			}
			base[k] = mergeValues(map[string]any{}, om)
			continue
		}
		base[k] = v
	}
	return base
}

// copyValues is a deep copy, so merging never edits the chart's defaults
// or a caller's map.
func copyValues(m map[string]any) map[string]any {
	return mergeValues(map[string]any{}, m)
}

// SplitKey splits a dotted set key into its parts; `\.` is a literal dot
// inside a part. List indices are not supported.
func SplitKey(key string) ([]string, error) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\\' && i+1 < len(key) && key[i+1] == '.':
			cur.WriteByte('.')
			i++
		case c == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		case c == '[' || c == ']':
			return nil, fmt.Errorf("%q: list indices are not supported in set keys; set the whole list in a values file", key)
		default:
			cur.WriteByte(c)
		}
	}
	parts = append(parts, cur.String())
	if slices.Contains(parts, "") {
		return nil, fmt.Errorf("%q: empty part in a dotted key", key)
	}
	return parts, nil
}

// setValues turns dotted keys into nested values, in sorted key order so
// that "a=1" and "a.b=2" given together always resolve the same way (the
// longer key wins).
func setValues(set map[string]any) (map[string]any, error) {
	out := map[string]any{}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts, err := SplitKey(k)
		if err != nil {
			return nil, err
		}
		node := out
		for _, p := range parts[:len(parts)-1] {
			next, ok := node[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[p] = next
			}
			node = next
		}
		v := normalize(set[k])
		switch v.(type) {
		case map[string]any, []any:
			return nil, fmt.Errorf("%q: a set value is a single value; put mappings and lists in values", k)
		}
		node[parts[len(parts)-1]] = v
	}
	return out, nil
}

// ParseSetValue reads the value of a command-line `key=value` the way Helm's
// --set does: true, false and null are themselves, a decimal integer without
// leading zeros is a number, and everything else (including 1.5 and 0123)
// stays text.
func ParseSetValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
		return int(n)
	}
	return s
}

// valuesDigest is the sha256 of the merged values in canonical JSON (sorted
// keys): two renders with the same digest saw the same values. When a value
// file was decrypted it is an HMAC under key instead, so the digest in a
// release record cannot be used to guess a weak secret offline.
func valuesDigest(v map[string]any, decrypted []string, key []byte) (string, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: values are not representable as JSON: %v", ErrValues, err)
	}
	if len(decrypted) > 0 {
		m := hmac.New(sha256.New, key)
		m.Write(js)
		return "hmacSHA256:" + hex.EncodeToString(m.Sum(nil)), nil
	}
	sum := sha256.Sum256(js)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// schemaURL is the made-up location the chart's schema is compiled at.
const schemaURL = "flotilla-chart:///values.schema.json"

// noLoader refuses every $ref outside the schema document: a schema must
// not make a render read a file or reach the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %q: only references inside values.schema.json are allowed", url)
}

func compileSchema(file string, data []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, &fault.Error{File: file, Err: fmt.Errorf("%w: not JSON: %v", ErrValues, err)}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, &fault.Error{File: file, Err: fmt.Errorf("%w: %v", ErrValues, err)}
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, &fault.Error{File: file, Err: fmt.Errorf("%w: not a valid JSON Schema: %s", ErrValues, strings.ReplaceAll(err.Error(), schemaURL, SchemaFile))}
	}
	return sch, nil
}

// SchemaViolation is one value the schema refuses.
type SchemaViolation struct {
	// Path is the dotted value path ("image.tag"), "" for the whole values.
	Path string
	// Rule is the schema keyword that failed ("type", "minimum", ...).
	Rule string
	// Message says what is wrong, in the validator's words.
	Message string
}

// validateValues checks merged values against the chart's schema and
// reports every violation, sorted by path. at is where vals sit in the
// top chart's values ("cache" for a subchart), prefixed to every path.
func (c *Chart) validateValues(vals map[string]any, at string) error {
	if c.schema == nil {
		return nil
	}
	file := c.rel(SchemaFile)
	sch, err := compileSchema(file, c.schema)
	if err != nil {
		return err
	}
	js, err := json.Marshal(vals)
	if err != nil {
		return &fault.Error{File: file, Err: fmt.Errorf("%w: values are not representable as JSON: %v", ErrValues, err)}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return &fault.Error{File: file, Err: fmt.Errorf("%w: %v", ErrValues, err)}
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &fault.Error{File: file, Err: fmt.Errorf("%w: %v", ErrValues, err)}
	}
	vs := violations(ve, nil)
	for i := range vs {
		switch {
		case at != "" && vs[i].Path != "":
			vs[i].Path = at + "." + vs[i].Path
		case at != "":
			vs[i].Path = at
		}
	}
	slices.SortFunc(vs, func(a, b SchemaViolation) int { return strings.Compare(a.Path+"\x00"+a.Rule, b.Path+"\x00"+b.Rule) })
	msgs := make([]string, 0, len(vs))
	for _, v := range vs {
		p := v.Path
		if p == "" {
			p = "(values)"
		}
		msgs = append(msgs, fmt.Sprintf("value %s breaks rule %q: %s", p, v.Rule, v.Message))
	}
	fe := &fault.Error{File: file, Err: &SchemaError{Violations: vs, msg: strings.Join(msgs, "; ")}}
	if len(vs) > 0 {
		fe.Field = vs[0].Path
	}
	return fe
}

// SchemaError lists what the schema refused.
type SchemaError struct {
	Violations []SchemaViolation
	msg        string
}

func (e *SchemaError) Error() string { return "values do not match the chart's schema: " + e.msg }
func (e *SchemaError) Unwrap() error { return ErrValues }

// printer words the validator's messages. It is made on the first
// violation, not at start-up: most controllers never see one.
var printer = sync.OnceValue(func() *message.Printer { return message.NewPrinter(language.English) })

// violations flattens a validation error tree to its leaves.
func violations(ve *jsonschema.ValidationError, out []SchemaViolation) []SchemaViolation {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			out = violations(c, out)
		}
		return out
	}
	rule := ""
	if kw := ve.ErrorKind.KeywordPath(); len(kw) > 0 {
		rule = kw[len(kw)-1]
	}
	return append(out, SchemaViolation{
		Path:    strings.Join(ve.InstanceLocation, "."),
		Rule:    rule,
		Message: ve.ErrorKind.LocalizedString(printer()),
	})
}
