package sopsage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gopkg.in/ini.v1"
	"gopkg.in/yaml.v3"
)

// document is a sops file read in one format: its metadata, and a walk
// that decrypts its values in document order (the order of the MAC) and
// writes the plaintext file. Comments are not carried over: sops encrypts
// them, and nothing downstream of a render reads them.
type document interface {
	metadata() (*metadata, error)
	open(o *opener) ([]byte, error)
}

// errNoMetadata: the file parsed, but holds no sops entry.
var errNoMetadata = errors.New("no sops metadata")

func parseDocument(f Format, data []byte) (document, error) {
	switch f {
	case YAML:
		return parseYAML(data)
	case JSON, Binary:
		return parseJSON(data, f == Binary)
	case Dotenv:
		return parseDotenv(data)
	case INI:
		return parseINI(data)
	}
	return nil, fmt.Errorf("unknown format %q", f)
}

// YAML

type yamlDocument struct {
	raw  []byte
	docs []*yaml.Node
}

func parseYAML(data []byte) (*yamlDocument, error) {
	d := &yamlDocument{raw: data}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			return d, nil
		}
		if err != nil {
			return nil, err
		}
		d.docs = append(d.docs, &doc)
	}
}

func (d *yamlDocument) metadata() (*metadata, error) {
	var holder struct {
		Sops *metadata `yaml:"sops"`
	}
	if err := yaml.Unmarshal(d.raw, &holder); err != nil {
		return nil, err
	}
	if holder.Sops == nil {
		return nil, errNoMetadata
	}
	return holder.Sops, nil
}

