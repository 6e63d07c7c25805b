package application

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/fault"
)

// Kinds of problem, for errors.Is on the Err of a *fault.Error. The
// messages users read are more specific; these only classify.
var (
	// ErrSyntax: the file is not YAML, is empty, or holds several documents.
	ErrSyntax = errors.New("invalid YAML")
	// ErrUnknownField: a key no field is named after. Strictness catches
	// typos that would otherwise silently fall back to a default.
	ErrUnknownField = errors.New("unknown field")
	// ErrDuplicate: a key repeated in one mapping, a name or stack two
	// applications share, or a file's field two image policies write.
	ErrDuplicate = errors.New("duplicate")
	// ErrType: a value of the wrong shape (a list where a string belongs).
	ErrType = errors.New("wrong type")
	// ErrRequired: a field that has no default was left out.
	ErrRequired = errors.New("required")
	// ErrInvalid: a value of the right type that the rules refuse.
	ErrInvalid = errors.New("invalid value")
)

// problem is the Err of every *fault.Error this package reports: a message
// written for the user, classified by one of the sentinels above.
type problem struct {
	kind error
	msg  string
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return p.kind }

func newProblem(kind error, format string, args ...any) error {
	return &problem{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// meta is what parsing learned about the text behind a File.
type meta struct {
	file string
	// lines maps a field path (applications[0].source.path) to the line it
	// was written on.
	lines map[string]int
	// bad holds paths that failed to decode; Validate keeps quiet at and
	// under them so one mistake is reported once, not again as "required".
	bad map[string]bool
}

// lineOf returns the line of path or, when path was not written (a missing
// required field), of its nearest written ancestor.
func (m *meta) lineOf(path string) int {
	if m == nil {
		return 0
	}
	for {
		if l, ok := m.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// written reports whether path was in the file at all.
func (m *meta) written(path string) bool {
	if m == nil {
		return false
	}
	_, ok := m.lines[path]
	return ok
}

// suppressed reports whether path or one of its ancestors failed to decode.
func (m *meta) suppressed(path string) bool {
	if m == nil || len(m.bad) == 0 {
		return false
	}
	for {
		if m.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// Load reads, parses, defaults and validates the applications file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read applications file: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data strictly, applies Defaults and runs Validate, so a
// File it returns is ready to use. filename is only used in messages.
//
// On failure the File is nil and the error joins (errors.Join) one
// *fault.Error per problem, decoding and validation alike, in line order:
// a user fixing the file sees everything at once rather than one problem per
// attempt.
func Parse(filename string, data []byte) (*File, error) {
	root, err := parseDocument(filename, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{
		m:      &meta{file: filename, lines: map[string]int{"": 1}, bad: map[string]bool{}},
		budget: maxNodes,
	}
	f := &File{meta: d.m}
	d.decode(root, "", reflect.ValueOf(f).Elem())
	for _, fe := range d.errs {
		fe.App = appNameAt(f, fe.Field)
	}
	Defaults(f)
	probs := append(d.errs, validate(f)...)
	if len(probs) > 0 {
		return nil, joinFaults(probs)
	}
	return f, nil
}

// joinFaults orders problems by line (unknown lines last) and joins them.
func joinFaults(probs []*fault.Error) error {
	if len(probs) == 0 {
		return nil
	}
	slices.SortStableFunc(probs, func(a, b *fault.Error) int {
		return cmp.Compare(lineKey(a.Line), lineKey(b.Line))
	})
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = p
	}
	return errors.Join(errs...)
}

func lineKey(l int) int {
	if l <= 0 {
		return int(^uint(0) >> 1)
	}
	return l
}

var appIndexRE = regexp.MustCompile(`^applications\[(\d+)\]`)

// appNameAt names the application a field path lies under, if it has one.
func appNameAt(f *File, path string) string {
	m := appIndexRE.FindStringSubmatch(path)
	if m == nil {
		return ""
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= len(f.Applications) {
		return ""
	}
	return f.Applications[i].Name
}

// yamlLineRE pulls the line out of yaml.v3's syntax errors, which carry it
// only in the message.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument returns the single document's root node, or one syntax
// problem.
func parseDocument(filename string, data []byte) (*yaml.Node, error) {
	syntax := func(line int, msg string) error {
		return &fault.Error{File: filename, Line: line, Err: &problem{kind: ErrSyntax, msg: msg}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, syntax(0, "the file is empty")
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		return nil, syntax(line, "invalid YAML: "+msg)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntax(0, "invalid YAML after the first document: "+strings.TrimPrefix(err.Error(), "yaml: "))
	default:
		return nil, syntax(extra.Line, "only one YAML document is allowed")
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, syntax(doc.Line, "the file is empty")
	}
	return doc.Content[0], nil
}

// maxNodes bounds how many nodes one file may expand to, far above a
// thousand applications with long allowlists. Aliases are
// pointers in the parsed tree, so a few lines of anchors can describe
// billions of values; the walk stops long before that.
const maxNodes = 1 << 18

// decoder walks a yaml.Node tree into Go values by their yaml tags. It is
// used instead of yaml.Node.Decode with KnownFields because that stops at
// the first unknown key and gives positions only inside message text.
type decoder struct {
	m      *meta
	errs   []*fault.Error
	budget int
}

func (d *decoder) fail(path string, line int, err error) {
	d.errs = append(d.errs, &fault.Error{File: d.m.file, Line: line, Field: path, Err: err})
	d.m.bad[path] = true
}

var (
	durationType = reflect.TypeFor[Duration]()
	valuesType   = reflect.TypeFor[Values]()
)

// values decodes a free-form mapping, which the chart and not this package
// gives meaning to; it must still be a mapping with string keys.
func (d *decoder) values(n *yaml.Node, line int, path string, v reflect.Value) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(path, line, wrongType("a mapping", n))
		return
	}
	d.budget -= countNodes(n, d.budget)
	if d.budget < 0 {
		d.fail(path, line, newProblem(ErrInvalid, "the file expands to more than %d values (too many aliases?)", maxNodes))
		d.m.bad[""] = true
		return
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		d.fail(path, line, newProblem(ErrType, "must be a mapping with string keys: %s", strings.TrimPrefix(err.Error(), "yaml: ")))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		d.m.lines[joinPath(path, n.Content[i].Value)] = n.Content[i].Line
	}
	v.Set(reflect.ValueOf(Values(m)))
}

// countNodes counts the nodes under n, following aliases, and stops once
// the count passes limit.
func countNodes(n *yaml.Node, limit int) int {
	count := 0
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if count > limit {
			return
		}
		count++
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			walk(n.Alias)
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return count
}

// decode sets v from n. The caller has recorded path's line.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	line := n.Line
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.fail(path, line, newProblem(ErrInvalid, "the file expands to more than %d values (too many aliases?)", maxNodes))
			// What was decoded is incomplete; validating it would only
			// add noise.
			d.m.bad[""] = true
		}
		return
	}
	if v.Type() == valuesType {
		d.values(n, line, path, v)
		return
	}
	if v.Type() == durationType {
		if isNull(n) {
			return
		}
		dur, err := parseDuration(n)
		if err != nil {
			d.fail(path, line, err)
			return
		}
		v.Set(reflect.ValueOf(Duration{dur}))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		// Null leaves a scalar pointer unset (its default applies) but
		// makes a struct pointer present: `automated:` reads as enabled.
		if isNull(n) && v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		p := reflect.New(v.Type().Elem())
		d.decode(n, path, p.Elem())
		v.Set(p)
	case reflect.Struct:
		d.mapping(n, line, path, v)
	case reflect.Slice:
		d.sequence(n, line, path, v)
	case reflect.String:
		if isNull(n) {
			return
		}
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
			// Text that merely looks like a number or date (a tag
			// "1.10", a revision "2024-01-01") is still text.
			if n.Kind == yaml.ScalarNode {
				v.SetString(n.Value)
				return
			}
		}
		d.fail(path, line, wrongType("a string", n))
	case reflect.Bool:
		var b bool
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.fail(path, line, wrongType("true or false", n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.fail(path, line, wrongType("an integer", n))
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// Ports (allow.hostPorts) are unsigned: a negative number or one
		// past the field's size is the wrong type, not a wrapped value.
		var u uint64
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&u) != nil || v.OverflowUint(u) {
			d.fail(path, line, wrongType(fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<(v.Type().Bits())-1), n))
			return
		}
		v.SetUint(u)
	default:
		// Only reachable if types.go gains a field of a kind not handled
		// above; say so instead of silently dropping the value.
		d.fail(path, line, newProblem(ErrType, "cannot decode into %s", v.Type()))
	}
}

func (d *decoder) mapping(n *yaml.Node, line int, path string, v reflect.Value) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(path, line, wrongType("a mapping", n))
		return
	}
	fields, names := structFields(v.Type())
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kn := k
		for kn.Kind == yaml.AliasNode && kn.Alias != nil {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			d.fail(path, k.Line, newProblem(ErrType, "keys must be plain strings, found %s", describe(kn)))
			continue
		}
		key := kn.Value
		fp := joinPath(path, key)
		if kn.ShortTag() == "!!merge" {
			d.fail(fp, k.Line, newProblem(ErrUnknownField, "merge keys (<<) are not supported; anchor and alias individual values instead"))
			continue
		}
		if first, dup := seen[key]; dup {
			d.fail(fp, k.Line, newProblem(ErrDuplicate, "key %q is set twice (first on line %d)", key, first))
			continue
		}
		seen[key] = k.Line
		idx, ok := fields[key]
		if !ok {
			d.fail(fp, k.Line, unknownField(key, names))
			continue
		}
		d.m.lines[fp] = k.Line
		d.decode(val, fp, v.Field(idx))
	}
}

