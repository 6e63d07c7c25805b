package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// storeApps is what the secret-store tests' applications files differ
// in. Each file has one automated application, deployed from deploy/ on
// main every 10s with prune, that reads from one store; only what a test
// depends on is set here.
type storeApps struct {
	stack, repo string
	store       secretStore
	// grant is the path pattern the application may read.
	grant string
	// pollInterval is how often the store is read; 1s when empty.
	pollInterval string
	// notify, when set, receives every notification through a webhook.
	notify   *outputs
	selfHeal bool
	// syncPolicy holds further syncPolicy keys, one YAML line each.
	syncPolicy []string
}

// secretStore is one secretStores entry: its name, its kind's key and
// that key's value as a YAML flow mapping.
type secretStore struct{ name, kind, spec string }

// vaultStore is the store "vault" on the KV mount "kv" of a Vault at
// addr, read with the token in tokenFile.
func vaultStore(addr, tokenFile string, kvVersion int) secretStore {
	return secretStore{"vault", "vault", fmt.Sprintf("{address: %s, mount: kv, kvVersion: %d, auth: {tokenFile: %s}}", addr, kvVersion, tokenFile)}
}

// storeAppsFile writes o as dir/applications.yaml and returns its path.
func storeAppsFile(t *testing.T, dir string, o storeApps) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: flotilla/v1\n")
	if o.notify != nil {
		fmt.Fprintf(&b, `notifications:
  - name: recorder
    type: webhook
    urlFile: %s
    events: [sync.started, sync.succeeded, sync.failed, drift.detected, drift.corrected, health.changed]
`, notificationSink(t, dir, o.notify))
	}
	poll := o.pollInterval
	if poll == "" {
		poll = "1s"
	}
	automated := "{prune: true}"
	if o.selfHeal {
		automated = "{prune: true, selfHeal: true}"
	}
	fmt.Fprintf(&b, `secretStores:
  - name: %[3]s
    %[4]s: %[5]s
    pollInterval: %[6]s
    grants:
      - applications: [%[1]s]
        paths: [%[7]s]
applications:
  - name: %[1]s
    source: {repoURL: %[2]s, revision: main, path: deploy}
    stack: %[1]s
    syncPolicy:
      automated: %[8]s
      interval: 10s
`, o.stack, o.repo, o.store.name, o.store.kind, o.store.spec, poll, o.grant, automated)
	for _, l := range o.syncPolicy {
		b.WriteString("      " + l + "\n")
	}
	appsFile := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return appsFile
}

// vaultTeam starts Vault with a KV v2 mount and a token that may read the
// stack's entries, and writes the entry's first value.
func vaultTeam(t *testing.T, dir, stack, entry, key, value string) (*vaulttest.Server, string, string) {
	t.Helper()
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	srv.Policy("team", fmt.Sprintf("path \"kv/data/%[1]s/*\" { capabilities = [\"read\"] }\npath \"kv/metadata/%[1]s/*\" { capabilities = [\"read\"] }\n", stack))
	token, tokenFile := srv.Token(dir, "team")
	srv.Write(entry, true, map[string]any{key: value})
	return srv, token, tokenFile
}

// serviceWrite is one client write to a service, as the daemon's event
// stream times it.
type serviceWrite struct {
	service string
	at      time.Time
}

// serviceWriteLog follows the swarm's service events and lists, in the
// daemon's order, the client writes (not Swarm's own update progress) on
// the stack's services, by unscoped name.
func serviceWriteLog(t *testing.T, stack string) func() []serviceWrite {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ev := swarmtest.Client(t).Events(ctx, client.EventsListOptions{Filters: make(client.Filters).Add("type", "service")})
	var (
		mu   sync.Mutex
		log  []serviceWrite
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case m := <-ev.Messages:
				name := m.Actor.Attributes["name"]
				if !strings.HasPrefix(name, stack+"_") || m.Action != "update" {
					continue
				}
				if _, progress := m.Actor.Attributes["updatestate.new"]; progress {
					continue
				}
				mu.Lock()
				log = append(log, serviceWrite{strings.TrimPrefix(name, stack+"_"), time.Unix(0, m.TimeNano)})
				mu.Unlock()
			case <-ev.Err:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []serviceWrite {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}
}

// writesOf counts the writes of log by service.
func writesOf(log []serviceWrite) map[string]int {
	n := map[string]int{}
	for _, w := range log {
		n[w.service]++
	}
	return n
}

// serviceWrites counts by service the client writes (not Swarm's own
// update progress) on the stack's services.
func serviceWrites(t *testing.T, stack string) func() map[string]int {
	t.Helper()
	log := serviceWriteLog(t, stack)
	return func() map[string]int { return writesOf(log()) }
}

// stackSecrets lists the swarm secrets whose names start with prefix.
func stackSecrets(t *testing.T, prefix string) []string {
	t.Helper()
	l, err := swarmtest.Client(t).SecretList(context.Background(), client.SecretListOptions{Filters: make(client.Filters).Add("name", prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range l.Items {
		names = append(names, s.Spec.Name)
	}
	slices.Sort(names)
	return names
}