func (d *yamlDocument) open(o *opener) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4)
	for _, doc := range d.docs {
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		switch {
		case root.Kind == yaml.MappingNode:
			kept := root.Content[:0:0]
			for i := 0; i+1 < len(root.Content); i += 2 {
				if k := root.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "sops" {
					continue
				}
				kept = append(kept, root.Content[i], root.Content[i+1])
			}
			root.Content = kept
		case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
			continue
		default:
			return nil, errors.New("a YAML document that is not a mapping")
		}
		clearComments(doc)
		if err := yamlWalk(o, root, nil); err != nil {
			return nil, err
		}
		if err := enc.Encode(doc); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func clearComments(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
}

func yamlWalk(o *opener, n *yaml.Node, path []string) error {
	clearComments(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			var key any
			if err := n.Content[i].Decode(&key); err != nil {
				return err
			}
			k, ok := key.(string)
			if !ok {
				return errors.New("a mapping key that is not a string")
			}
			clearComments(n.Content[i])
			if err := yamlWalk(o, n.Content[i+1], append(path[:len(path):len(path)], k)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if err := yamlWalk(o, item, path); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		if v == nil {
			return nil
		}
		plain, err := o.leaf(path, v)
		if err != nil {
			return err
		}
		if o.rules.encrypted(path) {
			setScalar(n, plain)
		}
	default:
		return errors.New("a YAML alias")
	}
	return nil
}

// setScalar writes a decrypted value into n with the tag of its type, so
// that a string that reads as a number stays a string.
func setScalar(n *yaml.Node, v any) {
	n.Style = 0
	switch v := v.(type) {
	case string:
		n.Tag, n.Value = "!!str", v
	case []byte:
		n.Tag, n.Value = "!!str", string(v)
	case int:
		n.Tag, n.Value = "!!int", strconv.Itoa(v)
	case float64:
		n.Tag, n.Value = "!!float", strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(v)
	case time.Time:
		n.Tag, n.Value = "!!timestamp", v.Format(time.RFC3339Nano)
	}
}

// JSON and binary

type jsonMember struct {
	key string
	val any
}

// jsonObject keeps the order of its members, which is the order of the
// MAC.
type jsonObject []jsonMember

type jsonDocument struct {
	raw    []byte
	top    jsonObject
	binary bool
}

func parseJSON(data []byte, binary bool) (*jsonDocument, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	v, err := readJSON(dec)
	if err != nil {
		return nil, err
	}
	top, ok := v.(jsonObject)
	if !ok {
		return nil, errors.New("the JSON document is not an object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON document")
	}
	return &jsonDocument{raw: data, top: top, binary: binary}, nil
}

// readJSON reads one value, keeping object members in order. Numbers are
// float64, as sops reads them.
func readJSON(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return t, nil
	}
	switch d {
	case '{':
		obj := jsonObject{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, errors.New("a JSON object key that is not a string")
			}
			v, err := readJSON(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, jsonMember{k, v})
		}
		_, err := dec.Token()
		return obj, err
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := readJSON(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return nil, errors.New("unexpected JSON delimiter")
}

func (d *jsonDocument) metadata() (*metadata, error) {
	var raw json.RawMessage
	for _, m := range d.top {
		if m.key == "sops" {
			b, err := json.Marshal(jsonValue(m.val))
			if err != nil {
				return nil, err
			}
			raw = b
		}
	}
	if raw == nil {
		return nil, errNoMetadata
	}
	var m metadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("the sops entry does not have the shape sops writes")
	}
	return &m, nil
}

// jsonValue turns ordered objects into maps, for encoding/json.
func jsonValue(v any) any {
	switch v := v.(type) {
	case jsonObject:
		m := make(map[string]any, len(v))
		for _, e := range v {
			m[e.key] = jsonValue(e.val)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}

func (d *jsonDocument) open(o *opener) ([]byte, error) {
	body := d.top[:0:0]
	for _, m := range d.top {
		if m.key != "sops" {
			body = append(body, m)
		}
	}
	v, err := jsonWalk(o, body, nil)
	if err != nil {
		return nil, err
	}
	body = v.(jsonObject)
	if d.binary {
		for _, m := range body {
			if m.key == "data" {
				if s, ok := m.val.(string); ok {
					return []byte(s), nil
				}
			}
		}
		return nil, errors.New("no string under \"data\"")
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, body); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "    "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func jsonWalk(o *opener, v any, path []string) (any, error) {
	switch v := v.(type) {
	case jsonObject:
		out := make(jsonObject, len(v))
		for i, m := range v {
			val, err := jsonWalk(o, m.val, append(path[:len(path):len(path)], m.key))
			if err != nil {
				return nil, err
			}
			out[i] = jsonMember{m.key, val}
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			val, err := jsonWalk(o, e, path)
			if err != nil {
				return nil, err
			}
			out[i] = val
		}
		return out, nil
	case nil:
		return nil, nil
	}
	return o.leaf(path, v)
}

func writeJSON(w *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case jsonObject:
		w.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			k, _ := json.Marshal(m.key)
			w.Write(k)
			w.WriteByte(':')
			if err := writeJSON(w, m.val); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.Write(b)
	}
	return nil
}

// dotenv

type dotenvItem struct {
	key, value string
}

type dotenvDocument struct {
	items []dotenvItem
	meta  map[string]string
}

// parseDotenv reads KEY=value lines as sops does: "\n" in a value is a
// newline, # starts a comment line, and every sops_ key is metadata.
func parseDotenv(data []byte) (*dotenvDocument, error) {
	d := &dotenvDocument{meta: map[string]string{}}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			return nil, fmt.Errorf("line %d is not KEY=value", i+1)
		}
		if name, isMeta := strings.CutPrefix(string(k), "sops_"); isMeta {
			d.meta[name] = string(v)
			continue
		}
		d.items = append(d.items, dotenvItem{string(k), strings.ReplaceAll(string(v), "\\n", "\n")})
	}
	return d, nil
}

func (d *dotenvDocument) metadata() (*metadata, error) {
	if len(d.meta) == 0 {
		return nil, errNoMetadata
	}
	return flatMetadata(d.meta)
}

func (d *dotenvDocument) open(o *opener) ([]byte, error) {
	var buf bytes.Buffer
	for _, it := range d.items {
		v, err := o.leaf([]string{it.key}, it.value)
		if err != nil {
			return nil, err
		}
		s := plainText(v)
		if _, ok := v.(string); ok {
			s = strings.ReplaceAll(s, "\n", "\\n")
		}
		buf.WriteString(it.key + "=" + s + "\n")
	}
	return buf.Bytes(), nil
}

// INI

type iniDocument struct {
	file *ini.File
}

func parseINI(data []byte) (*iniDocument, error) {
	f, err := ini.LoadSources(ini.LoadOptions{AllowNonUniqueSections: true}, data)
	if err != nil {
		return nil, err
	}
	return &iniDocument{file: f}, nil
}

func (d *iniDocument) metadata() (*metadata, error) {
	s, err := d.file.GetSection("sops")
	if err != nil {
		return nil, errNoMetadata
	}
	return flatMetadata(s.KeysHash())
}

func (d *iniDocument) open(o *opener) ([]byte, error) {
	out := ini.Empty(ini.LoadOptions{AllowNonUniqueSections: true})
	out.DeleteSection(ini.DefaultSection)
	for _, s := range d.file.Sections() {
		if s.Name() == "sops" || (s.Name() == ini.DefaultSection && len(s.Keys()) == 0) {
			continue
		}
		ns, err := out.NewSection(s.Name())
		if err != nil {
			return nil, err
		}
		for _, k := range s.Keys() {
			v, err := o.leaf([]string{s.Name(), k.Name()}, k.Value())
			if err != nil {
				return nil, err
			}
			if _, err := ns.NewKey(k.Name(), plainText(v)); err != nil {
				return nil, err
			}
		}
	}
	var buf bytes.Buffer
	if _, err := out.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