func (d *decoder) sequence(n *yaml.Node, line int, path string, v reflect.Value) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(path, line, wrongType("a list", n))
		return
	}
	if len(n.Content) == 0 {
		return // [] means the same as absent; keep one representation
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := path + "[" + strconv.Itoa(i) + "]"
		d.m.lines[ip] = item.Line
		d.decode(item, ip, s.Index(i))
	}
	v.Set(s)
}

// structFields maps yaml key to field index, and lists the keys in
// declaration order for messages.
func structFields(t reflect.Type) (map[string]int, []string) {
	fields := make(map[string]int, t.NumField())
	var names []string
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		fields[name] = i
		names = append(names, name)
	}
	return fields, names
}

// secretHints maps keys someone might use to write a credential inline to
// the file field that holds it instead. Matched case-insensitively.
var secretHints = map[string]string{
	"password":      "passwordFile",
	"passwd":        "passwordFile",
	"token":         "passwordFile",
	"accesstoken":   "passwordFile",
	"apitoken":      "passwordFile",
	"username":      "usernameFile",
	"user":          "usernameFile",
	"privatekey":    "sshKeyFile",
	"sshkey":        "sshKeyFile",
	"sshprivatekey": "sshKeyFile",
	"key":           "sshKeyFile",
	"knownhosts":    "knownHostsFile",
}

