package reconcile

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/window"
)

// gates holds what the gate step consults beyond the application itself:
// the applications file's sync windows, replaced on every reload.
type gates struct {
	windows atomic.Pointer[window.Set]

	// wrote names the applications whose newest pass wrote to the swarm.
	// Health read right after a write can catch a task in the moment it
	// runs before it fails, so a dependency counts as ready only when a
	// pass that wrote nothing judged it Healthy.
	mu    sync.Mutex
	wrote map[string]bool
}

// SetSyncWindows replaces the sync windows every later pass is gated by;
// nil removes them all.
func (c *Controller) SetSyncWindows(s *window.Set) {
	c.gates.windows.Store(s)
	c.poke()
}

// SyncWindows returns the windows passes are gated by, nil when none.
func (c *Controller) SyncWindows() *window.Set { return c.gates.windows.Load() }

// hold decides whether a pass that has something to write waits: for the
// applications it depends on to be Synced and Healthy at their current
// revision, or for a sync window. An automated pass that waits ends like a
// manual one (planned, reported, nothing written), with Status.Waiting
// saying why; an explicit sync that waits fails with the same words, unless
// every window holding it allows manual syncs. Dependencies hold explicit
// syncs too: deploying before what one needs is up is what dependsOn is
// there to prevent.
func (c *Controller) hold(p *pass) error {
	p.status.Waiting = ""
	if !p.hasWork() {
		return nil
	}
	var why []string
	if deps := c.unmetDependencies(p.app); len(deps) > 0 {
		why = append(why, "waiting for "+strings.Join(deps, ", "))
	}
	if v := c.gates.windows.Load().Check(p.app.Name, c.now()); v.Blocked && !(p.request != nil && v.ManualAllowed) {
		why = append(why, "sync window: "+v.Reason)
	}
	if len(why) == 0 {
		return nil
	}
	p.status.Waiting = strings.Join(why, "; ")
	if p.request != nil {
		return stalled("gate", fmt.Errorf("sync not started: %s", p.status.Waiting))
	}
	return errHeld
}

// errHeld ends an automated pass that waits on a dependency or a window;
// it is errGated, so it is no failure.
var errHeld = fmt.Errorf("%w: held by dependencies or a sync window", errGated)

// hasWork reports whether the steps after the gate would write: a changed
// manifest, or drift that this pass would heal.
func (p *pass) hasWork() bool {
	if p.action != "" && p.action != charts.Unchanged {
		return true
	}
	if len(p.drifted)+len(p.missing) == 0 {
		return false
	}
	a := p.app.SyncPolicy.Automated
	return p.request != nil || (a != nil && a.SelfHeal)
}

// unmetDependencies lists each dependency of app that is not yet Synced
// and Healthy at the commit it last fetched, with what it is instead.
func (c *Controller) unmetDependencies(app application.Application) []string {
	if len(app.DependsOn) == 0 {
		return nil
	}
	c.gates.mu.Lock()
	wrote := maps.Clone(c.gates.wrote)
	c.gates.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range app.DependsOn {
		st, ok := c.apps[name]
		switch {
		case !ok:
			out = append(out, name+" (not loaded)")
		case dependencyMet(st.status) && wrote[name]:
			out = append(out, name+" (just deployed, health not settled)")
		case !dependencyMet(st.status):
			s := st.status
			state := fmt.Sprintf("%s, %s", s.Sync, s.Health)
			if s.Revision != s.SeenRevision && s.SeenRevision != "" {
				state += ", at " + shortCommit(s.Revision) + " not " + shortCommit(s.SeenRevision)
			}
			out = append(out, name+" ("+state+")")
		}
	}
	return out
}

func dependencyMet(s application.Status) bool {
	return !s.LastPass.IsZero() && s.Sync == application.Synced && s.Health == application.Healthy &&
		s.Revision != "" && s.Revision == s.SeenRevision
}

// noteWrote remembers whether p wrote to the swarm, before its status is
// published, so no dependent reads that status without it.
func (c *Controller) noteWrote(p *pass) {
	c.gates.mu.Lock()
	defer c.gates.mu.Unlock()
	if c.gates.wrote == nil {
		c.gates.wrote = map[string]bool{}
	}
	if p.recorded != nil || p.healed != nil {
		c.gates.wrote[p.app.Name] = true
	} else {
		delete(c.gates.wrote, p.app.Name)
	}
}

// wakeDependents makes every application waiting on p's application due
// now, once a pass of it that wrote nothing left it meeting their
// condition, so a chain of dependencies rolls out pass after pass instead
// of interval after interval.
func (c *Controller) wakeDependents(p *pass) {
	wrote := p.recorded != nil || p.healed != nil
	if wrote || !dependencyMet(p.status) {
		return
	}
	woke := false
	c.mu.Lock()
	for _, st := range c.apps {
		if st.status.Waiting == "" {
			continue
		}
		for _, d := range st.app.DependsOn {
			if d == p.app.Name {
				st.next = time.Time{}
				woke = true
			}
		}
	}
	c.mu.Unlock()
	if woke {
		c.poke()
	}
}

// setName is the set that generated app, "" for one from the file.
func setName(app application.Application) string {
	if app.Generated == nil {
		return ""
	}
	return app.Generated.Set
}
