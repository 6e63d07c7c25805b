package sopsage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
)

// Format is the shape sops gave an encrypted file. It decides how the
// file is parsed and how its plaintext is written back out.
type Format string

// The formats sops writes. Binary is a whole file encrypted as one value,
// kept in a JSON object under "data".
const (
	Binary Format = "binary"
	YAML   Format = "yaml"
	JSON   Format = "json"
	Dotenv Format = "dotenv"
	INI    Format = "ini"
)

// FormatOf is the format sops picks for a file name when it is not told
// one: by extension, binary for anything it does not recognise.
func FormatOf(file string) Format {
	switch ext := path.Ext(strings.ToLower(file)); {
	case ext == ".yaml" || ext == ".yml":
		return YAML
	case ext == ".json":
		return JSON
	case strings.HasSuffix(strings.ToLower(file), ".env"):
		// sops matches the suffix, so a file named just ".env" counts.
		return Dotenv
	case ext == ".ini":
		return INI
	}
	return Binary
}

// Detect reports whether data is sops output and in which format.
//
// The format its name implies is tried first. Because a file that looks
// encrypted must never pass on as ciphertext, the other formats are tried
// too when that one does not match: a file encrypted with an explicit
// --input-type keeps whatever name it had.
//
// Detection looks only for sops metadata (a top-level "sops" entry with a
// "mac", or its dotenv and INI spellings); it does not validate the file,
// so a broken encrypted file is still detected and then refused.
func Detect(file string, data []byte) (Format, bool) {
	// Every spelling of the metadata contains both words; most files
	// contain neither and need no parsing at all.
	if !bytes.Contains(data, []byte("sops")) || !bytes.Contains(data, []byte("mac")) {
		return "", false
	}
	first := FormatOf(file)
	if f, ok := detectAs(first, data); ok {
		return f, true
	}
	for _, f := range []Format{JSON, YAML, Dotenv, INI} {
		if f == first || (f == JSON && first == Binary) {
			continue
		}
		if f, ok := detectAs(f, data); ok {
			return f, true
		}
	}
	return "", false
}

// detectAs checks data for sops metadata written in format f. JSON output
// of the binary format is told apart from an encrypted JSON document by
// its shape: exactly "data" and "sops".
func detectAs(f Format, data []byte) (Format, bool) {
	switch f {
	case Binary, JSON:
		keys, ok := jsonSopsKeys(data)
		if !ok {
			return "", false
		}
		if f == Binary && !(len(keys) == 2 && keys["data"]) {
			return JSON, true
		}
		return f, true
	case YAML:
		return YAML, yamlHasSops(data)
	case Dotenv:
		return Dotenv, dotenvHasSops(data)
	case INI:
		return INI, iniHasSops(data)
	}
	return "", false
}

// jsonSopsKeys returns the top-level keys of a JSON object that carries a
// "sops" object with a "mac". Keys are compared exactly: encoding/json's
// case-insensitive struct matching would let "SOPS" count.
func jsonSopsKeys(data []byte) (map[string]bool, bool) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(trimmed, &top) != nil {
		return nil, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["sops"], &meta) != nil {
		return nil, false
	}
	if _, ok := meta["mac"]; !ok {
		return nil, false
	}
	keys := make(map[string]bool, len(top))
	for k := range top {
		keys[k] = true
	}
	return keys, true
}

// yamlHasSops looks at the first document only, as the sops YAML store
// keeps its metadata there.
func yamlHasSops(data []byte) (found bool) {
	defer func() {
		if recover() != nil {
			found = false
		}
	}()
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return false
	}
	meta := mappingValue(doc.Content[0], "sops")
	return meta != nil && mappingValue(meta, "mac") != nil
}

// yamlHasAlias reports whether any document in data uses an alias. sops
// never writes one, and its YAML store expands them while loading, so a
// few lines of nested aliases would cost exponential time and memory.
func yamlHasAlias(data []byte) (found bool) {
	defer func() {
		if recover() != nil {
			found = true
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			// io.EOF ends the stream; a syntax error is for the store to
			// report.
			return false
		}
		stack := []*yaml.Node{&doc}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n.Kind == yaml.AliasNode {
				return true
			}
			stack = append(stack, n.Content...)
		}
	}
}

// mappingValue returns the value of key in mapping n, or nil. Aliases are
// not followed: sops never writes them in its metadata.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// dotenvHasSops finds the flattened MAC entry sops appends to a dotenv
// file.
func dotenvHasSops(data []byte) bool {
	return eachLine(data, func(line string) bool {
		return strings.HasPrefix(line, "sops_mac=")
	})
}

// iniHasSops finds a [sops] section holding a mac entry.
func iniHasSops(data []byte) bool {
	inSops := false
	return eachLine(data, func(line string) bool {
		if strings.HasPrefix(line, "[") {
			inSops = line == "[sops]"
			return false
		}
		if !inSops {
			return false
		}
		k, _, ok := strings.Cut(line, "=")
		return ok && strings.TrimSpace(k) == "mac"
	})
}

// eachLine calls match with each trimmed line until it returns true.
func eachLine(data []byte, match func(string) bool) bool {
	for line := range bytes.Lines(data) {
		if match(string(bytes.TrimSpace(line))) {
			return true
		}
	}
	return false
}

// String makes a Format print as its name, for messages.
func (f Format) String() string {
	if f == "" {
		return "unknown"
	}
	return string(f)
}

var _ fmt.Stringer = Format("")
