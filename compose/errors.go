package compose

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/docker/cli/cli/compose/loader"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/fault"
)

// ErrUnsupported is wrapped by refusals of compose features that a GitOps
// render cannot honour the way `docker stack deploy` does on a workstation
// (relative bind mounts, config content inline in the file).
var ErrUnsupported = errors.New("not supported by flotilla")

// Patterns of the loader's messages that name the offending field. The
// loader has no typed error for them, so the field is read from the text;
// a message that matches none keeps its text and names no field.
var (
	// The schema validator: "services.web: additional property 'foo' is not
	// allowed", or, for several keys of one mapping, "services.web:
	// additional properties 'foo', 'bar' not allowed". The top level is
	// "(root)".
	additionalRE = regexp.MustCompile(`^(\S+): additional propert(?:y|ies) ('[^']*'(?:, '[^']*')*) (?:is )?not allowed$`)
	// The schema validator's other messages start with the dotted field
	// and a colon.
	schemaRE = regexp.MustCompile(`^((?:version|services|networks|volumes|configs|secrets)(?:\.\S+)?): `)
	// Interpolation: "invalid interpolation format for services.web.image: ..."
	// and "error while interpolating services.web.image: ...".
	interpRE = regexp.MustCompile(`(?:interpolation format for|while interpolating) (\S+?):? `)
	// yaml.v3: "yaml: line 4: mapping values are not allowed in this context".
	yamlLineRE = regexp.MustCompile(`^yaml: line (\d+):`)
)

// loadFault turns an error of loader.Load about one compose file into a
// fault.Error naming the file, the field when the message gives it, and the
// line when the field can be found in the file's YAML.
func loadFault(f composeFile, err error) *fault.Error {
	fe := &fault.Error{File: f.rel, Err: err}
	src := f.src
	var forbidden *loader.ForbiddenPropertiesError
	if errors.As(err, &forbidden) {
		// The loader says which options, not where: find the first use.
		services, _ := f.dict["services"].(map[string]any)
		for _, name := range sortedKeys(services) {
			svc, _ := services[name].(map[string]any)
			for _, opt := range sortedKeys(forbidden.Properties) {
				if _, ok := svc[opt]; ok {
					fe.Field = "services." + name + "." + opt
					fe.Line = lineOf(src, fe.Field)
					fe.Err = fmt.Errorf("%s is not supported by docker stack deploy: %s", opt, forbidden.Properties[opt])
					return fe
				}
			}
		}
		fe.Err = fmt.Errorf("unsupported service options: %s", strings.Join(sortedKeys(forbidden.Properties), ", "))
		return fe
	}
	msg := err.Error()
	switch {
	case additionalRE.MatchString(msg):
		m := additionalRE.FindStringSubmatch(msg)
		// Several unknown keys are named together, in no fixed order: they
		// are sorted, and the field is the one the file has first.
		keys := strings.Split(strings.Trim(m[2], "'"), "', '")
		slices.Sort(keys)
		first := keys[0]
		for _, k := range keys[1:] {
			if l := lineOf(src, joinField(m[1], k)); l != 0 && l < lineOf(src, joinField(m[1], first)) {
				first = k
			}
		}
		keys = append([]string{first}, slices.DeleteFunc(keys, func(k string) bool { return k == first })...)
		fe.Field = joinField(m[1], first)
		fe.Err = fmt.Errorf("unknown key %q", keys[0])
		if len(keys) > 1 {
			fe.Err = fmt.Errorf("unknown keys %q", keys)
		}
		if hint := unsupportedHint(fe.Field); hint != "" {
			fe.Err = fmt.Errorf("%w (%s): %w", fe.Err, hint, ErrUnsupported)
		}
	case interpRE.MatchString(msg):
		fe.Field = interpRE.FindStringSubmatch(msg)[1]
	case schemaRE.MatchString(msg):
		fe.Field = schemaRE.FindStringSubmatch(msg)[1]
		fe.Err = errors.New(strings.TrimSpace(strings.TrimPrefix(msg, fe.Field+":")))
	}
	if fe.Field != "" && src != nil {
		fe.Line = lineOf(src, fe.Field)
	}
	return fe
}

// unsupportedHint explains keys a newer compose spec has and the v3 schema
// that `docker stack deploy` uses does not.
func unsupportedHint(field string) string {
	parts := strings.Split(field, ".")
	if len(parts) == 3 && (parts[0] == "configs" || parts[0] == "secrets") &&
		(parts[2] == "content" || parts[2] == "environment") {
		return "inline " + parts[0] + " need a newer compose spec than docker stack deploy reads; use file:"
	}
	return ""
}

func joinField(parent, child string) string {
	if parent == "" || parent == "(root)" {
		return child
	}
	return parent + "." + child
}

// utf8Fault refuses a compose file that is not UTF-8 text, naming the
// line and column of the first bad byte: the YAML parser's own message
// ("invalid leading UTF-8 octet") says neither, and YAML can carry no
// other encoding to the daemon byte for byte anyway.
func utf8Fault(file string, src []byte) *fault.Error {
	if utf8.Valid(src) {
		return nil
	}
	line, start := 1, 0
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n == 1 {
			col := utf8.RuneCount(src[start:i]) + 1
			return &fault.Error{File: file, Line: line, Err: fmt.Errorf("not UTF-8 text: byte 0x%02x at column %d (compose files are UTF-8; binary content belongs in a config's file)", src[i], col)}
		}
		if r == '\n' {
			line, start = line+1, i+1
		}
		i += n
	}
	return nil
}

// nulField returns the dotted path of the first key or string under v
// that holds a NUL, or "". The daemon would take such a value and the
// container would fail at its start, far from the file that said it.
func nulField(v any, at string) string {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) {
			return at
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if strings.ContainsRune(k, 0) {
				return joinField(at, strconv.Quote(k))
			}
			if f := nulField(v[k], joinField(at, k)); f != "" {
				return f
			}
		}
	case []any:
		for i, e := range v {
			if f := nulField(e, joinField(at, strconv.Itoa(i))); f != "" {
				return f
			}
		}
	}
	return ""
}

// yamlFault is a compose or env file that is not YAML at all.
func yamlFault(file string, err error) *fault.Error {
	fe := &fault.Error{File: file, Err: err}
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Err = errors.New(strings.TrimSpace(strings.TrimPrefix(err.Error(), m[0])))
	}
	return fe
}

// lineOf finds the 1-based line of a dotted field path in src, or the
// nearest ancestor that exists; 0 when src does not parse. Numeric parts
// index sequences.
func lineOf(src []byte, field string) int {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	node := doc.Content[0]
	line := node.Line
	// A list index may be written steps[1] as well as steps.1.
	field = strings.NewReplacer("[", ".", "]", "").Replace(field)
	for _, part := range strings.Split(field, ".") {
		node = child(node, part)
		if node == nil {
			break
		}
		line = node.Line
	}
	return line
}

// child returns the value of key in a mapping (its key node's line is the
// one reported) or the element at an index of a sequence.
func child(n *yaml.Node, key string) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				v := *n.Content[i+1]
				v.Line = n.Content[i].Line
				return &v
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}
