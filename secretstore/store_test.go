package secretstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// fakeKV is an in-memory KV v2 store that counts what it was asked; it
// stands in for Vault only in these decision tests (vault_test.go runs the
// real server).
type fakeKV struct {
	mu       sync.Mutex
	values   map[string]string // path#key
	vers     map[string]int    // by path
	reads    []string
	versions []string
	fail     error
	entry    string // Value.Entry of every answer
}

func (f *fakeKV) read(_ context.Context, path, key string) (Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, path+"#"+key)
	if f.fail != nil {
		return Value{}, f.fail
	}
	v, ok := f.values[path+"#"+key]
	if !ok {
		return Value{}, fmt.Errorf("%w: the entry has no key %q", ErrNoValue, key)
	}
	return Value{Data: []byte(v), Version: f.vers[path], Entry: f.entry}, nil
}

func (f *fakeKV) version(_ context.Context, path string) (Value, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions = append(f.versions, path)
	if f.fail != nil {
		return Value{}, false, f.fail
	}
	return Value{Version: f.vers[path], Entry: f.entry}, true, nil
}

func (f *fakeKV) set(path, key, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values[path+"#"+key] = v
	f.vers[path]++
}

// testStores is a Stores whose every store is kv and whose clock is *now.
func testStores(kv *fakeKV, now *time.Time) *Stores {
	s := New()
	s.now = func() time.Time { return *now }
	s.newReader = func(application.SecretStore) (reader, error) { return kv, nil }
	return s
}

func vaultStore(name string, poll time.Duration) application.SecretStore {
	return application.SecretStore{
		Name:         name,
		Vault:        &application.VaultStore{Address: "http://127.0.0.1:1", Mount: "kv", KVVersion: 2, Auth: application.VaultAuth{TokenFile: "/t"}},
		PollInterval: application.Duration{Duration: poll},
	}
}

// appWith is an application as Defaults leaves it for a file that grants
// it paths of store.
func appWith(name string, store application.SecretStore, paths ...string) application.Application {
	return application.Application{Name: name, SecretStores: []application.StoreGrant{{Store: store, Paths: paths}}}
}

func TestResolveChecksTheGrantBeforeAnyRead(t *testing.T) {
	kv := &fakeKV{values: map[string]string{"kv/data/other/db#password": "other-team-pw"}, vers: map[string]int{}}
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	st := vaultStore("vault", time.Minute)
	for _, tc := range []struct {
		name string
		app  application.Application
		ref  Ref
		want string
	}{
		{"another team's path", appWith("shop", st, "kv/data/shop/*"), Ref{"vault", "kv/data/other/db", "password"}, `path not granted by the applications file to application "shop"`},
		{"a store not granted", appWith("shop", st, "kv/data/shop/*"), Ref{"other", "kv/data/shop/db", "password"}, `store not granted by the applications file to application "shop"`},
		{"no stores at all", application.Application{Name: "shop"}, Ref{"vault", "kv/data/shop/db", "password"}, "store not granted"},
		{"a path climbing out", appWith("shop", st, "kv/data/shop/*"), Ref{"vault", "kv/data/shop/../other/db", "password"}, "path not granted"},
		{"a glob does not cross /", appWith("shop", st, "kv/data/shop/*"), Ref{"vault", "kv/data/shop/x/../../other/db", "password"}, "path not granted"},
		{"metadata instead of data", appWith("shop", st, "kv/*/shop"), Ref{"vault", "kv/metadata/shop", "password"}, "read at kv/data/<path>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.For(context.Background(), tc.app).Resolve("db_password", tc.ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.ref.Store) || !strings.Contains(err.Error(), tc.ref.Path) {
				t.Errorf("err %v does not name the store and path", err)
			}
		})
	}
	if len(kv.reads)+len(kv.versions) != 0 {
		t.Fatalf("the store was asked %v %v for references no grant covers", kv.reads, kv.versions)
	}
}

