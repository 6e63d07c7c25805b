package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// A store without versions (Vault KV v1, 1Password Connect) cannot give a
// value it held before: a render of an earlier revision's commit takes the
// current value, and the task that revision ran printed the old one, which
// Swarm keeps in its logs. The controller saw every value it rendered, so
// it keeps those of its recent renders here, for the logs' mask (see
// LogMask). A record names each store value by a name its value (or
// version) derives (charts.SecretRef.Name); a reproduction that names a
// value otherwise took another one, and the record's is then known only
// if it is kept here.

// seenSecrets keeps, by application, the secret values of the renders that
// took values from a store, with the names the render gave those values.
// Memory only: a restarted controller, or a new leader, knows what it
// rendered since it started. The zero value is ready to use.
type seenSecrets struct {
	mu sync.Mutex
	by map[string][]seenRender // by application, oldest first
}

// seenRender is one render's store value names and its secret values.
type seenRender struct {
	key    string // names sorted and joined: one entry per distinct set
	names  []string
	values []string
}

// seenPerApp bounds the distinct renders kept per application: twice the
// records its history keeps, and the renders a pass may hold besides.
func seenPerApp(a application.Application) int {
	return 2*max(a.History, 1) + rendersPerApp
}

// note keeps r's values for app when r took any value from a store; the
// oldest sets beyond keep go.
func (s *seenSecrets) note(app string, r *compose.Rendered, keep int) {
	if r == nil || len(r.Refs) == 0 {
		return
	}
	names := make([]string, 0, len(r.Refs))
	for _, ref := range r.Refs {
		names = append(names, ref.Name)
	}
	slices.Sort(names)
	e := seenRender{key: strings.Join(names, "\x00"), names: names, values: renderedSecrets(r)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string][]seenRender{}
	}
	rs := slices.DeleteFunc(s.by[app], func(o seenRender) bool { return o.key == e.key })
	rs = append(rs, e)
	if len(rs) > keep {
		rs = slices.Delete(rs, 0, len(rs)-keep)
	}
	s.by[app] = rs
}

// values returns every value kept for app.
func (s *seenSecrets) values(app string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.by[app] {
		out = append(out, r.values...)
	}
	return out
}

// knows reports whether a render kept for app named a value name.
func (s *seenSecrets) knows(app, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.by[app] {
		if _, ok := slices.BinarySearch(r.names, name); ok {
			return true
		}
	}
	return false
}

// forget drops what is kept for app.
func (s *seenSecrets) forget(app string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, app)
}

// staleRefs lists the store values rec deployed that r, a render of its
// commit, names otherwise: r took another value (a store without versions
// gives its current one).
func staleRefs(rec *charts.Release, r *compose.Rendered) []charts.SecretRef {
	if len(rec.SecretRefs) == 0 {
		return nil
	}
	names := make(map[string]string, len(r.Refs))
	for _, ref := range r.Refs {
		names[ref.Use()] = ref.Name
	}
	var out []charts.SecretRef
	for _, sr := range rec.SecretRefs {
		if name, ok := names[recordUse(sr)]; !ok || name != sr.Name {
			out = append(out, sr)
		}
	}
	return out
}

// unseen returns an error naming the first of stale that no kept render of
// app named: its value is not known, so the logs of rec's tasks, which may
// hold it, cannot be masked. The error names the store entry, never the
// value.
func (c *Controller) unseen(app string, rec *charts.Release, stale []charts.SecretRef) error {
	for _, sr := range stale {
		if !c.seen.knows(app, sr.Name) {
			return fmt.Errorf("revision %d (commit %s) deployed a value of store %q at %s key %s that the store no longer gives (it keeps no past versions) and that this controller has not rendered since it started; that revision's tasks may have printed it",
				rec.Revision, shortCommit(rec.Commit), sr.Store, sr.Path, sr.Key)
		}
	}
	return nil
}
