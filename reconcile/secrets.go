package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/secretstore"
)

// Secrets from stores (see the secretstore package) enter the pass at the
// render: a Resolution, bound to the application's grants, answers the
// compose renderer for every x-flotilla.secretRef. A rotated value is a new
// content-named secret, so the plan sees an upgrade that touches only the
// services that mount it; the rest is the ordinary pass. This file adds the
// record's account of it: the refs with their versions, and the cause
// "secret rotated" when the value, not the commit, moved.

// secretRefFunc adapts a resolution to the compose renderer.
func secretRefFunc(res *secretstore.Resolution) compose.SecretRefFunc {
	return func(secret string, ref compose.SecretRef) ([]byte, string, error) {
		return res.Resolve(secret, secretstore.Ref{Store: ref.Store, Path: ref.Path, Key: ref.Key})
	}
}

// sameRefs asks the stores again for what a cached render used; false when
// any value changed, so the render must be done again.
func sameRefs(res *secretstore.Resolution, used []secretstore.Used) (bool, error) {
	for _, u := range used {
		if _, _, err := res.Resolve(u.Secret, u.Ref); err != nil {
			return false, err
		}
	}
	now := res.Used()
	for i, u := range used {
		if !u.Same(now[i]) {
			return false, nil
		}
	}
	return true, nil
}

// storeFailure reports whether a render failed because a store could not
// give a value (unreachable, refused, or the value is missing): worth
// retrying with backoff, unlike bad input in the repository.
func storeFailure(err error) bool {
	return errors.Is(err, secretstore.ErrUnavailable) || errors.Is(err, secretstore.ErrNoValue)
}

// secretFailed fails the pass at the render, before any write, so what
// runs is kept and nothing is swept; a store failure is transient and
// backs off, a reference the grant refuses waits for a change.
func secretFailed(err error) error {
	if storeFailure(err) {
		return transient("render", err)
	}
	return stalled("render", err)
}

// recordRefs writes the store secrets of the render into rec, carrying
// each one's last rotation over from the previous record, and returns the
// cause to record when a value changed ("" when none did).
func (c *Controller) recordRefs(p *pass, rec *charts.Release) string {
	if p.rendered == nil || len(p.rendered.Refs) == 0 {
		return ""
	}
	prev := map[string]charts.SecretRef{}
	if p.latest != nil {
		for _, r := range p.latest.SecretRefs {
			prev[recordUse(r)] = r
		}
	}
	// The store is told each value's use (compose.ResolvedRef.Use).
	used := map[string]secretstore.Used{}
	for _, u := range p.refs {
		used[u.Secret] = u
	}
	var rotated []string
	for _, r := range p.rendered.Refs {
		out := charts.SecretRef{
			Kind: r.Kind, Secret: r.Secret, Service: r.Service, Store: r.Ref.Store, Path: r.Ref.Path, Key: r.Ref.Key,
			Version: used[r.Use()].Version, VersionID: used[r.Use()].VersionID, Name: r.Name,
		}
		if old, ok := prev[r.Use()]; ok {
			out.Rotated, out.RotatedRevision = old.Rotated, old.RotatedRevision
			sameRef := old.Store == out.Store && old.Path == out.Path && old.Key == out.Key
			if sameRef && old.Name != out.Name {
				out.Rotated, out.RotatedRevision = rec.Time, rec.Revision
				rotated = append(rotated, rotationText(old, out))
			}
		}
		rec.SecretRefs = append(rec.SecretRefs, out)
	}
	if len(rotated) == 0 {
		return ""
	}
	// One value used in several places is one rotation.
	slices.Sort(rotated)
	rotated = slices.Compact(rotated)
	return "secret rotated: " + strings.Join(rotated, ", ")
}

// recordUse is a recorded reference's use, as compose.ResolvedRef.Use
// names it.
func recordUse(r charts.SecretRef) string {
	return compose.ResolvedRef{Kind: r.Kind, Secret: r.Secret, Service: r.Service}.Use()
}

// rotationText names a rotated value by its reference and versions.
func rotationText(old, now charts.SecretRef) string {
	s := fmt.Sprintf("%s %s key %s", now.Store, now.Path, now.Key)
	switch {
	case now.VersionID != "" && old.VersionID != "":
		s += fmt.Sprintf(" version %s to %s", old.VersionID, now.VersionID)
	case now.VersionID != "":
		s += " version " + now.VersionID
	case now.Version > 0 && old.Version > 0:
		s += fmt.Sprintf(" version %d to %d", old.Version, now.Version)
	case now.Version > 0:
		s += fmt.Sprintf(" version %d", now.Version)
	}
	return s
}

// refStatus is the status view of a record's store secrets.
func refStatus(refs []charts.SecretRef) []application.SecretRefStatus {
	if len(refs) == 0 {
		return nil
	}
	out := make([]application.SecretRefStatus, 0, len(refs))
	for _, r := range refs {
		out = append(out, application.SecretRefStatus{
			Kind: r.Kind, Secret: r.Secret, Service: r.Service, Store: r.Store, Path: r.Path, Key: r.Key, Version: r.Version, VersionID: r.VersionID,
			SwarmSecret: r.Name, LastRotated: r.Rotated, RotatedRevision: r.RotatedRevision,
		})
	}
	return out
}

// StoreUsers answers a store's rotation webhook: users are the
// applications whose last renders used a value of the store named store
// (only the entry at path, when path is not ""), granted all applications
// the applications file grants that store, sorted; none for a store it
// does not declare.
func (c *Controller) StoreUsers(store, path string) (users, granted []string) {
	c.mu.Lock()
	for name, a := range c.apps {
		for _, g := range a.app.SecretStores {
			if g.Store.Name == store {
				granted = append(granted, name)
				break
			}
		}
	}
	c.mu.Unlock()
	if len(granted) == 0 {
		return nil, nil
	}
	slices.Sort(granted)
	return c.stores.Users(store, path), granted
}

// ExpireStore makes the values StoreUsers covers due for a read at once,
// whatever their store's pollInterval: the next pass of an application
// that uses one asks the store, and the store watch starts the pass of any
// other application whose value moved.
func (c *Controller) ExpireStore(store, path string) {
	n := c.stores.Expire(store, path)
	c.log.Info("a secret store reported a rotation; its values are read again", "store", store, "path", path, "values", n)
}

// recordPins are the store versions rec names, by use, for rendering its
// commit again with the values it deployed (see useRecord).
func recordPins(rec *charts.Release) map[string]secretstore.Pin {
	if len(rec.SecretRefs) == 0 {
		return nil
	}
	pins := make(map[string]secretstore.Pin, len(rec.SecretRefs))
	for _, r := range rec.SecretRefs {
		pins[recordUse(r)] = secretstore.Pin{Version: r.Version, VersionID: r.VersionID}
	}
	return pins
}

// recordNames reports whether rec lists a store value under name: the
// swarm secret or config, or the sealed placeholder of a variable.
func recordNames(rec *charts.Release, name string) bool {
	for _, r := range rec.SecretRefs {
		if r.Name == name {
			return true
		}
	}
	return false
}
