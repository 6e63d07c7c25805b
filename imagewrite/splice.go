// Package imagewrite changes the image references an application's
// policies mark in its repository's files, and nothing else: it finds the
// marked scalar with a YAML parse, then replaces exactly that scalar's
// bytes, so comments, key order, quoting, anchors, indentation and line
// endings are the file's own after the write. A re-marshal would normalise
// all of them, and a human reviewing the commit would see a rewritten file
// instead of one changed value.
//
// In the reconcile pass it sits before fetch: the updater commits here
// through source, and the next pass deploys what git now says. With a
// pull request policy it proposes instead (source.Propose, then the
// forge's Proposer), and the pass deploys once a human merges.
package imagewrite

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Field is one marked scalar found in a file.
type Field struct {
	// Path is the keys from the document's root to the scalar.
	Path []string
	// Value is the scalar's value.
	Value string
	// start and end delimit the scalar's bytes, quotes included.
	start, end int
	style      yaml.Style
}

// Sentinels of Find.
var (
	// ErrNotScalar: the marked path holds something other than a plain
	// or quoted one-line scalar (a block scalar, a mapping, an alias).
	ErrNotScalar = errors.New("not a one-line scalar")
	// ErrNoField: the marked path is not in the file (a key is absent,
	// comes from a merge key, or a parent is not a mapping).
	ErrNoField = errors.New("no such field")
)

// Find locates the scalar at path in data.
func Find(data []byte, path []string) (*Field, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: %w: the file is empty", strings.Join(path, "."), ErrNoField)
	}
	n := doc.Content[0]
	for i, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %w: %s is not a mapping", strings.Join(path, "."), ErrNoField, strings.Join(path[:i], "."))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key && n.Content[j].Kind == yaml.ScalarNode {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%s: %w: no key %q", strings.Join(path, "."), ErrNoField, key)
		}
		n = next
	}
	switch {
	case n.Kind == yaml.AliasNode:
		return nil, fmt.Errorf("%s: %w: it is an alias (*%s); the anchored value is used elsewhere too", strings.Join(path, "."), ErrNotScalar, n.Value)
	case n.Kind != yaml.ScalarNode:
		return nil, fmt.Errorf("%s: %w", strings.Join(path, "."), ErrNotScalar)
	case n.Anchor != "" && aliased(&doc, n):
		return nil, fmt.Errorf("%s: %w: its anchor &%s is used by aliases, which would change too", strings.Join(path, "."), ErrNotScalar, n.Anchor)
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return nil, fmt.Errorf("%s: %w: block scalars are not rewritten", strings.Join(path, "."), ErrNotScalar)
	}
	start, err := offset(data, n.Line, n.Column)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(path, "."), err)
	}
	if n.Anchor != "" {
		// The node's position is its anchor's; the value follows it.
		start = skipAnchor(data, start)
	}
	end, err := scalarEnd(data, start, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(path, "."), err)
	}
	return &Field{Path: path, Value: n.Value, start: start, end: end, style: n.Style}, nil
}

// aliased reports whether any alias in the document points at target.
func aliased(n, target *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias == target {
		return true
	}
	for _, c := range n.Content {
		if aliased(c, target) {
			return true
		}
	}
	return false
}

// offset converts yaml.v3's 1-based line and character column to a byte
// offset.
func offset(data []byte, line, col int) (int, error) {
	pos := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			return 0, fmt.Errorf("line %d is past the end of the file", line)
		}
		pos += i + 1
	}
	for c := 1; c < col; c++ {
		if pos >= len(data) || data[pos] == '\n' {
			return 0, fmt.Errorf("column %d is past the end of line %d", col, line)
		}
		_, w := utf8.DecodeRune(data[pos:])
		pos += w
	}
	return pos, nil
}

func skipAnchor(data []byte, pos int) int {
	if pos < len(data) && data[pos] == '&' {
		for pos < len(data) && data[pos] != ' ' && data[pos] != '\t' {
			pos++
		}
		for pos < len(data) && (data[pos] == ' ' || data[pos] == '\t') {
			pos++
		}
	}
	return pos
}

// scalarEnd finds where the scalar starting at start ends, and checks that
// its bytes are what the parser read, so a splice never lands beside the
// value.
func scalarEnd(data []byte, start int, n *yaml.Node) (int, error) {
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(data); i++ {
			switch data[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			case '\n':
				return 0, fmt.Errorf("%w: a quoted value spanning lines is not rewritten", ErrNotScalar)
			}
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		for i := start + 1; i < len(data); i++ {
			switch data[i] {
			case '\'':
				if i+1 < len(data) && data[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			case '\n':
				return 0, fmt.Errorf("%w: a quoted value spanning lines is not rewritten", ErrNotScalar)
			}
		}
	default:
		end := start + len(n.Value)
		if end <= len(data) && string(data[start:end]) == n.Value {
			return end, nil
		}
		return 0, fmt.Errorf("%w: the value is not written on one line as read", ErrNotScalar)
	}
	return 0, fmt.Errorf("%w: unterminated quoted value", ErrNotScalar)
}

// Change is a new value for a found field.
type Change struct {
	Field *Field
	New   string
}

// Apply returns data with each change's scalar replaced by its new value
// in the scalar's own quoting style; every other byte is data's. The
// fields must come from Find on this data. The result is parsed again and
// each path checked, so a write that would not read back as intended is
// refused.
func Apply(data []byte, changes []Change) ([]byte, error) {
	sorted := append([]Change(nil), changes...)
	// Splice from the end, so earlier offsets stay valid.
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j].Field.start > sorted[j-1].Field.start; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	out := bytes.Clone(data)
	for i, c := range sorted {
		if i > 0 && c.Field.end > sorted[i-1].Field.start {
			return nil, fmt.Errorf("%s: overlaps another change", strings.Join(c.Field.Path, "."))
		}
		lit, err := quote(c.New, c.Field.style)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(c.Field.Path, "."), err)
		}
		out = append(out[:c.Field.start:c.Field.start], append([]byte(lit), out[c.Field.end:]...)...)
	}
	for _, c := range changes {
		f, err := Find(out, c.Field.Path)
		if err != nil {
			return nil, fmt.Errorf("after the change: %w", err)
		}
		if f.Value != c.New {
			return nil, fmt.Errorf("%s: reads back as %q, not %q", strings.Join(c.Field.Path, "."), f.Value, c.New)
		}
	}
	return out, nil
}

// quote spells v in style. Image references and tags never need escapes
// (their grammar is letters, digits and ._-:/@); anything else is refused
// rather than escaped into a style the file did not use.
func quote(v string, style yaml.Style) (string, error) {
	if v == "" || strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:/@+", r))
	}) >= 0 {
		return "", fmt.Errorf("%q is not an image reference or tag", v)
	}
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		return `"` + v + `"`, nil
	case style&yaml.SingleQuotedStyle != 0:
		return "'" + v + "'", nil
	}
	// A plain scalar that YAML would read as a number or bool (a tag
	// such as 1.10 or 2) must be quoted to stay a string.
	var probe any
	if err := yaml.Unmarshal([]byte(v), &probe); err != nil {
		return "", fmt.Errorf("%q cannot be written plain: %w", v, err)
	}
	if s, ok := probe.(string); !ok || s != v {
		return `"` + v + `"`, nil
	}
	return v, nil
}
