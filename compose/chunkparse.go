package compose

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"sync"
	"unicode/utf8"
)

// A compose file of a large stack is mostly services, and a commit
// changes few of them; parsing is then most of what a changed render
// costs. parseChunked parses such a file one top-level key and one service
// at a time, each piece on its own and remembered by its text, so only the
// pieces whose text changed are parsed again.
//
// A piece parsed on its own means what it means in the whole file when it
// parses at all: the file is cut only at lines that open a mapping entry
// at the top level or at the services' indentation, where block
// structure ends in any YAML parser; a cut inside a quoted or flow
// scalar leaves a piece that does not parse; an alias to an anchor of
// another piece does not resolve, unless the anchor is one of the
// top-level entries every service is parsed after (anchorPrefix). Anything else — a document marker, a
// directive, a tab, a merge key at either level, a key twice, a piece
// that is not one mapping entry — makes the whole file be parsed as one,
// which also gives the error a bad file has.

// chunkMin is the smallest number of services parseChunked cuts a file
// into, below which the file is parsed whole.
const chunkMin = incrementalMin

// parseChunked returns what parseYAML(src) returns, parsing the pieces of
// src that changed since an earlier call. always skips the size check, for
// tests.
// sums maps each service to the digest of its piece's text, which stands
// for its parsed value (see serviceKey); nil when src was parsed whole.
func parseChunked(src []byte, always bool) (dict map[string]any, sums map[string][sha256.Size]byte, err error) {
	if dict, sums, ok := chunked(src, always); ok {
		return dict, sums, nil
	}
	dict, err = parseYAML(src)
	return dict, nil, err
}

// chunk is one piece of a compose file: a top-level entry, or one service.
type chunk struct {
	text    []byte
	service bool
	header  bool // the services: line
}

func chunked(src []byte, always bool) (map[string]any, map[string][sha256.Size]byte, bool) {
	chunks, ok := cutChunks(src)
	if !ok {
		return nil, nil, false
	}
	services := 0
	for _, c := range chunks {
		if c.service {
			services++
		}
	}
	if services == 0 || (!always && services < chunkMin) {
		return nil, nil, false
	}
	prefix := anchorPrefix(chunks)
	dict := map[string]any{}
	sums := make(map[string][sha256.Size]byte, services)
	var svcs map[string]any
	for _, c := range chunks {
		var v map[string]any
		var sum [sha256.Size]byte
		if c.service {
			v, sum, ok = memo.chunks.parse(c, prefix)
		} else {
			v, sum, ok = memo.chunks.parse(c, nil)
		}
		if !ok || len(v) != 1 {
			return nil, nil, false
		}
		for k, val := range v {
			if c.service {
				if _, dup := svcs[k]; dup || svcs == nil {
					return nil, nil, false
				}
				svcs[k] = val
				sums[k] = sum
				continue
			}
			if _, dup := dict[k]; dup {
				return nil, nil, false
			}
			if c.header != (k == "services") {
				return nil, nil, false
			}
			if c.header {
				// The header line alone: the services follow as their
				// own pieces.
				if val != nil {
					return nil, nil, false
				}
				svcs = map[string]any{}
				val = svcs
			}
			dict[k] = val
		}
	}
	return dict, sums, true
}

// anchorPrefix is the text each service is parsed after when services
// merge or repeat anchors of the top-level entries before them (x-common:
// &common): those entries, in order. An alias resolves to the last anchor
// of its name before it; with no anchor in any service, that is one of
// these entries' in the whole file as in the service parsed after them.
// nil when the entries define no anchor or a service does.
func anchorPrefix(chunks []chunk) []byte {
	var prefix []byte
	for _, c := range chunks {
		if c.header {
			break
		}
		prefix = append(prefix, c.text...)
	}
	if bytes.IndexByte(prefix, '&') < 0 {
		return nil
	}
	for _, c := range chunks {
		if c.service && bytes.IndexByte(c.text, '&') >= 0 {
			return nil
		}
	}
	return prefix
}

