package compose

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yaml.v3 writes a multi-line string as a literal block, and that block
// loses a leading newline, cannot hold a tab at the start of a line, a
// carriage return or a lone "\n", and its reader fails on some of them.
// What the repository declares would then differ from what is deployed,
// and drift, comparing against the same altered text, could never tell.
// A manifest holding such a string is therefore encoded through a node
// tree in which each of them is double-quoted, a style whose escapes hold
// any text; a manifest without one is encoded exactly as before, so
// stored releases do not all look changed.

// fragile maps placeholders to the strings they stand for while a
// manifest is encoded.
type fragile map[string]string

// find reports whether v holds a string yaml.v3 does not read back as it
// writes it.
func (f fragile) find(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return !roundTrips(v.String())
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && f.find(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && f.find(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if f.find(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if f.find(it.Key()) || f.find(it.Value()) {
				return true
			}
		}
	}
	return false
}

// node encodes v into a node tree with every fragile string double-quoted.
// The strings are swapped for plain placeholders in a copy of v first,
// since yaml.v3 builds a node by writing text and reading it back, the
// very step that fails; the placeholders are then swapped back in the
// tree, where no text is read.
func (f fragile) node(v any) (*yaml.Node, error) {
	var doc yaml.Node
	if err := doc.Encode(f.swap(reflect.ValueOf(v)).Interface()); err != nil {
		return nil, err
	}
	f.restore(&doc)
	return &doc, nil
}

// swap returns a deep copy of v with each fragile string replaced.
func (f fragile) swap(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if roundTrips(s) {
			return v
		}
		p := "flotilla-fragile-string-" + strconv.Itoa(len(f))
		f[p] = s
		return reflect.ValueOf(p).Convert(v.Type())
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(f.swap(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(f.swap(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(f.swap(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(f.swap(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(f.swap(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(f.swap(it.Key()), f.swap(it.Value()))
		}
		return out
	}
	return v
}

// restore puts the original strings back in place of their placeholders.
func (f fragile) restore(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if s, ok := f[n.Value]; ok {
			n.Value, n.Tag, n.Style = s, "!!str", yaml.DoubleQuotedStyle
		}
		return
	}
	for _, c := range n.Content {
		f.restore(c)
	}
}

// roundTrips reports whether yaml.v3 reads s back unchanged from the
// encoding a manifest uses, in every position a manifest string can take.
// The position matters: a block scalar whose first line begins with a
// space carries an indentation indicator, and yaml.v3 writes that
// indicator relative to a different column than it reads it from when the
// scalar is a sequence item, so " #\n" survives alone or as a map value
// and comes back empty as a command argument. Only strings with line
// breaks, tabs, carriage returns or surrounding spaces are at risk; the
// rest are not encoded to find out.
func roundTrips(s string) bool {
	if !strings.ContainsAny(s, "\n\r\t") && strings.TrimSpace(s) == s {
		return true
	}
	for _, v := range []any{
		s,
		[]string{s},
		map[string]string{"k": s},
		map[string][]string{"k": {s}},
		[]map[string]string{{"k": s}},
		map[string][]map[string][]string{"k": {{"k": {s}}}},
	} {
		if !encodesBack(v) {
			return false
		}
	}
	return true
}

// encodesBack reports whether v decodes from its manifest encoding (the
// indent encodeManifest sets) to a value equal to v.
func encodesBack(v any) bool {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(manifestIndent)
	if enc.Encode(v) != nil || enc.Close() != nil {
		return false
	}
	back := reflect.New(reflect.TypeOf(v))
	return yaml.Unmarshal(b.Bytes(), back.Interface()) == nil && reflect.DeepEqual(back.Elem().Interface(), v)
}

// quoteAtRisk double-quotes every string scalar of n that a block style
// could alter. The compose section of a stored manifest is written out
// again for the compose loader, at yaml.v3's default indent, and the
// decoded tree keeps each scalar's style: a literal block whose first
// line begins with a space was written back with an indentation indicator
// yaml.v3 reads from another column, so the command argument " #\n" was
// loaded as "" and " x\n" not at all. Double quotes hold any text in any
// position, and a manifest written before the writer quoted such strings
// is read right too.
func quoteAtRisk(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!str" && !(strings.TrimSpace(n.Value) == n.Value && !strings.ContainsAny(n.Value, "\n\r\t")) {
			n.Style = yaml.DoubleQuotedStyle
		}
		return
	}
	for _, c := range n.Content {
		quoteAtRisk(c)
	}
}
