package reconcile

import (
	"context"
	"fmt"
	"maps"
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
// if it is kept here. A chart's records are not reproduced at all, so for
// a chart application every render holding a secret value is kept, named
// by its secrets and sealed placeholders (see chartUnseen), with its
// sealed values by placeholder, which a rollback deploys (see chartSealed).

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
	// sealed is a chart render's placeholders and their values, which
	// a rollback to a record holding them deploys (see chartSealed).
	sealed map[string]string
}

// seenPerApp bounds the distinct renders kept per application: twice the
// records its history keeps, and the renders a pass may hold besides.
func seenPerApp(a application.Application) int {
	return 2*max(a.History, 1) + rendersPerApp
}

// note keeps r's values for app when r took any value from a store, or,
// with all (a chart application, whose records are not rendered again),
// when it holds any secret value; the oldest sets beyond keep go. With all
// the names are also those of r's secrets and its sealed placeholders,
// which a record holds for the same values (see chartUnseen).
func (s *seenSecrets) note(app string, r *compose.Rendered, keep int, all bool) {
	if r == nil || (len(r.Refs) == 0 && (!all || len(r.Secrets)+len(r.Sealed) == 0)) {
		return
	}
	names := make([]string, 0, len(r.Refs))
	for _, ref := range r.Refs {
		names = append(names, ref.Name)
	}
	if all {
		names = append(names, renderedNames(r)...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	e := seenRender{key: strings.Join(names, "\x00"), names: names, values: renderedSecrets(r)}
	if all {
		e.sealed = maps.Clone(r.Sealed)
	}
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

// sealedValue returns the value a render kept for app gave placeholder ph.
func (s *seenSecrets) sealedValue(app, ph string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.by[app] {
		if v, ok := r.sealed[ph]; ok {
			return v, true
		}
	}
	return "", false
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

// renderedNames lists the names r gives its secret values: the swarm names
// of its secrets, derived from their content, and its sealed placeholders,
// keyed digests of theirs.
func renderedNames(r *compose.Rendered) []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.Secrets)+len(r.Sealed))
	for name := range r.Secrets {
		out = append(out, name)
	}
	for ph := range r.Sealed {
		out = append(out, ph)
	}
	return out
}

// chartUnseen returns an error naming the first of a chart application's
// records rs (newest first) that deployed a secret or sealed value neither
// r, the render of what the application declares now, nor a render this
// controller kept gives: the value is unknown, so the logs of that
// revision's tasks, which may hold it, cannot be masked. A chart's records
// are not rendered again (the chart version, values commit and store
// versions they name are not fetched back), so a value changed since (in
// the chart's files, its values, a store, or the age key) is known only
// to a controller that rendered it. Names derive from values (content
// hash, keyed digest, store version or keyed value), so a name known is a
// value known. The error names the revision and where the value was used,
// never the value.
func (c *Controller) chartUnseen(ctx context.Context, app, stack string, rs []charts.Release, r *compose.Rendered) error {
	now := map[string]bool{}
	for _, n := range renderedNames(r) {
		now[n] = true
	}
	known := func(n string) bool { return now[n] || c.seen.knows(app, n) }
	for i := range rs {
		rec := &rs[i]
		declared, err := compose.Convert(ctx, rec.Manifest, stack, nil)
		if err != nil {
			return fmt.Errorf("revision %d: %w", rec.Revision, err)
		}
		what := ""
		for _, name := range slices.Sorted(maps.Keys(declared.Secrets)) {
			if !known(name) {
				what = fmt.Sprintf("secret %q (%s)", composeKey(stack, name), name)
				break
			}
		}
		if what == "" {
			for _, ph := range compose.SealedValues(rec.Manifest) {
				if !known(ph) {
					what = sealedUse(stack, declared, ph)
					break
				}
			}
		}
		if what != "" {
			return fmt.Errorf("revision %d (%s) deployed %s whose value neither a render of what the chart application declares now gives nor this controller has rendered since it started (a chart's revisions are not rendered again: its files, values, a store's value or the age key changed since); that revision's tasks may have printed it",
				rec.Revision, recordSource(rec), what)
		}
	}
	return nil
}

// recordSource is how an error names a record's source: its commit (or
// chart version).
func recordSource(rec *charts.Release) string {
	if rec.Commit == "" {
		return "no commit recorded"
	}
	return "commit " + shortCommit(rec.Commit)
}

// composeKey is the compose name of a stack's content-named object:
// "<stack>_<key>-<sum>" without stack and sum.
func composeKey(stack, name string) string {
	key := strings.TrimPrefix(name, stack+"_")
	if i := strings.LastIndexByte(key, '-'); i > 0 {
		key = key[:i]
	}
	return key
}

// sealedUse says where a manifest uses placeholder ph: an environment
// variable of a service, or a config.
func sealedUse(stack string, st *compose.Stack, ph string) string {
	for _, svc := range slices.Sorted(maps.Keys(st.Services)) {
		cs := st.Services[svc].TaskTemplate.ContainerSpec
		if cs == nil {
			continue
		}
		for _, e := range cs.Env {
			if k, v, _ := strings.Cut(e, "="); strings.Contains(v, ph) {
				return fmt.Sprintf("a sealed value (environment variable %s of service %s)", k, strings.TrimPrefix(svc, stack+"_"))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.Configs)) {
		if strings.Contains(string(st.Configs[name].Data), ph) {
			return fmt.Sprintf("a sealed value (config %q)", composeKey(stack, name))
		}
	}
	return "a sealed value"
}
