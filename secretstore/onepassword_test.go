package secretstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentracing/opentracing-go"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/secretstore/onepasswordtest"
)

// These tests run against onepasswordtest, a hand-written stand-in for
// the Connect server (see its package doc for why not the real one).

const opToken = "op-connect-token-9f3b1c-do-not-print"

func opStore(srv *onepasswordtest.Server, tokenFile string) application.SecretStore {
	return application.SecretStore{
		Name:         "onepassword",
		OnePassword:  &application.OnePasswordStore{ConnectHost: srv.URL, TokenFile: tokenFile},
		PollInterval: application.Duration{Duration: time.Nanosecond}, // every resolution asks the store
	}
}

// opServer is a server with a vault "shop" holding the item "db".
func opServer(t *testing.T) (srv *onepasswordtest.Server, vaultID, itemID string, st application.SecretStore) {
	srv = onepasswordtest.Start(t, opToken)
	vaultID = srv.AddVault("shop")
	itemID = srv.SetItem(vaultID, "db",
		onepasswordtest.Field{Label: "username", Value: "shop"},
		onepasswordtest.Field{Label: "password", Value: "op-pw-1"},
		onepasswordtest.Field{Section: "replica", Label: "password", Value: "op-replica-pw"},
		onepasswordtest.Field{Section: "primary", Label: "host", Value: "db-1"},
		onepasswordtest.Field{Section: "replica", Label: "host", Value: "db-2"},
	)
	other := srv.AddVault("other")
	srv.SetItem(other, "db", onepasswordtest.Field{Label: "password", Value: "other-team-pw"})
	return srv, vaultID, itemID, opStore(srv, onepasswordtest.TokenFile(t, t.TempDir(), opToken))
}