func TestResolveReadsOncePerPollIntervalAndNoticesARotation(t *testing.T) {
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "pw-1")
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	app := appWith("shop", vaultStore("vault", time.Minute), "kv/data/shop/*")
	ref := Ref{"vault", "kv/data/shop/db", "password"}
	resolve := func() (string, Used) {
		t.Helper()
		r := s.For(context.Background(), app)
		v, _, err := r.Resolve("db_password", ref)
		if err != nil {
			t.Fatal(err)
		}
		return string(v), r.Used()[0]
	}
	v, u1 := resolve()
	if v != "pw-1" || u1.Version != 1 || !u1.Rotated.IsZero() {
		t.Fatalf("first: %q %+v", v, u1)
	}
	// Within the poll interval: the cache answers, even if the store moved.
	kv.set("kv/data/shop/db", "password", "pw-2")
	now = now.Add(30 * time.Second)
	if v, _ := resolve(); v != "pw-1" || len(kv.reads) != 1 || len(kv.versions) != 0 {
		t.Fatalf("within the interval: %q, reads %v, versions %v", v, kv.reads, kv.versions)
	}
	// After it: the version is asked, then the value.
	now = now.Add(time.Minute)
	v, u2 := resolve()
	if v != "pw-2" || u2.Version != 2 || u2.Same(u1) || !u2.Rotated.Equal(now) {
		t.Fatalf("after the interval: %q %+v", v, u2)
	}
	if len(kv.versions) != 1 || len(kv.reads) != 2 {
		t.Fatalf("reads %v, versions %v", kv.reads, kv.versions)
	}
	// An unchanged version costs a metadata read only.
	now = now.Add(2 * time.Minute)
	if v, u3 := resolve(); v != "pw-2" || !u3.Same(u2) || len(kv.reads) != 2 || len(kv.versions) != 2 {
		t.Fatalf("unchanged version: %q, reads %v, versions %v", v, kv.reads, kv.versions)
	}
}

func TestAStoreFailureNamesTheRefAndNoValue(t *testing.T) {
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "pw-secret-1")
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	app := appWith("shop", vaultStore("vault", time.Second), "kv/data/shop/*")
	ref := Ref{"vault", "kv/data/shop/db", "password"}
	if _, _, err := s.For(context.Background(), app).Resolve("db_password", ref); err != nil {
		t.Fatal(err)
	}
	kv.fail = fmt.Errorf("%w: GET: HTTP 403: permission denied", ErrUnavailable)
	now = now.Add(time.Hour)
	_, _, err := s.For(context.Background(), app).Resolve("db_password", ref)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	msg := err.Error()
	for _, want := range []string{`"vault"`, `"kv/data/shop/db"`, `"password"`, "permission denied"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %s", msg, want)
		}
	}
	if strings.Contains(msg, "pw-secret-1") {
		t.Errorf("%q holds the value", msg)
	}
}

func TestWatchNamesTheApplicationsWhoseValueMoved(t *testing.T) {
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "pw-1")
	kv.set("kv/data/shop/api", "token", "tok-1")
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	st := vaultStore("vault", 10*time.Second)
	for app, ref := range map[string]Ref{
		"shop":    {"vault", "kv/data/shop/db", "password"},
		"billing": {"vault", "kv/data/shop/db", "password"},
		"api":     {"vault", "kv/data/shop/api", "token"},
	} {
		if _, _, err := s.For(context.Background(), appWith(app, st, "kv/data/shop/*")).Resolve("s", ref); err != nil {
			t.Fatal(err)
		}
	}
	reads := len(kv.reads) + len(kv.versions)
	if got := s.poll(context.Background()); len(got) != 0 || len(kv.reads)+len(kv.versions) != reads {
		t.Fatalf("before the poll interval: %v, and the store was asked", got)
	}
	kv.set("kv/data/shop/db", "password", "pw-2")
	now = now.Add(10 * time.Second)
	if got := s.poll(context.Background()); !slices.Equal(got, []string{"billing", "shop"}) {
		t.Fatalf("changed: %v, want billing and shop", got)
	}
	now = now.Add(10 * time.Second)
	if got := s.poll(context.Background()); len(got) != 0 {
		t.Fatalf("nothing moved, yet %v", got)
	}
}

