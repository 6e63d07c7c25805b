package secretstore

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestStores_Expire(t *testing.T) {
	now := time.Unix(1000, 0)
	kv := &fakeKV{values: map[string]string{}, vers: map[string]int{}}
	kv.set("kv/data/shop/db", "password", "v1")
	kv.set("kv/data/shop/app", "conf", "c1")
	s := testStores(kv, &now)
	vault, other := vaultStore("vault", time.Hour), vaultStore("other", time.Hour)
	ctx := context.Background()
	resolve := func(app string, st string, path, key string) {
		t.Helper()
		store := vault
		if st == "other" {
			store = other
		}
		if _, _, err := s.For(ctx, appWith(app, store, "kv/data/shop/*")).Resolve("x", Ref{Store: st, Path: path, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	resolve("shop", "vault", "kv/data/shop/db", "password")
	resolve("billing", "vault", "kv/data/shop/app", "conf")
	resolve("elsewhere", "other", "kv/data/shop/db", "password")

	if got := s.Users("vault", ""); !slices.Equal(got, []string{"billing", "shop"}) {
		t.Fatalf("users of vault %v", got)
	}
	if got := s.Users("vault", "kv/data/shop/db"); !slices.Equal(got, []string{"shop"}) {
		t.Fatalf("users of vault's db entry %v", got)
	}
	if got := s.Users("nope", ""); len(got) != 0 {
		t.Fatalf("users of an unknown store %v", got)
	}

	// Within the hour-long pollInterval, a resolution is served from the
	// cache; once the entry is expired, the store is asked at once, and
	// only for the entry named.
	kv.set("kv/data/shop/db", "password", "v2")
	resolve("shop", "vault", "kv/data/shop/db", "password")
	asked := len(kv.versions) + len(kv.reads)
	if n := s.Expire("vault", "kv/data/shop/db"); n != 1 {
		t.Fatalf("expired %d entries, want 1", n)
	}
	v, _, err := s.For(ctx, appWith("shop", vault, "kv/data/shop/*")).Resolve("x", Ref{Store: "vault", Path: "kv/data/shop/db", Key: "password"})
	if err != nil || string(v) != "v2" {
		t.Fatalf("after Expire: %q %v, want the rotated value", v, err)
	}
	if len(kv.versions)+len(kv.reads) == asked {
		t.Fatal("the store was not asked after Expire")
	}
	// The other store's entry at the same path stayed cached, and the
	// poller finds the expired one due and reports nothing more (the pass
	// above already took the new value).
	asked = len(kv.versions) + len(kv.reads)
	resolve("elsewhere", "other", "kv/data/shop/db", "password")
	resolve("billing", "vault", "kv/data/shop/app", "conf")
	if len(kv.versions)+len(kv.reads) != asked {
		t.Fatal("an entry that was not expired was read again")
	}

	// Expire without a path covers the whole store, and Watch's poll then
	// reports the applications whose value moved.
	kv.set("kv/data/shop/app", "conf", "c2")
	if n := s.Expire("vault", ""); n != 2 {
		t.Fatalf("expired %d entries, want 2", n)
	}
	if got := s.poll(ctx); !slices.Equal(got, []string{"billing"}) {
		t.Fatalf("poll after Expire found %v, want billing", got)
	}
}
