package reconcile

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/secretstore/kumotest"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// Stores that stop answering, and applications beside them that use
// another store, driven by the scheduler on a clock the test moves.

// closedLoopback returns a loopback address nothing listens on: a
// connection to it is refused.
func closedLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// vaultStoreFor is a KV v2 store at addr granting app the entries under
// kv/data/<app>/.
func vaultStoreFor(name, addr, tokenFile, app string) application.SecretStore {
	return application.SecretStore{
		Name:         name,
		Vault:        &application.VaultStore{Address: addr, Mount: "kv", Auth: application.VaultAuth{TokenFile: tokenFile}},
		PollInterval: application.Duration{Duration: time.Nanosecond},
		Grants:       []application.SecretGrant{{Applications: []string{app}, Paths: []string{"kv/data/" + app + "/*"}}},
	}
}

// awsStoreFor is a Secrets Manager store at endpoint granting app the
// secrets named <app>/...; its key files are made in dir.
func awsStoreFor(t *testing.T, name, endpoint, dir, app string) application.SecretStore {
	t.Helper()
	auth := application.AWSAuth{AccessKeyIDFile: filepath.Join(dir, "key-id"), SecretAccessKeyFile: filepath.Join(dir, "secret-key")}
	for _, f := range []string{auth.AccessKeyIDFile, auth.SecretAccessKeyFile} {
		if err := os.WriteFile(f, []byte("test-"+filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return application.SecretStore{
		Name:         name,
		AWS:          &application.AWSStore{Region: kumotest.Region, Endpoint: endpoint, Auth: auth},
		PollInterval: application.Duration{Duration: time.Nanosecond},
		Grants:       []application.SecretGrant{{Applications: []string{app}, Paths: []string{app + "/*"}}},
	}
}

// storeApps defaults and validates an applications file of stores and
// apps, as the controller is given it.
func storeApps(t *testing.T, stores []application.SecretStore, apps ...application.Application) []application.Application {
	t.Helper()
	f := &application.File{APIVersion: application.APIVersion, SecretStores: stores, Applications: apps}
	application.Defaults(f)
	if err := application.Validate(f); err != nil {
		t.Fatal(err)
	}
	return f.Applications
}

// composeRef is composeVault with its reference pointing at store and path.
func composeRef(store, path string) string {
	return strings.Replace(composeVault, "{store: vault, path: kv/data/shop/db,", fmt.Sprintf("{store: %s, path: %s,", store, path), 1)
}

func TestAnUnreachableStoreFailsOnlyItsApplicationKeepsWhatRunsAndBacksOff(t *testing.T) {
	vault := vaulttest.Start(t)
	vault.Mount("kv", 2)
	_, tokenFile := vault.Token(t.TempDir(), "root")
	vault.Write("kv/data/shop/db", true, map[string]any{"password": "outage-shop-pw-71c2-plaintext"})
	vault.Write("kv/data/blog/db", true, map[string]any{"password": "outage-blog-pw-71c2-plaintext"})
	kumo := kumotest.Start(t)
	kumo.Create("shop/db", `{"password":"outage-shop-aws-pw-71c2-plaintext"}`)
	kumo.Create("blog/db", `{"password":"outage-blog-aws-pw-71c2-plaintext"}`)

	// shop's store goes away; blog reads another store, of the other kind,
	// which stays up.
	vaultAt := func(name, app string) func(string) application.SecretStore {
		return func(addr string) application.SecretStore { return vaultStoreFor(name, addr, tokenFile, app) }
	}
	awsAt := func(name, app string) func(string) application.SecretStore {
		return func(addr string) application.SecretStore { return awsStoreFor(t, name, addr, t.TempDir(), app) }
	}
	cases := []struct {
		kind               string
		shop, blog         func(addr string) application.SecretStore
		shopUp, blogUp     string
		shopPath, blogPath string
	}{
		{"vault", vaultAt("shop-store", "shop"), awsAt("blog-store", "blog"), vault.Addr, kumo.Endpoint, "kv/data/shop/db", "blog/db"},
		{"aws", awsAt("shop-store", "shop"), vaultAt("blog-store", "blog"), kumo.Endpoint, vault.Addr, "shop/db", "kv/data/blog/db"},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			up, down := tc.shopUp, closedLoopback(t)
			blogStore := tc.blog(tc.blogUp)
			apps := func(shopAddr string) []application.Application {
				shop, blog := fastApp("shop", time.Hour), fastApp("blog", time.Hour)
				shop.Source.Path, blog.Source.Path = "shop", "blog"
				return storeApps(t, []application.SecretStore{tc.shop(shopAddr), blogStore}, shop, blog)
			}
			b := chartstest.NewMinimal()
			f := newFakeFetcher()
			f.commit(t, map[string]string{
				"shop/docker-compose.yml": composeRef("shop-store", tc.shopPath),
				"blog/docker-compose.yml": composeRef("blog-store", tc.blogPath),
			})
			var mu sync.Mutex
			now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			clock := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return now
			}
			advance := func(d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				now = now.Add(d)
			}
			c, err := New(Options{ControllerID: "ctl", Backend: b, Fetcher: f, Logger: quiet, Backoff: time.Minute, Clock: clock}, apps(up))
			if err != nil {
				t.Fatal(err)
			}
			// schedule starts what is due at the clock's time, as one tick
			// of Run does, and waits for it.
			schedule := func() {
				var wg sync.WaitGroup
				c.startDue(context.Background(), &wg, false)
				wg.Wait()
			}
			state := func(name string) (Result, int, time.Time) {
				c.mu.Lock()
				defer c.mu.Unlock()
				a := c.apps[name]
				return a.last, a.failures, a.next
			}

			schedule()
			for _, name := range []string{"shop", "blog"} {
				if res, _, _ := state(name); res.Err != nil || res.Action != charts.Install {
					t.Fatalf("%s install: %s %v", name, res.Action, res.Err)
				}
			}
			writes := b.Writes()
			apiV := b.ServiceVersion("shop", "shop_api")
			_, _, blogNext := state("blog")

			// The store moves to a closed port: shop is due at once, with
			// its new definition, and fails.
			c.SetApplications(apps(down))
			schedule()
			res, failures, _ := state("shop")
			if res.Err == nil || KindOf(res.Err) != Transient || failures != 1 {
				t.Fatalf("shop with its store down: %v (%s), %d failures; want one transient failure", res.Err, KindOf(res.Err), failures)
			}
			for _, want := range []string{`"shop-store"`, `"` + tc.shopPath + `"`, "connection refused"} {
				if !strings.Contains(res.Err.Error(), want) {
					t.Errorf("error %q lacks %s", res.Err, want)
				}
			}
			if b.Writes() != writes || b.ServiceVersion("shop", "shop_api") != apiV {
				t.Fatalf("a pass whose store was down wrote %d times", b.Writes()-writes)
			}

			// Passes, and with them reads of the store, are spaced 1m, 2m,
			// 4m apart: over eight minutes of 15s ticks shop runs three
			// more times, not thirty-two.
			start := clock()
			var ran []time.Duration
			for range 32 {
				advance(15 * time.Second)
				schedule()
				if _, n, _ := state("shop"); n != failures {
					failures = n
					ran = append(ran, clock().Sub(start))
				}
			}
			if want := []time.Duration{time.Minute, 3 * time.Minute, 7 * time.Minute}; !slices.Equal(ran, want) {
				t.Fatalf("shop's passes with its store down ran at %v after the first failure, want %v", ran, want)
			}
			if b.Writes() != writes {
				t.Fatalf("failing passes wrote %d times", b.Writes()-writes)
			}

			// blog, on the store that answers, kept its schedule and result.
			if res, n, next := state("blog"); res.Err != nil || res.Action != charts.Install || n != 0 || !next.Equal(blogNext) {
				t.Fatalf("blog beside the outage: %s %v, %d failures, next %s (was %s)", res.Action, res.Err, n, next, blogNext)
			}

			// The store is back: the pass succeeds and the backoff is gone.
			c.SetApplications(apps(up))
			schedule()
			res, failures, next := state("shop")
			if res.Err != nil || failures != 0 || next.Sub(clock()) != time.Hour {
				t.Fatalf("shop with its store back: %v, %d failures, next in %s; want success and the 1h interval", res.Err, failures, next.Sub(clock()))
			}
		})
	}
}
