package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/secretstore"
)

// rendersPerApp bounds the renders kept per application: the commit git
// points at, and the one a pinned rollback redeploys, which a pinned
// application renders on every pass too.
const rendersPerApp = 2

// minRenderSweep is the cache size below which entries of applications
// that were removed are not looked for.
const minRenderSweep = 64

// renderCache keeps what a render of an unchanged input gave, so that a
// pass over a commit it has rendered before costs a map lookup instead of a
// parse of every file. The key covers everything a render reads besides the
// commit's tree, which a commit fixes: the application's source settings,
// its stack, the identity of the key material and the limits. Entries hold
// decrypted values in memory, as the pass that made them did; they never
// leave the process. The zero value is ready to use.
type renderCache struct {
	mu      sync.Mutex
	entries map[string][]renderEntry // by application, newest first
	sweepAt int
}

type renderEntry struct {
	key      string
	rendered *compose.Rendered
	// declared only: the conversion itself stays with the process's
	// bounded memo, not once more per application here (about 12 KB an
	// application of 5 services). A pass served from this cache hands no
	// conversion down, and its deploy, if any, converts from that memo.
	declared *compose.Stack
	// steady is what the last live comparison of this render saw (see
	// steadydrift.go); it goes with the entry.
	steady *steadyMark
	// refs are the store values the render used: a hit is good only while
	// the stores still give the same ones (see sameRefs).
	refs []secretstore.Used
}

// renderKey names one render input. keyID is the key material's
// fingerprint ("" without keys).
func renderKey(app application.Application, commit, keyID string, limits compose.Limits) string {
	in, _ := json.Marshal(struct {
		Commit, Stack, KeyID string
		Source               application.Source
		SOPS                 *application.SOPS
		Stores               []application.StoreGrant
		Limits               compose.Limits
	}{commit, app.Stack, keyID, app.Source, app.SOPS, app.SecretStores, limits})
	sum := sha256.Sum256(in)
	return hex.EncodeToString(sum[:])
}

// get returns the entry of app under key, making it the newest.
func (c *renderCache) get(app, key string) (renderEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.entries[app]
	for i, e := range es {
		if e.key == key {
			copy(es[1:i+1], es[:i])
			es[0] = e
			return e, true
		}
	}
	return renderEntry{}, false
}

// put stores e as app's newest entry, dropping its oldest beyond
// rendersPerApp. Now and then it drops the entries of applications known
// reports gone, so a removed application's renders do not stay for good;
// the sweep runs when the cache has doubled since the last one, so its cost
// is spread over the puts.
func (c *renderCache) put(app string, e renderEntry, known func(string) bool) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string][]renderEntry{}
	}
	es := append([]renderEntry{e}, c.entries[app]...)
	if len(es) > rendersPerApp {
		es = es[:rendersPerApp]
	}
	c.entries[app] = es
	var names []string
	if len(c.entries) > max(c.sweepAt, minRenderSweep) {
		for name := range c.entries {
			names = append(names, name)
		}
	}
	c.mu.Unlock()
	if names == nil {
		return
	}
	var gone []string
	for _, name := range names {
		if name != app && !known(name) {
			gone = append(gone, name)
		}
	}
	c.mu.Lock()
	for _, name := range gone {
		delete(c.entries, name)
	}
	c.sweepAt = 2 * len(c.entries)
	c.mu.Unlock()
}

// steadyOf returns the steady mark of app's entry holding r, or nil when
// the cache does not hold r (a chart, a rollback's record).
func (c *renderCache) steadyOf(app string, r *compose.Rendered) *steadyMark {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries[app] {
		if e.rendered == r {
			return e.steady
		}
	}
	return nil
}

// len is the number of applications with an entry.
func (c *renderCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// knownApp reports whether the controller still has the application.
func (c *Controller) knownApp(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.apps[name]
	return ok
}