// cutChunks cuts src at the lines that open a top-level entry or a
// service, or reports that it cannot be cut safely.
func cutChunks(src []byte) ([]chunk, bool) {
	if !plainText(src) {
		return nil, false
	}
	var out []chunk
	start := 0 // of the current piece
	inServices := false
	svcIndent := -1 // indentation of the service keys, once seen
	cur := chunk{}
	started := false // a top-level entry was seen
	flush := func(end int) {
		// A piece of comments and blank lines only means nothing.
		if end > start && hasEntry(src[start:end]) {
			cur.text = src[start:end]
			out = append(out, cur)
		}
		start = end
	}
	for off := 0; off < len(src); {
		end := bytes.IndexByte(src[off:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += off + 1
		}
		line := src[off:end]
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		rest := bytes.TrimRight(line[indent:], "\r\n")
		switch {
		case indent < len(line) && line[indent] == '\t':
			return nil, false
		case len(rest) == 0 || rest[0] == '#':
			// Blank or comment: stays with the piece before it.
		case indent > 0 && !started:
			// The document does not start at the left margin.
			return nil, false
		case indent == 0:
			if rest[0] == '-' || rest[0] == '.' || rest[0] == '%' || rest[0] == '<' || rest[0] == '?' || rest[0] == '{' || rest[0] == '[' || rest[0] == '&' || rest[0] == '*' || rest[0] == '!' || rest[0] == '|' || rest[0] == '>' {
				return nil, false
			}
			flush(off)
			started = true
			inServices = isServicesHeader(rest)
			cur = chunk{header: inServices}
			if inServices {
				// The header is a piece of its own.
				flush(end)
				cur = chunk{}
				svcIndent = -1
			}
		case inServices && (svcIndent < 0 || indent == svcIndent):
			if rest[0] == '-' || rest[0] == '<' || rest[0] == '?' || rest[0] == '&' || rest[0] == '*' || rest[0] == '!' {
				return nil, false
			}
			svcIndent = indent
			flush(off)
			cur = chunk{service: true}
		case inServices && indent < svcIndent:
			return nil, false
		}
		off = end
	}
	flush(len(src))
	for i := range out {
		if out[i].service {
			out[i].text = append([]byte("services:\n"), out[i].text...)
		}
	}
	return out, true
}

// plainText reports whether src is UTF-8 that YAML reads as printable
// throughout, with "\n" or "\r\n" as its only line breaks: what a parser
// refuses or breaks lines at must not hide in a piece that is dropped or
// cut elsewhere.
func plainText(src []byte) bool {
	for i, r := range string(src) {
		switch {
		case r == '\n' || r == '\t' || (r >= 0x20 && r <= 0x7e):
		case r == '\r':
			if i+1 >= len(src) || src[i+1] != '\n' {
				return false
			}
		case r == utf8.RuneError, r == 0x85, r == 0x2028, r == 0x2029, r == 0xfeff:
			return false
		case (r >= 0xa0 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd) || (r >= 0x10000 && r <= 0x10ffff):
		default:
			return false
		}
	}
	return true
}

// isServicesHeader reports whether a top-level line is "services:" with
// nothing after it but a comment.
func isServicesHeader(rest []byte) bool {
	after, ok := bytes.CutPrefix(rest, []byte("services:"))
	if !ok {
		return false
	}
	// A comment needs a space before its '#'.
	trimmed := bytes.TrimLeft(after, " ")
	return len(trimmed) == 0 || (trimmed[0] == '#' && len(trimmed) < len(after))
}

// hasEntry reports whether text has a line that is neither blank nor a
// comment.
func hasEntry(text []byte) bool {
	for line := range bytes.Lines(text) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}

// chunkMemo bounds itself by the text it keeps and forgets everything when
// full, which costs one parse of each piece.
type chunkMemo struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	m        map[[sha256.Size]byte]map[string]any
}

// parse returns the piece c parsed, a copy the caller may change, and the
// digest of its text, or false when it does not parse to a mapping.
//
// A service is parsed after prefix (see anchorPrefix), which does not
// count as its own content.
func (c *chunkMemo) parse(ch chunk, prefix []byte) (map[string]any, [sha256.Size]byte, bool) {
	text := ch.text
	if ch.service {
		text = slices.Concat([]byte("S"), prefix, ch.text)
	}
	sum := sha256.Sum256(text)
	c.mu.Lock()
	v, ok := c.m[sum]
	c.mu.Unlock()
	if !ok {
		var err error
		if ch.service {
			text = text[1:]
		}
		if v, err = parseYAML(text); err != nil || v == nil {
			return nil, sum, false
		}
		if ch.service {
			svcs, ok := v["services"].(map[string]any)
			if !ok || (prefix == nil && len(v) != 1) {
				return nil, sum, false
			}
			v = svcs
		}
		c.put(sum, len(text), v)
	}
	return copyValue(v).(map[string]any), sum, true
}

func (c *chunkMemo) put(sum [sha256.Size]byte, size int, v map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+size > c.maxBytes {
		c.m, c.bytes = map[[sha256.Size]byte]map[string]any{}, 0
	}
	c.m[sum] = copyValue(v).(map[string]any)
	c.bytes += size
}

// copyValue copies a parsed YAML value: maps and lists anew, scalars as
// they are.
func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		if v == nil {
			return v // a copy keeps nil apart from empty, as the parse had it
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}
