package access

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// TokenEntry is one token of the tokens file. Only the token's digest is
// stored, so the file can be read by anyone who may see the configuration.
type TokenEntry struct {
	// Name is what role bindings, logs and the audit call the token.
	// Lowercase letters, digits, '-', '_' and '.'; unique. Required.
	Name string `yaml:"name"`
	// SHA256 is the hex SHA-256 of the token (`printf %s "$TOKEN" |
	// sha256sum`). Required.
	SHA256 string `yaml:"sha256"`
}

// tokensFile is the file's shape: one key, so that it can grow.
type tokensFile struct {
	Tokens []TokenEntry `yaml:"tokens"`
}

// ReservedNames are the names of the controller's global tokens; a tokens
// file may not reuse them, or a project binding meant for one token would
// reach the other.
var ReservedNames = []string{"admin", "read", "anonymous"}

var tokenNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ParseTokens decodes a tokens file strictly: an unknown key, a duplicate
// or reserved name, or a digest that is not 64 hex digits is an error
// naming the file, the line and the entry.
func ParseTokens(filename string, data []byte) ([]TokenEntry, error) {
	var f tokensFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("tokens file %s: %w", filename, err)
	}
	var node yaml.Node
	_ = yaml.Unmarshal(data, &node)
	lines := entryLines(&node)
	var errs []error
	bad := func(i int, field, format string, args ...any) {
		line := ""
		if i < len(lines) {
			line = fmt.Sprintf(":%d", lines[i])
		}
		errs = append(errs, fmt.Errorf("tokens file %s%s: tokens[%d].%s: %s", filename, line, i, field, fmt.Sprintf(format, args...)))
	}
	seen := map[string]int{}
	for i, e := range f.Tokens {
		switch {
		case e.Name == "":
			bad(i, "name", "required")
		case !tokenNameRE.MatchString(e.Name):
			bad(i, "name", "%q must be lowercase letters, digits, '-', '_' or '.', at most 63", e.Name)
		case contains(ReservedNames, e.Name):
			bad(i, "name", "%q is the name of a global token; choose another", e.Name)
		default:
			if j, dup := seen[e.Name]; dup {
				bad(i, "name", "%q is already used by tokens[%d]", e.Name, j)
			}
			seen[e.Name] = i
		}
		// The value is never quoted: someone may have pasted the token
		// itself instead of its digest.
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
			bad(i, "sha256", "must be the 64 hex digits of the token's SHA-256, not the token")
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f.Tokens, nil
}

// entryLines returns the line of each item under the top-level tokens key.
func entryLines(doc *yaml.Node) []int {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	var out []int
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "tokens" {
			for _, item := range m.Content[i+1].Content {
				out = append(out, item.Line)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// digestEntry is a parsed entry, its digest decoded.
type digestEntry struct {
	name   string
	digest [sha256.Size]byte
}

// TokenFile is the tokens file as the API checks tokens against it. Every
// Match first looks at the file (a stat; a read only when it changed), so a
// token removed from the file is refused on the very next request. A file
// that cannot be read or does not parse refuses every token of it until
// fixed, and OnError hears why: failing open would keep a revoked token
// working.
type TokenFile struct {
	path string
	// OnError is called once per change of the file that leaves it
	// unusable. Nil: ignored.
	OnError func(error)
	// OnLoad is called after each successful (re)load with the count.
	OnLoad func(n int)

	mu       sync.Mutex
	info     fs.FileInfo
	data     []byte    // what was loaded
	loadedAt time.Time // when
	entries  []digestEntry
	failed   bool
}

// racyWindow: a file modified this close to (or after) its load may have
// changed again within the same modification-time tick, which a stat cannot
// see, so its content is compared too, as git does for its index.
const racyWindow = 2 * time.Second

// OpenTokenFile reads the tokens file at path; an unusable file at start is
// an error, so the controller refuses to start on it.
func OpenTokenFile(path string) (*TokenFile, error) {
	t := &TokenFile{path: path}
	if err := t.load(); err != nil {
		return nil, err
	}
	return t, nil
}

// Path is the file's path.
func (t *TokenFile) Path() string { return t.path }

func (t *TokenFile) load() error {
	info, err := os.Stat(t.path)
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	list, err := ParseTokens(t.path, data)
	if err != nil {
		return err
	}
	entries := make([]digestEntry, len(list))
	for i, e := range list {
		entries[i].name = e.Name
		b, _ := hex.DecodeString(e.SHA256)
		copy(entries[i].digest[:], b)
	}
	t.info, t.data, t.loadedAt, t.entries, t.failed = info, data, time.Now(), entries, false
	if t.OnLoad != nil {
		t.OnLoad(len(entries))
	}
	return nil
}

// changed reports whether the file is not the one last loaded.
func (t *TokenFile) changed() bool {
	info, err := os.Stat(t.path)
	if err != nil {
		return true
	}
	old := t.info
	if old == nil || !os.SameFile(old, info) || !info.ModTime().Equal(old.ModTime()) || info.Size() != old.Size() {
		return true
	}
	if info.ModTime().After(t.loadedAt.Add(-racyWindow)) {
		data, err := os.ReadFile(t.path)
		return err != nil || !bytes.Equal(data, t.data)
	}
	return false
}

// refresh reloads the file when it changed; on failure it empties the set.
func (t *TokenFile) refresh() {
	if !t.changed() {
		return
	}
	if err := t.load(); err != nil {
		if !t.failed && t.OnError != nil {
			t.OnError(err)
		}
		t.entries, t.failed = nil, true
		t.info = nil
	}
}

// Match returns the name of the entry whose digest is the SHA-256 of
// presented. Every entry is compared in constant time, so the timing shows
// neither which entry matched nor how far a guess got.
func (t *TokenFile) Match(presented string) (string, bool) {
	if t == nil {
		return "", false
	}
	p := sha256.Sum256([]byte(presented))
	t.mu.Lock()
	t.refresh()
	entries := t.entries
	t.mu.Unlock()
	name, ok := "", 0
	for _, e := range entries {
		if subtle.ConstantTimeCompare(p[:], e.digest[:]) == 1 {
			name, ok = e.name, 1
		}
	}
	return name, ok == 1
}

// Digest is the hex SHA-256 a tokens file entry holds for token.
func Digest(token string) string {
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return hex.EncodeToString(d[:])
}
