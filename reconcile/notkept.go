package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	"github.com/flotilla-gitops/flotilla/capability"
)

// keptSum is the digest a not-kept field is remembered by: enough to tell
// the same rendering again, and nothing of a stack's configuration in the
// swarm's copy.
func keptSum(rendering string) string {
	sum := sha256.Sum256([]byte(rendering))
	return hex.EncodeToString(sum[:16])
}

// restoreNotKept reads, once per application and controller, what an
// earlier controller found the daemon did not keep, so the first pass
// after a start does not write those fields again. What this controller
// found itself since it started is newer and stands. A read that fails is
// tried again next pass; meanwhile the fields are only written once more.
func (c *Controller) restoreNotKept(ctx context.Context, p *pass) {
	m, ok := capability.As[capability.NotKeptMemory](p.backend)
	if !ok {
		return
	}
	c.mu.Lock()
	a, ok := c.apps[p.app.Name]
	done := !ok || a.drift.notKeptRestored
	c.mu.Unlock()
	if done {
		return
	}
	stored, err := m.NotKept(ctx, p.app.Stack)
	if err != nil {
		p.log.Warn("could not read which fields the daemon did not keep; they may be written once more", "error", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok = c.apps[p.app.Name]; !ok || a.drift.notKeptRestored {
		return
	}
	a.drift.notKeptRestored = true
	if a.drift.notKept == nil {
		a.drift.notKept = map[string]map[string]capability.NotKeptField{}
	}
	for scoped, fields := range stored {
		if !strings.HasPrefix(scoped, p.app.Stack+"_") {
			continue
		}
		if _, known := a.drift.notKept[scoped]; known {
			continue
		}
		a.drift.notKept[scoped] = fields
	}
}

// keepNotKept puts what a read-back found for the services written into the
// application's memory, and returns the memory as the swarm keeps it when
// it changed.
func (c *Controller) keepNotKept(p *pass, written []string, found map[string]map[string]capability.NotKeptField) (map[string]map[string]capability.NotKeptField, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[p.app.Name]
	if !ok {
		return nil, false
	}
	if a.drift.notKept == nil {
		a.drift.notKept = map[string]map[string]capability.NotKeptField{}
	}
	before := maps.Clone(a.drift.notKept)
	for _, short := range written {
		scoped := p.app.Stack + "_" + short
		if f, ok := found[scoped]; ok {
			a.drift.notKept[scoped] = f
		} else {
			delete(a.drift.notKept, scoped)
		}
	}
	if maps.EqualFunc(before, a.drift.notKept, func(x, y map[string]capability.NotKeptField) bool { return maps.Equal(x, y) }) {
		return nil, false
	}
	// A copy: the caller stores it after the lock is let go.
	return a.drift.clone().notKept, true
}

// storeNotKept keeps the memory in the swarm where the backend can. A write
// that fails costs one more write of those fields after a restart, no more.
func (c *Controller) storeNotKept(ctx context.Context, p *pass, stored map[string]map[string]capability.NotKeptField) {
	m, ok := capability.As[capability.NotKeptMemory](p.backend)
	if !ok {
		return
	}
	if err := m.RememberNotKept(ctx, p.app.Stack, stored); err != nil {
		p.log.Warn("could not keep in the swarm which fields the daemon did not keep; a restart would write them once more", "error", err)
	}
}