func unknownField(key string, known []string) error {
	if hint, ok := secretHints[strings.ToLower(key)]; ok {
		return newProblem(ErrUnknownField,
			"unknown field %q: credentials are never written inline; put the value in a file and name it with source.credentials.%s", key, hint)
	}
	for _, k := range known {
		if editDistance(strings.ToLower(k), strings.ToLower(key)) <= 2 {
			return newProblem(ErrUnknownField, "unknown field %q (did you mean %q?)", key, k)
		}
	}
	return newProblem(ErrUnknownField, "unknown field %q (known: %s)", key, strings.Join(known, ", "))
}

// editDistance is the Levenshtein distance between a and b, for suggesting
// the field a typo meant.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parseDuration reads a Go duration string. Numbers are refused: "30"
// could mean seconds or nanoseconds, and guessing wrong is silent.
func parseDuration(n *yaml.Node) (time.Duration, error) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int", "!!float":
			return 0, newProblem(ErrType, "a bare number is not a duration; add a unit, such as %q or %q", n.Value+"s", n.Value+"m")
		case "!!str":
			v, err := time.ParseDuration(n.Value)
			if err != nil {
				return 0, newProblem(ErrInvalid, "invalid duration %q: write it like \"90s\", \"3m\" or \"1h30m\"", n.Value)
			}
			return v, nil
		}
	}
	return 0, wrongType("a duration such as \"3m\"", n)
}

func wrongType(want string, n *yaml.Node) error {
	return newProblem(ErrType, "must be %s, found %s", want, describe(n))
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!null":
			return "nothing"
		case "!!str":
			// Not quoted back: a string in the wrong place may be a
			// secret pasted where a file name or mapping belonged.
			return "a string"
		}
		return "a value tagged " + n.Tag
	}
	return "an unresolved alias"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