func TestTagsFollowTheValueAndSurviveARestartWithTheKeyFile(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "data", "secretstore.key")
	st := vaultStore("vault", time.Minute)
	st.Vault.KVVersion = 1
	ref := Ref{"vault", "kv/shop/db", "password"}
	tagOf := func(s *Stores, v Value) string { return s.tag(st, ref, v) }
	a, err := Open(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pw1, pw2 := Value{Data: []byte("pw-1")}, Value{Data: []byte("pw-2")}
	if tagOf(a, pw1) != tagOf(b, pw1) {
		t.Fatal("a restarted controller with the same key file tags the same value differently")
	}
	if tagOf(a, pw1) == tagOf(a, pw2) {
		t.Fatal("two values share a tag")
	}
	if tagOf(New(), pw1) == tagOf(a, pw1) {
		t.Fatal("another key gives the same tag")
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	// With a store version, the tag is the version's, whatever the value.
	v1, v2 := Value{Data: []byte("x"), Version: 3}, Value{Data: []byte("y"), Version: 3}
	if tagOf(a, v1) != tagOf(New(), v2) || tagOf(a, v1) == tagOf(a, Value{Data: []byte("x"), Version: 4}) {
		t.Fatal("versioned tags do not follow the version alone")
	}
}

// An edit of another key of the entry moves the entry's version; the
// services that mount this key must not be rolled for it, so its tag (and
// the version the record shows) stays until its own value changes.
func TestAnEditOfAnotherKeyKeepsTheTag(t *testing.T) {
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "pw-1")
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	app := appWith("shop", vaultStore("vault", time.Minute), "kv/data/shop/*")
	ref := Ref{"vault", "kv/data/shop/db", "password"}
	resolve := func() (string, string, Used) {
		t.Helper()
		now = now.Add(2 * time.Minute)
		r := s.For(context.Background(), app)
		v, tag, err := r.Resolve("db_password", ref)
		if err != nil {
			t.Fatal(err)
		}
		return string(v), tag, r.Used()[0]
	}
	_, tag1, u1 := resolve()
	kv.set("kv/data/shop/db", "username", "shop") // version 2, password unchanged
	v, tag2, u2 := resolve()
	if v != "pw-1" || tag2 != tag1 || u2.Version != 1 || !u2.Same(u1) || !u2.Rotated.IsZero() {
		t.Fatalf("after another key's edit: %q, tag moved %v, %+v", v, tag2 != tag1, u2)
	}
	kv.set("kv/data/shop/db", "password", "pw-2") // version 3
	v, tag3, u3 := resolve()
	if v != "pw-2" || tag3 == tag1 || u3.Version != 3 {
		t.Fatalf("after its own edit: %q, tag moved %v, %+v", v, tag3 != tag1, u3)
	}
}

// A Vault KV v2 entry whose metadata was deleted starts again at version
// 1: the same number as a version read before is not the same version when
// it was written at another time, so the value is read and the tag differs.
func TestARecreatedEntryWithTheSameVersionNumberIsReadAgain(t *testing.T) {
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "pw-1")
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	app := appWith("shop", vaultStore("vault", time.Minute), "kv/data/shop/*")
	ref := Ref{"vault", "kv/data/shop/db", "password"}
	kv.entry = "created-1"
	_, tag1, err := s.For(context.Background(), app).Resolve("db_password", ref)
	if err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	kv.values["kv/data/shop/db#password"], kv.entry = "pw-other", "created-2" // still version 1
	kv.mu.Unlock()
	now = now.Add(2 * time.Minute)
	v, tag2, err := s.For(context.Background(), app).Resolve("db_password", ref)
	if err != nil {
		t.Fatal(err)
	}
	if string(v) != "pw-other" || tag2 == tag1 {
		t.Fatalf("recreated entry: %q, tag moved %v", v, tag2 != tag1)
	}
}

func TestResolveRefusesAnotherApplicationAValueInTheCache(t *testing.T) {
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "shop-cached-pw")
	now := time.Unix(1000, 0)
	s := testStores(kv, &now)
	st := vaultStore("vault", time.Hour)
	ref := Ref{"vault", "kv/data/shop/db", "password"}
	if v, _, err := s.For(context.Background(), appWith("shop", st, "kv/data/shop/*")).Resolve("db_password", ref); err != nil || string(v) != "shop-cached-pw" {
		t.Fatalf("shop: %q %v", v, err)
	}
	asked := len(kv.reads) + len(kv.versions)
	for _, tc := range []struct {
		name string
		app  application.Application
		want string
	}{
		{"granted the store elsewhere", appWith("blog", st, "kv/data/blog/*"), `path not granted by the applications file to application "blog"`},
		{"not granted the store", application.Application{Name: "blog"}, `store not granted by the applications file to application "blog"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.For(context.Background(), tc.app)
			v, tag, err := r.Resolve("db_password", ref)
			if err == nil || !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if v != nil || tag != "" || len(r.Used()) != 0 || strings.Contains(err.Error(), "shop-cached-pw") {
				t.Fatalf("a refused resolution gave %q, tag %q, used %v, err %v", v, tag, r.Used(), err)
			}
		})
	}
	if n := len(kv.reads) + len(kv.versions); n != asked {
		t.Fatalf("refused resolutions asked the store %d times", n-asked)
	}
	if users := s.Users("vault", ""); !slices.Equal(users, []string{"shop"}) {
		t.Fatalf("users of the entry %v, want only shop", users)
	}
}
