package secretstore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// Ref names one value: a store of the applications file, the path of an
// entry in it and a key inside the entry.
type Ref struct {
	Store, Path, Key string
}

func (r Ref) String() string { return r.Store + ":" + r.Path + "#" + r.Key }

// Errors a resolution can wrap.
var (
	// ErrNotGranted is a reference the applications file does not grant
	// the application: an unknown store, or a path outside its grant.
	// Nothing was read.
	ErrNotGranted = errors.New("not granted by the applications file")
	// ErrUnavailable is a store that could not be reached or refused the
	// controller's login or read: the pass fails and is retried with
	// backoff, and nothing running is changed.
	ErrUnavailable = errors.New("secret store unavailable")
	// ErrNoValue is an entry or key the store does not hold, or a value
	// that is not a string.
	ErrNoValue = errors.New("no such value")
)

// Error is a failed resolution. Its message names the application's
// reference (store, path, key) and the store's own reason; never a value.
type Error struct {
	Ref Ref
	Err error
}

func (e *Error) Error() string {
	// No colon right after the key: the controller's sanitiser would take
	// what follows `key "password":` for a password and mask it.
	return fmt.Sprintf("secret store %q path %q key %q not read: %v", e.Ref.Store, e.Ref.Path, e.Ref.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Value is one resolved value and what the store says of its version.
type Value struct {
	// Data is the plaintext. It must go nowhere but a swarm secret.
	Data []byte
	// Version is the KV v2 version of the entry, or the 1Password item's;
	// 0 for KV v1, which keeps no versions.
	Version int
	// Entry is the store's own identity of the entry's history, where a
	// delete and re-create starts the versions again: a 1Password item's
	// IDs (a title names a new item), the creation time of a Vault KV v2
	// version (a metadata delete restarts at version 1). "" otherwise.
	Entry string
	// VersionID is the version of a store that names versions by id (AWS
	// Secrets Manager's VersionId); "" for the others.
	VersionID string
}

// reader is one store's protocol: Vault's KV, 1Password Connect or AWS
// Secrets Manager.
type reader interface {
	// read returns the value of key at path.
	read(ctx context.Context, path, key string) (Value, error)
	// version returns the entry's current Version and Entry, without its
	// Data; ok false when the store keeps no versions or may not be asked.
	version(ctx context.Context, path string) (v Value, ok bool, err error)
}

// Stores holds one client per store configuration and the values read,
// shared by every application's passes. The zero value is not usable; use
// New.
type Stores struct {
	now func() time.Time
	// key keys the digests that tell whether a value changed, so that a
	// digest (which never leaves this process) is useless off the host.
	key []byte

	mu      sync.Mutex
	readers map[string]reader // by store identity (see storeID)
	entries map[entryKey]*entry
	// pinned holds past versions read for rollbacks (see Pinned).
	pinned pinnedValues
	// newReader makes a store's reader; tests replace it.
	newReader func(application.SecretStore) (reader, error)
}

type entryKey struct {
	store string // storeID
	path  string
	key   string
}

// entry is the last answer for one value.
type entry struct {
	store  application.SecretStore
	apps   map[string]time.Time // applications that used it, and when last
	value  Value
	digest string
	// tagged is the value as it was when this key's value last changed: its
	// version names the swarm secret. An edit of another key of the entry
	// moves the entry's version but not this, so the services that mount
	// this key are not rolled for a value they do not use.
	tagged  Value
	checked time.Time // when the store last confirmed it
	rotated time.Time // when a change was first seen; zero if never
}

// New returns an empty set of stores with a key of its own, kept in memory
// only: the tags of values without a store version (KV v1) change when the
// process restarts, which rolls their services once. The controller uses
// Open.
func New() *Stores {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return newStores(k)
}

// Open returns an empty set of stores whose key is kept in keyFile (made,
// 0600, when it does not exist), so that the tags of values without a
// store version survive a restart.
func Open(keyFile string) (*Stores, error) {
	k, err := os.ReadFile(keyFile)
	if errors.Is(err, os.ErrNotExist) {
		k = make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
			return nil, fmt.Errorf("secret store key: %w", err)
		}
		tmp := keyFile + ".tmp"
		if err := os.WriteFile(tmp, k, 0o600); err != nil {
			return nil, fmt.Errorf("secret store key: %w", err)
		}
		if err := os.Rename(tmp, keyFile); err != nil {
			return nil, fmt.Errorf("secret store key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("secret store key: %w", err)
	}
	if len(k) < 32 {
		return nil, fmt.Errorf("secret store key %s: %d bytes, want 32", keyFile, len(k))
	}
	return newStores(k), nil
}

func newStores(k []byte) *Stores {
	return &Stores{
		now:       time.Now,
		key:       k,
		readers:   map[string]reader{},
		entries:   map[entryKey]*entry{},
		newReader: newStoreReader,
	}
}

// newStoreReader makes the reader for the store's kind.
func newStoreReader(s application.SecretStore) (reader, error) {
	switch {
	case s.AWS != nil:
		return newAWSReader(s, nil)
	case s.OnePassword != nil:
		return newOnePasswordReader(s)
	default:
		return newVaultReader(s)
	}
}

// storeID identifies a store's configuration: a store redefined in the
// applications file (another address, another login) is another store.
func storeID(s application.SecretStore) string {
	if o := s.OnePassword; o != nil {
		return fmt.Sprintf("%s|onepassword|%s|%s", s.Name, o.ConnectHost, o.TokenFile)
	}
	if a := s.AWS; a != nil {
		return fmt.Sprintf("%s|aws|%s|%s|%s|%+v", s.Name, a.Region, a.Endpoint, a.CACertFile, a.Auth)
	}
	v := s.Vault
	if v == nil {
		return s.Name
	}
	return fmt.Sprintf("%s|%s|%s|%s|%d|%s|%+v|%+v|%+v|%s", s.Name, v.Address, v.Namespace, v.Mount, v.KVVersion, v.CACertFile,
		derefAppRole(v.Auth.AppRole), derefJWT(v.Auth.JWT), derefAWS(v.Auth.AWS), v.Auth.TokenFile)
}

func derefAWS(a *application.VaultAWS) application.VaultAWS {
	if a == nil {
		return application.VaultAWS{}
	}
	return *a
}

func derefAppRole(a *application.VaultAppRole) application.VaultAppRole {
	if a == nil {
		return application.VaultAppRole{}
	}
	return *a
}

func derefJWT(j *application.VaultJWT) application.VaultJWT {
	if j == nil {
		return application.VaultJWT{}
	}
	return *j
}

// Used is one value a resolution gave: what the reconciler records.
type Used struct {
	// Secret names what used the value, as the render told Resolve: a
	// compose secret's key, "configs.<key>" or
	// "services.<service>.environment.<variable>".
	Secret string
	Ref    Ref
	// Version is the store's version of the entry (0: KV v1).
	Version int
	// VersionID is the version id of a store that names versions by id
	// (AWS Secrets Manager).
	VersionID string
	// Rotated is when this controller first saw the value change; zero
	// when it has not.
	Rotated time.Time
	// digest is a keyed digest of the value, to compare with an earlier
	// resolution without keeping the value.
	digest string
}

// Same reports whether u and o gave the same value.
func (u Used) Same(o Used) bool { return u.digest == o.digest }

// Resolution resolves one application's references during one pass.
type Resolution struct {
	ctx    context.Context
	stores *Stores
	app    string
	grants []application.StoreGrant
	// pins are the versions a rollback's record names, by use (see
	// Pinned); nil for an ordinary pass.
	pins map[string]Pin

	mu   sync.Mutex
	used []Used
}

// For returns a resolution for app's pass; ctx bounds its reads.
func (s *Stores) For(ctx context.Context, app application.Application) *Resolution {
	return &Resolution{ctx: ctx, stores: s, app: app.Name, grants: app.SecretStores}
}

// Used lists what the resolution gave, in the order asked.
func (r *Resolution) Used() []Used {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Used(nil), r.used...)
}

// Resolve returns the value of ref for the compose secret named secret, and
// its tag: a string that changes when the value does and tells nothing of
// it, to name the swarm secret by (see Tag). The grant is checked first; a
// reference it does not cover reads nothing.
func (r *Resolution) Resolve(secret string, ref Ref) ([]byte, string, error) {
	if pin, ok := r.pins[secret]; ok && pin.set() {
		if data, tag, ok, err := r.resolvePinned(secret, ref, pin); ok {
			return data, tag, err
		}
	}
	g, err := r.grant(ref)
	if err != nil {
		return nil, "", &Error{Ref: ref, Err: err}
	}
	v, e, err := r.stores.get(r.ctx, g.Store, ref)
	if err != nil {
		return nil, "", &Error{Ref: ref, Err: err}
	}
	r.stores.usedBy(g.Store, ref, r.app)
	r.mu.Lock()
	r.used = append(r.used, Used{Secret: secret, Ref: ref, Version: e.tagged.Version, VersionID: e.tagged.VersionID, Rotated: e.rotated, digest: e.digest})
	r.mu.Unlock()
	return v.Data, r.stores.tag(g.Store, ref, e.tagged), nil
}

// tag names one value of ref without revealing it. With a store version it
// is a digest of the reference and the version: public facts. Without one
// (KV v1) it is an HMAC of the value under the controller's key (see
// Open): a plain digest of a short secret, readable in every secret's name
// and release record, could be tested against guesses.
func (s *Stores) tag(st application.SecretStore, ref Ref, v Value) string {
	where := st.Name + "\x00" + storeAddress(st) + "\x00" + ref.Path + "\x00" + ref.Key
	if v.VersionID != "" {
		// A Secrets Manager version is immutable: its id names its value.
		sum := sha256.Sum256([]byte(where + "\x00id\x00" + v.VersionID))
		return "version:" + hex.EncodeToString(sum[:])
	}
	if v.Entry != "" {
		where += "\x00" + v.Entry
	}
	if v.Version > 0 {
		sum := sha256.Sum256([]byte(where + "\x00" + strconv.Itoa(v.Version)))
		return "version:" + hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("tag\x00" + where + "\x00"))
	m.Write(v.Data)
	return "keyed:" + hex.EncodeToString(m.Sum(nil))
}

func storeAddress(st application.SecretStore) string {
	if st.Vault != nil {
		return st.Vault.Address
	}
	if st.OnePassword != nil {
		return st.OnePassword.ConnectHost
	}
	if st.AWS != nil {
		return st.AWS.Region + " " + st.AWS.Endpoint
	}
	return ""
}

// grant finds the store ref names among the application's grants and
// checks that its path is granted and well formed for the store.
func (r *Resolution) grant(ref Ref) (application.StoreGrant, error) {
	for _, g := range r.grants {
		if g.Store.Name != ref.Store {
			continue
		}
		if !g.MayRead(ref.Path) {
			return g, fmt.Errorf("path %w to application %q", ErrNotGranted, r.app)
		}
		if err := checkPath(g.Store, ref.Path); err != nil {
			return g, err
		}
		return g, nil
	}
	return application.StoreGrant{}, fmt.Errorf("store %w to application %q", ErrNotGranted, r.app)
}

// checkPath refuses a path the store's KV version does not read as an
// entry: under the mount, and for KV v2 under its data/ path.
func checkPath(s application.SecretStore, p string) error {
	if s.OnePassword != nil {
		return checkOnePasswordPath(p)
	}
	v := s.Vault
	if v == nil {
		return nil
	}
	prefix := v.Mount + "/"
	if v.KVVersion == 2 {
		prefix += "data/"
	}
	if !strings.HasPrefix(p, prefix) || len(p) == len(prefix) {
		return fmt.Errorf("%w: a KV v%d entry of this store is read at %s<path>", ErrNoValue, v.KVVersion, prefix)
	}
	return nil
}

// get returns the value for ref from the cache while the store's poll
// interval has not passed, else from the store.
func (s *Stores) get(ctx context.Context, st application.SecretStore, ref Ref) (Value, entry, error) {
	id := storeID(st)
	k := entryKey{id, ref.Path, ref.Key}
	s.mu.Lock()
	e := s.entries[k]
	var cached entry
	if e != nil {
		cached = *e
	}
	rd, err := s.readerFor(id, st)
	s.mu.Unlock()
	if err != nil {
		return Value{}, entry{}, err
	}
	now := s.now()
	if e != nil && now.Sub(cached.checked) < st.PollInterval.Duration {
		return cached.value, cached, nil
	}
	if e != nil && (cached.value.Version > 0 || cached.value.VersionID != "") {
		// A store that keeps versions: the version says whether the value
		// moved (KV v2 and 1Password by number and entry, Secrets Manager
		// by the id that holds AWSCURRENT).
		if v, ok, err := rd.version(ctx, ref.Path); err != nil {
			return Value{}, entry{}, err
		} else if ok && v.Version == cached.value.Version && v.Entry == cached.value.Entry && v.VersionID == cached.value.VersionID {
			s.mu.Lock()
			e.checked = now
			cached = *e
			s.mu.Unlock()
			return cached.value, cached, nil
		}
	}
	v, err := rd.read(ctx, ref.Path, ref.Key)
	if err != nil {
		return Value{}, entry{}, err
	}
	d := s.digest(v.Data)
	s.mu.Lock()
	defer s.mu.Unlock()
	e = s.entries[k]
	if e == nil {
		e = &entry{store: st, apps: map[string]time.Time{}, tagged: v}
		s.entries[k] = e
	} else if e.digest != d {
		e.rotated, e.tagged = now, v
	}
	e.value, e.digest, e.checked = v, d, now
	return v, *e, nil
}

func (s *Stores) readerFor(id string, st application.SecretStore) (reader, error) {
	if rd, ok := s.readers[id]; ok {
		return rd, nil
	}
	rd, err := s.newReader(st)
	if err != nil {
		return nil, err
	}
	s.readers[id] = rd
	return rd, nil
}

func (s *Stores) digest(data []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}
