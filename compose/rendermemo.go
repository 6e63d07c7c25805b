package compose

import (
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"sync"
)

// renderInputs is what one render read: each file's digest, by repository
// path, and the answer of each existence check (the default file names).
type renderInputs struct {
	reads  []fileDigest
	checks []fileCheck
}

type fileDigest struct {
	rel string
	sum [sha256.Size]byte
}

type fileCheck struct {
	rel    string
	exists bool
}

func (in *renderInputs) read(rel string, data []byte) {
	if in != nil {
		in.reads = append(in.reads, fileDigest{rel, sha256.Sum256(data)})
	}
}

func (in *renderInputs) exists(rel string, ok bool) {
	if in != nil {
		in.checks = append(in.checks, fileCheck{rel, ok})
	}
}

// renderKey names a render's options: everything Render reads besides the
// files, the checkout's root excepted (it never reaches the result).
// Decrypt is left out on purpose: only renders that decrypted nothing are
// kept, and those do not depend on it.
func renderKey(stack string, d Dir, limits Limits) string {
	in, _ := json.Marshal(struct {
		Stack, Path     string
		Files, EnvFiles []string
		SealKey         []byte
		Limits          Limits
		APIVersion      string
	}{stack, d.Path, d.Files, d.EnvFiles, d.SealKey, limits, d.APIVersion})
	return string(in)
}

type renderEntry struct {
	inputs *renderInputs
	out    *Rendered
	size   int
}

// renderMemo keeps the latest render per key, bounded by the manifest and
// secret bytes it holds and by its entries; it drops arbitrary entries to
// make room.
type renderMemo struct {
	mu         sync.Mutex
	maxBytes   int
	maxEntries int
	bytes      int
	m          map[string]renderEntry
	hits       int // renders answered from the memo, for tests
}

// lookup returns a copy of what the render under key gave, when every file
// it read reads the same for p and every file it looked for is still there
// or still absent.
func (c *renderMemo) lookup(key string, p *project) (*Rendered, bool) {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	for _, ch := range e.inputs.checks {
		if p.isFile(ch.rel) != ch.exists {
			return nil, false
		}
	}
	for _, f := range e.inputs.reads {
		data, err := p.readRaw(f.rel)
		if err != nil || sha256.Sum256(data) != f.sum {
			return nil, false
		}
	}
	c.mu.Lock()
	c.hits++
	c.mu.Unlock()
	return e.out.clone(), true
}

// store keeps out as what p's inputs render to, unless p decrypted a file.
func (c *renderMemo) store(key string, p *project, out *Rendered) {
	if p.inputs == nil || len(p.sops.cipher) > 0 || p.usedRefs {
		return
	}
	size := len(out.Manifest)
	for _, s := range out.Secrets {
		size += len(s)
	}
	if size > c.maxBytes {
		return
	}
	e := renderEntry{inputs: p.inputs, out: out.clone(), size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]renderEntry{}
	}
	if old, ok := c.m[key]; ok {
		c.bytes -= old.size
		delete(c.m, key)
	}
	for k, old := range c.m {
		if c.bytes+size <= c.maxBytes && len(c.m) < c.maxEntries {
			break
		}
		delete(c.m, k)
		c.bytes -= old.size
	}
	c.m[key] = e
	c.bytes += size
}

// reset empties the memo, for tests.
func (c *renderMemo) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes, c.hits = nil, 0, 0
}

// clone copies r so that neither the memo nor a caller sees the other's
// changes.
func (r *Rendered) clone() *Rendered {
	cp := *r
	if r.Secrets != nil {
		cp.Secrets = make(map[string][]byte, len(r.Secrets))
		for k, v := range r.Secrets {
			cp.Secrets[k] = slices.Clone(v)
		}
	}
	cp.Sealed = maps.Clone(r.Sealed)
	cp.Warnings = slices.Clone(r.Warnings)
	return &cp
}