func TestOnePasswordReadsAFieldByTitleOrID(t *testing.T) {
	srv, vaultID, itemID, st := opServer(t)
	stores := secretstore.New()
	for _, tc := range []struct {
		path, key, want string
		requests        int
	}{
		{"shop/db", "password", "op-pw-1", 3},               // vault by title, item by title, the item
		{vaultID + "/" + itemID, "password", "op-pw-1", 1},  // the item, by IDs
		{vaultID + "/db", "username", "shop", 2},            // item by title, the item
		{"shop/db", "replica.password", "op-replica-pw", 3}, // a section's field
		{"shop/" + itemID, "primary.host", "db-1", 2},       // vault by title, the item
	} {
		before := len(srv.Requests())
		v, u, err := resolve(t, stores, shopApp(st, "shop/*", vaultID+"/*"), secretstore.Ref{Store: "onepassword", Path: tc.path, Key: tc.key})
		if err != nil || v != tc.want || u.Version != 1 {
			t.Fatalf("%s#%s: %q %+v %v", tc.path, tc.key, v, u, err)
		}
		if n := len(srv.Requests()) - before; n != tc.requests {
			t.Errorf("%s#%s took %d requests, want %d: %v", tc.path, tc.key, n, tc.requests, srv.Requests()[before:])
		}
	}
	for _, tc := range []struct{ path, key, want string }{
		{"shop/db", "host", `2 fields of the item are labelled "host"; name one as <section>.<field>`},
		{"shop/db", "nope", `the item has no field labelled "nope"`},
		{"shop/gone", "password", `0 items of the vault are titled "gone"`},
		{"nowhere/db", "password", `0 vaults the token can read are titled "nowhere"`},
	} {
		_, _, err := resolve(t, stores, shopApp(st, "*/*"), secretstore.Ref{Store: "onepassword", Path: tc.path, Key: tc.key})
		if !errors.Is(err, secretstore.ErrNoValue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"`+tc.path+`"`) {
			t.Errorf("%s#%s: %v, want ErrNoValue with %q", tc.path, tc.key, err, tc.want)
		}
		if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "db-1") {
			t.Errorf("%s#%s: the error quotes a value: %v", tc.path, tc.key, err)
		}
	}
	if !opentracing.IsGlobalTracerRegistered() {
		t.Fatal("the SDK was left to install its Jaeger tracer")
	}
	if _, noop := opentracing.GlobalTracer().(opentracing.NoopTracer); !noop {
		t.Fatalf("global tracer %T, want the no-op one", opentracing.GlobalTracer())
	}
}

func TestOnePasswordRotationIsNoticedByTheItemVersion(t *testing.T) {
	srv, vaultID, itemID, st := opServer(t)
	stores := secretstore.New()
	app := shopApp(st, "shop/*")
	ref := secretstore.Ref{Store: "onepassword", Path: "shop/db", Key: "password"}
	r := stores.For(context.Background(), app)
	data, tag1, err := r.Resolve("db_password", ref)
	if err != nil {
		t.Fatal(err)
	}
	if u1 := r.Used()[0]; string(data) != "op-pw-1" || u1.Version != 1 {
		t.Fatalf("read: %q %+v", data, u1)
	}
	u1 := r.Used()[0]
	// Unchanged: one request for the item's version, nothing more.
	before := len(srv.Requests())
	v, u, err := resolve(t, stores, app, ref)
	if err != nil || v != "op-pw-1" || !u.Same(u1) || !u.Rotated.IsZero() {
		t.Fatalf("again: %q %+v %v", v, u, err)
	}
	if got := srv.Requests()[before:]; len(got) != 1 || got[0] != "GET /v1/vaults/"+vaultID+"/items/"+itemID {
		t.Fatalf("an unchanged item cost %v, want one read of the item", got)
	}
	// Edited in 1Password: version 2, the new value, the rotation noted.
	srv.SetItem(vaultID, "db", onepasswordtest.Field{Label: "password", Value: "op-pw-2"})
	v, u2, err := resolve(t, stores, app, ref)
	if err != nil || v != "op-pw-2" || u2.Version != 2 || u2.Same(u1) || u2.Rotated.IsZero() {
		t.Fatalf("rotated: %q %+v %v", v, u2, err)
	}
	// Deleted and made again under the same title, the item's versions
	// start at 1 again: its tag differs from the first item's version 1 all
	// the same, so the render never reuses a swarm secret named after it.
	srv.DeleteItem(itemID)
	srv.SetItem(vaultID, "db", onepasswordtest.Field{Label: "password", Value: "op-pw-3"})
	r = stores.For(context.Background(), app)
	data, tag3, err := r.Resolve("db_password", ref)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "op-pw-3" || r.Used()[0].Version != 1 || tag3 == tag1 {
		t.Fatalf("re-created: %q version %d, tags %s %s, %v", data, r.Used()[0].Version, tag1, tag3, err)
	}
}

func TestOnePasswordABadTokenNamesTheStoreAndNeverTheToken(t *testing.T) {
	srv, _, _, st := opServer(t)
	ref := secretstore.Ref{Store: "onepassword", Path: "shop/db", Key: "password"}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, secretstore.ErrUnavailable) {
			t.Fatalf("%s: %v, want ErrUnavailable", what, err)
		}
		msg := err.Error()
		for _, want := range []string{`secret store "onepassword"`, `path "shop/db"`, `key "password"`, "HTTP 401", "Invalid token signature"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %s", what, msg, want)
			}
		}
		for _, secret := range []string{opToken, "wrong-token-4471", "op-pw-1"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: %q quotes a token or value", what, msg)
			}
		}
	}
	// A token file with a token the server does not accept.
	bad := opStore(srv, onepasswordtest.TokenFile(t, t.TempDir(), "wrong-token-4471"))
	_, _, err := resolve(t, secretstore.New(), shopApp(bad, "shop/*"), ref)
	check("wrong token", err)
	// A token revoked after a good read: the version check is refused.
	stores := secretstore.New()
	if _, _, err := resolve(t, stores, shopApp(st, "shop/*"), ref); err != nil {
		t.Fatal(err)
	}
	srv.SetToken("a-new-token")
	_, _, err = resolve(t, stores, shopApp(st, "shop/*"), ref)
	check("revoked token", err)
	// The token file rewritten with the new token: picked up at once.
	if err := os.WriteFile(st.OnePassword.TokenFile, []byte("a-new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _, err := resolve(t, stores, shopApp(st, "shop/*"), ref); err != nil || v != "op-pw-1" {
		t.Fatalf("after the token file was rotated: %q %v", v, err)
	}
}

func TestOnePasswordRefusesWhatTheGrantDoesNotCoverBeforeAnyRequest(t *testing.T) {
	srv, _, _, st := opServer(t)
	stores := secretstore.New()
	for _, tc := range []struct {
		name, grant, path string
		want              error
	}{
		{"another vault", "shop/*", "other/db", secretstore.ErrNotGranted},
		{"a path climbing out", "shop/*", "shop/../other/db", secretstore.ErrNotGranted},
		{"no item", "*", "shop", secretstore.ErrNoValue},
		// A quote would reach the API's title filter unescaped, and could
		// widen it to a vault the path does not name.
		{"a quote in a title", "*/*", `shop" or title eq "other/db`, secretstore.ErrNoValue},
		{"a backslash in a title", "*/*", `shop\/db`, secretstore.ErrNoValue},
	} {
		_, _, err := resolve(t, stores, shopApp(st, tc.grant), secretstore.Ref{Store: "onepassword", Path: tc.path, Key: "password"})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), `secret store "onepassword"`) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := srv.Requests(); len(got) != 0 {
		t.Fatalf("the server was asked %v for references that are refused", got)
	}
}

func TestOnePasswordAHungServerFailsThePassAndHoldsOneRequest(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	hits := 0
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		<-release
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	st := application.SecretStore{
		Name:         "onepassword",
		OnePassword:  &application.OnePasswordStore{ConnectHost: hung.URL, TokenFile: onepasswordtest.TokenFile(t, t.TempDir(), opToken)},
		PollInterval: application.Duration{Duration: time.Nanosecond},
	}
	stores := secretstore.New()
	ref := secretstore.Ref{Store: "onepassword", Path: "shop/db", Key: "password"}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		_, _, err := stores.For(ctx, shopApp(st, "shop/*")).Resolve("db_password", ref)
		cancel()
		if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), `"shop/db"`) {
			t.Fatalf("attempt %d: %v, want ErrUnavailable naming the path", i, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("attempt %d took %s", i, d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 1 {
		t.Fatalf("%d requests reached the hung server, want 1: the SDK's calls cannot be cancelled, so one at a time", hits)
	}
}
