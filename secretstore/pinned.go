package secretstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A rollback redeploys a recorded revision, and a value its revision took
// from a store may have been rotated since. Stores that keep their
// versions (Vault KV v2, AWS Secrets Manager) can give the recorded one
// again: a Resolution made with Pinned reads, for each use the record
// lists, the version the record names instead of the current one. The
// value so read names its swarm secret, config or sealed placeholder
// exactly as it did when the revision was made, so the reconciler can tell
// an exact reproduction from a different value by the names alone. Stores
// without versions (KV v1, 1Password, whose API keeps no history) give the
// current value, and the reconciler's comparison decides.

// Pin is the version of one value a release record names.
type Pin struct {
	Version   int
	VersionID string
}

func (p Pin) set() bool { return p.Version > 0 || p.VersionID != "" }

// errNoPastVersions is a readAt of a store configuration that keeps no
// versions (KV v1): the current value is resolved instead.
var errNoPastVersions = errors.New("the store keeps no past versions")

// pinnedReader is a reader that can read a past version of an entry.
type pinnedReader interface {
	// readAt returns the value of key at path in the version at names,
	// with Version, VersionID and Entry of that version.
	readAt(ctx context.Context, path, key string, at Pin) (Value, error)
}

// Pinned returns a resolution like r whose uses listed in pins resolve to
// the pinned version where the store can read one. The grant is checked
// as for every read.
func (r *Resolution) Pinned(pins map[string]Pin) *Resolution {
	return &Resolution{ctx: r.ctx, stores: r.stores, app: r.app, grants: r.grants, pins: pins}
}

// pinnedKey is one version of one value: immutable in the store, so it is
// read once per process.
type pinnedKey struct {
	entryKey
	pin Pin
}

// pinnedValues caches past versions read for rollbacks. A pinned pass
// repeats its reads at every interval; the versions cannot change.
type pinnedValues struct {
	mu sync.Mutex
	m  map[pinnedKey]Value
}

// resolvePinned reads the pinned version of ref; ok false when the store
// cannot read past versions, so the caller resolves the current value.
func (r *Resolution) resolvePinned(secret string, ref Ref, pin Pin) (data []byte, tag string, ok bool, err error) {
	g, err := r.grant(ref)
	if err != nil {
		return nil, "", true, &Error{Ref: ref, Err: err}
	}
	s := r.stores
	id := storeID(g.Store)
	s.mu.Lock()
	rd, err := s.readerFor(id, g.Store)
	s.mu.Unlock()
	if err != nil {
		return nil, "", true, &Error{Ref: ref, Err: err}
	}
	pr, can := rd.(pinnedReader)
	if !can {
		return nil, "", false, nil
	}
	k := pinnedKey{entryKey{id, ref.Path, ref.Key}, pin}
	s.pinned.mu.Lock()
	v, cached := s.pinned.m[k]
	s.pinned.mu.Unlock()
	if !cached {
		if v, err = pr.readAt(r.ctx, ref.Path, ref.Key, pin); errors.Is(err, errNoPastVersions) {
			return nil, "", false, nil
		} else if err != nil {
			return nil, "", true, &Error{Ref: ref, Err: fmt.Errorf("the version a recorded revision used: %w", err)}
		}
		s.pinned.mu.Lock()
		if s.pinned.m == nil {
			s.pinned.m = map[pinnedKey]Value{}
		}
		s.pinned.m[k] = v
		s.pinned.mu.Unlock()
	}
	r.mu.Lock()
	r.used = append(r.used, Used{Secret: secret, Ref: ref, Version: v.Version, VersionID: v.VersionID, digest: s.digest(v.Data)})
	r.mu.Unlock()
	return v.Data, s.tag(g.Store, ref, v), true, nil
}
