package backend

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/regauth"
)

// renderProject writes a compose file (and a small file its configs and secrets
// can point at) into a temporary checkout and renders it for stack.
func renderProject(t *testing.T, stack, composeFile string) *compose.Rendered {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"docker-compose.yml": composeFile, "data.txt": "data\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// webWith is a one-service stack whose service has extra (indented four
// spaces) and whose file ends with top (top-level sections).
func webWith(extra, top string) string {
	return `version: "3.8"
services:
  web:
    image: ` + swarmtest.Image + `
    stop_grace_period: 1s
` + extra + top
}

// faults collects every *fault.Error in err's tree, joined errors included.
func faults(err error) []*fault.Error {
	var out []*fault.Error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if fe, ok := e.(*fault.Error); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// wantRefused asserts err holds a refusal at field whose message contains
// every one of words.
func wantRefused(t *testing.T, err error, field string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("deploy succeeded, want a refusal at %s", field)
	}
	for _, fe := range faults(err) {
		if fe.Field != field {
			continue
		}
		for _, w := range words {
			if !strings.Contains(fe.Err.Error(), w) {
				t.Errorf("refusal at %s = %q, want it to mention %q", field, fe.Err, w)
			}
		}
		return
	}
	t.Fatalf("no refusal at field %s in: %v", field, err)
}

// tryDeploy deploys r with the owner label ctl/<stack> and returns the
// error together with how many writes the attempt sent.
func tryDeploy(t *testing.T, b charts.Backend, stats func() Stats, stack string, r *compose.Rendered, adopt bool) (charts.DeployResult, int, error) {
	t.Helper()
	before := stats()
	res, err := b.DeployStack(context.Background(), charts.DeployRequest{
		Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets,
		Labels: map[string]string{LabelOwner: "ctl/" + stack}, Adopt: adopt,
	})
	return res, stats().Sub(before).Writes, err
}

// assertNothingCreated lists what the stack holds on the swarm.
func assertNothingCreated(t *testing.T, b *Backend, stack string, writes int) {
	t.Helper()
	if writes != 0 {
		t.Errorf("refused deploy sent %d writes", writes)
	}
	ctx := context.Background()
	live, err1 := b.LiveServices(ctx, stack)
	nets, err2 := b.LiveNetworks(ctx, stack)
	configs, err3 := b.LiveConfigs(ctx, stack)
	secrets, err4 := b.LiveSecrets(ctx, stack)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	if n := len(live) + len(nets) + len(configs) + len(secrets); n != 0 {
		t.Errorf("refused deploy left objects: services %d, networks %v, configs %v, secrets %v", len(live), nets, configs, secrets)
	}
}

func TestGuard_externalNetworkNeedsAnAllowEntry(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := context.Background()
	stack := swarmtest.Name(t, "gnet")
	netName := stack + "-shared"
	api := swarmtest.Client(t)
	created, err := api.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Driver: "overlay", Attachable: true})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the stack's services go before the network
	// they are attached to, which the daemon refuses to remove until then.
	t.Cleanup(func() {
		if _, err := api.NetworkRemove(context.Background(), created.ID, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network %s: %v", netName, err)
		}
	})
	swarmtest.Cleanup(t, stack)

	r := renderProject(t, stack, webWith("    networks: [shared]\n", `
networks:
  shared:
    external: true
    name: `+netName+"\n"))

	t.Run("refused without an entry, writing nothing", func(t *testing.T) {
		_, writes, err := tryDeploy(t, b, b.Stats, stack, r, false)
		wantRefused(t, err, "services.web.networks", netName, "allow.networks")
		assertNothingCreated(t, b, stack, writes)
	})

	t.Run("deploys and runs with the entry", func(t *testing.T) {
		allowed := b.WithAllowedReferences(application.Allow{Networks: []string{netName}})
		if _, _, err := tryDeploy(t, allowed, b.Stats, stack, r, false); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, b, stack)
		web := services(t, b, stack)["web"]
		if nets := web.Spec.TaskTemplate.Networks; len(nets) != 1 || nets[0].Target != created.ID {
			t.Errorf("web attached to %+v, want %s", nets, created.ID)
		}
		// The copy's allowlist is its own: the original still refuses.
		_, _, err := tryDeploy(t, b, b.Stats, stack, r, false)
		wantRefused(t, err, "services.web.networks", netName)
	})
}

func TestGuard_hostNetworkIsExternalToo(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "ghost")
	swarmtest.Cleanup(t, stack)
	r := renderProject(t, stack, webWith("    networks: [hostnet]\n", "networks:\n  hostnet:\n    external: true\n    name: host\n"))
	_, writes, err := tryDeploy(t, b, b.Stats, stack, r, false)
	wantRefused(t, err, "services.web.networks", `"host"`, "predefined", "allow.networks")
	assertNothingCreated(t, b, stack, writes)
}

func TestGuard_bindMountOfRootIsRefused(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "groot")
	swarmtest.Cleanup(t, stack)
	r := renderProject(t, stack, webWith("    volumes: [\"/:/host:ro\"]\n", ""))
	// Even an allowlist with other paths on it does not cover "/".
	g := b.WithAllowedReferences(application.Allow{HostPaths: []string{"/srv", "/var/lib"}})
	_, writes, err := tryDeploy(t, g, b.Stats, stack, r, false)
	wantRefused(t, err, "services.web.volumes[0]", `"/"`, "Docker socket", "allow.hostPaths")
	assertNothingCreated(t, b, stack, writes)
}

func TestGuard_dockerSocketNeedsItsOwnEntry(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gsock")
	swarmtest.Cleanup(t, stack)
	r := renderProject(t, stack, webWith("    volumes: [\"/var/run/docker.sock:/var/run/docker.sock\"]\n", ""))

	for _, tt := range []struct {
		name  string
		allow []string
	}{
		{"with nothing allowed", nil},
		{"with / allowed", []string{"/"}},
		{"with /var allowed", []string{"/var"}},
		{"with another socket allowed", []string{"/run/docker.sock"}},
	} {
		t.Run("refused "+tt.name, func(t *testing.T) {
			g := b.WithAllowedReferences(application.Allow{HostPaths: tt.allow})
			_, writes, err := tryDeploy(t, g, b.Stats, stack, r, false)
			wantRefused(t, err, "services.web.volumes[0]", "/var/run/docker.sock", "Docker socket")
			assertNothingCreated(t, b, stack, writes)
		})
	}

	t.Run("deploys and runs with the socket allowed", func(t *testing.T) {
		g := b.WithAllowedReferences(application.Allow{HostPaths: []string{"/var/run/docker.sock"}})
		if _, _, err := tryDeploy(t, g, b.Stats, stack, r, false); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, b, stack)
	})
}

func TestGuard_bindInDisguiseIsAHostPath(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gdisg")
	swarmtest.Cleanup(t, stack)
	r := renderProject(t, stack, webWith("    volumes: [\"etc:/host-etc\"]\n", `
volumes:
  etc:
    driver: local
    driver_opts: {type: none, o: bind, device: /etc}
`))
	_, writes, err := tryDeploy(t, b, b.Stats, stack, r, false)
	wantRefused(t, err, "services.web.volumes[0]", "/etc", "allow.hostPaths")
	assertNothingCreated(t, b, stack, writes)
}

func TestGuard_allowedHostPathDeploysAndRuns(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gpath")
	swarmtest.Cleanup(t, stack)
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	r := renderProject(t, stack, webWith("    volumes: [\""+data+":/data:ro\"]\n", ""))

	_, writes, err := tryDeploy(t, b, b.Stats, stack, r, false)
	wantRefused(t, err, "services.web.volumes[0]", data, "allow.hostPaths")
	assertNothingCreated(t, b, stack, writes)

	// The prefix is a directory above, written uncleaned.
	g := b.WithAllowedReferences(application.Allow{HostPaths: []string{root + "/./"}})
	if _, _, err := tryDeploy(t, g, b.Stats, stack, r, false); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, b, stack)
}

func TestGuard_forbiddenSecretsAndRecordsWhateverTheAllowlist(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gforb")
	swarmtest.Cleanup(t, stack)
	ctlSecret := stack + "-controller-key"
	g := b.WithForbiddenSecrets(map[string]struct{}{ctlSecret: {}}).(*Backend).
		WithAllowedReferences(application.Allow{Secrets: []string{ctlSecret}, Configs: []string{"flotilla-release." + stack + ".1"}})

	t.Run("the controller's secret", func(t *testing.T) {
		r := renderProject(t, stack, webWith("    secrets: [key]\n", "secrets:\n  key:\n    external: true\n    name: "+ctlSecret+"\n"))
		_, writes, err := tryDeploy(t, g, b.Stats, stack, r, false)
		wantRefused(t, err, "secrets.key", ctlSecret, "controller")
		assertNothingCreated(t, b, stack, writes)
	})
	t.Run("a revision record, external", func(t *testing.T) {
		r := renderProject(t, stack, webWith("    configs: [rec]\n", "configs:\n  rec:\n    external: true\n    name: flotilla-release."+stack+".1\n"))
		_, writes, err := tryDeploy(t, g, b.Stats, stack, r, false)
		wantRefused(t, err, "configs.rec", "flotilla-release.")
		assertNothingCreated(t, b, stack, writes)
	})
	t.Run("a revision record, forged by the stack", func(t *testing.T) {
		r := renderProject(t, stack, webWith("", `configs:
  fake:
    file: ./data.txt
    name: flotilla-release.`+stack+`.1
    labels:
      io.flotilla.record: release
      io.flotilla.release: `+stack+"\n"))
		_, writes, err := tryDeploy(t, g, b.Stats, stack, r, false)
		wantRefused(t, err, "configs.fake", "flotilla-release.")
		wantRefused(t, err, "configs.fake.labels", "io.flotilla.")
		assertNothingCreated(t, b, stack, writes)
	})
}

func TestGuard_theControllersOwnStackMayMountItsSecretsAndNoOtherMay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	self, other := swarmtest.Name(t, "gself"), swarmtest.Name(t, "gother")
	ctlSecret := self + "-tokens"
	sec, err := swarmtest.Client(t).SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{Annotations: swarm.Annotations{Name: ctlSecret}, Data: []byte("t")}})
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the stacks' cleanups so it runs after them: the
	// daemon refuses to remove a secret a service still mounts.
	t.Cleanup(func() {
		if _, err := swarmtest.Client(t).SecretRemove(context.Background(), sec.ID, client.SecretRemoveOptions{}); err != nil {
			t.Errorf("remove secret %s: %v", ctlSecret, err)
		}
	})
	swarmtest.Cleanup(t, self)
	swarmtest.Cleanup(t, other)
	running := b.WithSelf(Self{ServiceID: "not-a-service", Stack: self, Secrets: []string{ctlSecret}})
	g := running.WithForbiddenSecrets(running.self.Forbidden()).(*Backend).
		WithAllowedReferences(application.Allow{Secrets: []string{ctlSecret}})
	file := webWith("    secrets: [tokens]\n", "secrets:\n  tokens:\n    external: true\n    name: "+ctlSecret+"\n")

	if _, _, err := tryDeploy(t, g, b.Stats, self, renderProject(t, self, file), false); err != nil {
		t.Fatalf("the controller's own stack mounting its own secret: %v", err)
	}
	_, writes, err := tryDeploy(t, g, b.Stats, other, renderProject(t, other, file), false)
	wantRefused(t, err, "secrets.tokens", ctlSecret, "controller")
	assertNothingCreated(t, b, other, writes)
}

// handDeploy creates a service in stack's namespace the way `docker stack
// deploy` would, with labels of the caller's choosing.
func handDeploy(t *testing.T, stack string, labels map[string]string) string {
	t.Helper()
	l := map[string]string{LabelNamespace: stack}
	for k, v := range labels {
		l[k] = v
	}
	zero := uint64(0)
	r, err := swarmtest.Client(t).ServiceCreate(context.Background(), client.ServiceCreateOptions{Spec: swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: stack + "_web", Labels: l},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: swarmtest.Image}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &zero}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func TestGuard_handDeployedNamespaceNeedsAdopt(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gadopt")
	swarmtest.Cleanup(t, stack)
	id := handDeploy(t, stack, nil)
	r := renderProject(t, stack, webWith("", ""))

	_, writes, err := tryDeploy(t, b, b.Stats, stack, r, false)
	wantRefused(t, err, "stack", stack+"_web", "adopt: true")
	if writes != 0 {
		t.Errorf("refused deploy sent %d writes", writes)
	}
	if live := services(t, b, stack); len(live) != 1 || live["web"].Spec.Labels[LabelOwner] != "" {
		t.Fatalf("hand-deployed service changed: %+v", live["web"].Spec.Labels)
	}

	res, _, err := tryDeploy(t, b, b.Stats, stack, r, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Updated, []string{"web"}) {
		t.Fatalf("adopting deploy: %+v, want web updated", res)
	}
	s, err := swarmtest.Client(t).ServiceInspect(context.Background(), id, client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Service.Spec.Labels[LabelOwner]; got != "ctl/"+stack {
		t.Errorf("adopted service owner = %q", got)
	}
	// Adopted, it is this owner's: no adopt needed any more.
	if _, _, err := tryDeploy(t, b, b.Stats, stack, r, false); err != nil {
		t.Errorf("redeploy after adoption: %v", err)
	}
}

func TestGuard_anotherOwnersStackIsRefusedEvenWithAdopt(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "gowner")
	swarmtest.Cleanup(t, stack)
	handDeploy(t, stack, map[string]string{LabelOwner: "ctl/someone-else"})
	r := renderProject(t, stack, webWith("", ""))
	for _, adopt := range []bool{false, true} {
		_, writes, err := tryDeploy(t, b, b.Stats, stack, r, adopt)
		wantRefused(t, err, "stack", "ctl/someone-else", stack+"_web")
		if writes != 0 {
			t.Errorf("adopt=%v: refused deploy sent %d writes", adopt, writes)
		}
	}
}

// captureTransport records, for every request, its method, path, the
// service it writes (from the body), the X-Registry-Auth it carried and the
// status the daemon answered.
type captureTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []capturedRequest
}

type capturedRequest struct {
	method, path, service, auth string
	status                      int
}

func (c *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	cr := capturedRequest{method: req.Method, path: req.URL.Path, auth: req.Header.Get(registry.AuthHeader)}
	if req.Body != nil && req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/services/") {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var spec swarm.ServiceSpec
		if json.Unmarshal(body, &spec) == nil {
			cr.service = spec.Name
		}
	}
	resp, err := c.next.RoundTrip(req)
	if resp != nil {
		cr.status = resp.StatusCode
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, cr)
	c.mu.Unlock()
	return resp, err
}

func (c *captureTransport) since(n int) []capturedRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs[n:])
}

func (c *captureTransport) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs)
}

// capturingBackend is a backend whose every request passes through a
// captureTransport, below the backend's own counting.
func capturingBackend(t *testing.T) (*Backend, *captureTransport) {
	t.Helper()
	base := swarmtest.Client(t)
	tr, err := dialTransport(base.DaemonHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ct := &captureTransport{next: tr}
	// The shared client has negotiated already; pinning its version keeps
	// the negotiating ping out of the captured requests.
	b, err := New(context.Background(), Options{Host: base.DaemonHost(), Transport: ct, APIVersion: base.ClientVersion(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return b, ct
}

func hubCredential(t *testing.T, user string) *regauth.Credentials {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":pw-" + user))
	c, err := regauth.FromDockerConfig([]byte(`{"auths": {"https://index.docker.io/v1/": {"auth": "` + auth + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRegistryAuth_eachApplicationSendsOnlyItsOwnCredential(t *testing.T) {
	t.Parallel()
	b, capture := capturingBackend(t)
	apps := []struct {
		user  string
		stack string
		be    charts.Backend
	}{
		{user: "alice", stack: swarmtest.Name(t, "rega")},
		{user: "bob", stack: swarmtest.Name(t, "regb")},
	}
	for i := range apps {
		swarmtest.Cleanup(t, apps[i].stack)
		apps[i].be = b.WithRegistryAuth(hubCredential(t, apps[i].user))
	}
	owner := func(service string) string {
		for _, a := range apps {
			if strings.HasPrefix(service, a.stack+"_") {
				return a.user
			}
		}
		return ""
	}

	// Each round deploys both applications at once, so their writes
	// interleave on the shared client.
	round := func(message string) []capturedRequest {
		t.Helper()
		start := capture.len()
		var wg sync.WaitGroup
		errs := make([]error, len(apps))
		for i, a := range apps {
			r := render(t, a.stack, fixture{Replicas: 1, Message: message})
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = a.be.DeployStack(context.Background(), charts.DeployRequest{
					Stack: a.stack, Manifest: r.Manifest, Secrets: r.Secrets,
					Labels: map[string]string{LabelOwner: "ctl/" + a.user},
				})
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return capture.since(start)
	}
	// check counts the writes the daemon accepted. A write it refused as out
	// of sequence (a current engine bumps a new service's version after the
	// create) is retried from a fresh read; every attempt must still carry
	// the owner's credential and only it.
	check := func(name string, reqs []capturedRequest, wantWrites int) {
		t.Helper()
		writes := 0
		var written []string
		for _, r := range reqs {
			isWrite := r.service != "" && (strings.HasSuffix(r.path, "/services/create") || strings.HasSuffix(r.path, "/update"))
			if !isWrite {
				if r.auth != "" {
					t.Errorf("%s: %s %s carried a registry credential", name, r.method, r.path)
				}
				continue
			}
			if r.status < 300 {
				writes++
			}
			written = append(written, fmt.Sprintf("%s %s %s: %d", r.method, r.path, r.service, r.status))
			want := owner(r.service)
			ac, err := authconfig.Decode(r.auth)
			if err != nil || r.auth == "" {
				t.Errorf("%s: write of %s carried no readable credential (%v)", name, r.service, err)
				continue
			}
			if ac.Username != want || ac.Password != "pw-"+want {
				t.Errorf("%s: write of %s carried %s's credential, want %s's", name, r.service, ac.Username, want)
			}
		}
		if writes != wantWrites || (wantWrites == 0 && len(written) > 0) {
			t.Errorf("%s: %d service writes, want %d: %q", name, writes, wantWrites, written)
		}
	}

	check("first deploy", round("one"), 6)     // three services created per stack
	check("changed deploy", round("two"), 2)   // worker updated per stack
	check("unchanged deploy", round("two"), 0) // nothing written, nothing sent
}

// TestGuard_decisions runs the guard alone, on converted manifests, for the
// cases whose outcome the integration tests above do not pin down.
func TestGuard_decisions(t *testing.T) {
	t.Parallel()
	const stack = "gd"
	for _, tt := range []struct {
		name      string
		extra     string
		top       string
		allow     application.Allow
		wantField string // "" for allowed
		wantWords []string
	}{
		{name: "own network", extra: "    networks: [front]\n", top: "networks:\n  front: {}\n"},
		{name: "own network renamed out of the namespace, absent", extra: "    networks: [front]\n", top: "networks:\n  front:\n    name: other-front\n"},
		{name: "named volume of the stack", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data: {}\n"},
		{name: "volume renamed out of the namespace, absent here", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    name: shared-data\n",
			wantField: "volumes.data", wantWords: []string{"shared-data", "allow.volumes", "no release of this application"}},
		{name: "volume renamed out of the namespace, allowed", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    name: shared-data\n",
			allow: application.Allow{Volumes: []string{"shared-data"}}},
		{name: "volume under the stack's prefix, named", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    name: gd_db-data\n"},
		{name: "volume in another stack's namespace", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    name: shop_db-data\n",
			wantField: "volumes.data", wantWords: []string{"shop_db-data", `namespace of stack "shop"`, "allow.volumes"}},
		{name: "volume in another stack's namespace, allowed", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    name: shop_db-data\n",
			allow: application.Allow{Volumes: []string{"shop_db-data"}}},
		{name: "network in another stack's namespace", extra: "    networks: [front]\n", top: "networks:\n  front:\n    name: shop_default\n",
			wantField: "networks.front", wantWords: []string{"shop_default", `namespace of stack "shop"`, "allow.networks"}},
		{name: "secret in a hand-deployed stack's namespace", extra: "    secrets: [s]\n", top: "secrets:\n  s:\n    file: ./data.txt\n    name: Legacy-App_token\n",
			wantField: "secrets.s", wantWords: []string{"Legacy-App_token", `namespace of stack "Legacy-App"`}},
		{name: "lease config, allowed", extra: "    configs: [c]\n", top: "configs:\n  c:\n    file: ./data.txt\n    name: flotilla-lease.ctl\n",
			allow: application.Allow{Configs: []string{"flotilla-lease.ctl"}}, wantField: "configs.c", wantWords: []string{"flotilla-lease.ctl", "reserved"}},
		{name: "network under the reserved prefix, allowed", extra: "    networks: [n]\n", top: "networks:\n  n:\n    name: flotilla-net\n",
			allow: application.Allow{Networks: []string{"flotilla-net"}}, wantField: "networks.n", wantWords: []string{"flotilla-net", "reserved"}},
		{name: "external volume under the reserved prefix, allowed", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    external: true\n    name: flotilla-state\n",
			allow: application.Allow{Volumes: []string{"flotilla-state"}}, wantField: "volumes.data", wantWords: []string{"flotilla-state", "reserved"}},
		{name: "external volume", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    external: true\n    name: backups\n",
			wantField: "volumes.data", wantWords: []string{"backups"}},
		{name: "external volume allowed", extra: "    volumes: [\"data:/data\"]\n", top: "volumes:\n  data:\n    external: true\n    name: backups\n",
			allow: application.Allow{Volumes: []string{"backups"}}},
		{name: "tmpfs volume driver", extra: "    volumes: [\"scratch:/s\"]\n", top: "volumes:\n  scratch:\n    driver_opts: {type: tmpfs, device: tmpfs}\n"},
		{name: "nfs volume driver", extra: "    volumes: [\"share:/s\"]\n", top: "volumes:\n  share:\n    driver_opts: {type: nfs, o: \"addr=10.0.0.1\", device: \":/export\"}\n"},
		{name: "block device", extra: "    volumes: [\"disk:/d\"]\n", top: "volumes:\n  disk:\n    driver_opts: {type: ext4, device: /dev/sdb1}\n",
			wantField: "services.web.volumes[0]", wantWords: []string{"/dev/sdb1"}},
		{name: "disguised socket directory with / allowed", extra: "    volumes: [\"run:/r\"]\n", top: "volumes:\n  run:\n    driver_opts: {type: none, o: bind, device: /run}\n",
			allow:     application.Allow{HostPaths: []string{"/"}},
			wantField: "services.web.volumes[0]", wantWords: []string{"/run", "Docker socket"}},
		{name: "external config", extra: "    configs: [c]\n", top: "configs:\n  c:\n    external: true\n    name: shared-ca\n",
			wantField: "configs.c", wantWords: []string{"shared-ca", "allow.configs"}},
		{name: "external config allowed", extra: "    configs: [c]\n", top: "configs:\n  c:\n    external: true\n    name: shared-ca\n",
			allow: application.Allow{Configs: []string{"shared-ca"}}},
		{name: "config renamed out of the namespace, absent", extra: "    configs: [c]\n", top: "configs:\n  c:\n    file: ./data.txt\n    name: shared-ca\n"},
		{name: "reserved service label", extra: "    deploy:\n      labels:\n        io.flotilla.owner: ctl/other\n",
			wantField: "services.web.deploy.labels", wantWords: []string{"io.flotilla.owner"}},
		{name: "rollout state on the extra colour of a declared service",
			extra: "  web-canary:\n    image: x\n    deploy:\n      labels:\n        io.flotilla.rollout.phase: Progressing\n"},
		{name: "rollout state on another service",
			extra:     "  api:\n    image: x\n    deploy:\n      labels:\n        io.flotilla.rollout.phase: Progressing\n",
			wantField: "services.api.deploy.labels", wantWords: []string{"io.flotilla.rollout.phase"}},
		{name: "rollout state on the colour of an undeclared service",
			extra:     "  api-canary:\n    image: x\n    deploy:\n      labels:\n        io.flotilla.rollout.phase: Progressing\n",
			wantField: "services.api-canary.deploy.labels", wantWords: []string{"io.flotilla.rollout.phase"}},
		{name: "owner label on a colour",
			extra:     "  web-preview:\n    image: x\n    deploy:\n      labels:\n        io.flotilla.owner: ctl/other\n",
			wantField: "services.web-preview.deploy.labels", wantWords: []string{"io.flotilla.owner"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := renderProject(t, stack, webWith(tt.extra, tt.top))
			decl, err := compose.Convert(context.Background(), r.Manifest, stack, nil)
			if err != nil {
				t.Fatal(err)
			}
			b := (&Backend{}).WithAllowedReferences(tt.allow).(*Backend)
			err = b.guard(charts.DeployRequest{Stack: stack, Manifest: r.Manifest}, decl, nil, existingObjects{})
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRefused(t, err, tt.wantField, tt.wantWords...)
		})
	}
}

func TestHostPathAllowed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		allowed []string
		path    string
		want    bool
	}{
		{nil, "/srv/data", false},
		{[]string{"/srv/data"}, "/srv/data", true},
		{[]string{"/srv/data"}, "/srv/data/x/y", true},
		{[]string{"/srv/data"}, "/srv/database", false},
		{[]string{"/srv/data"}, "/srv", false},
		{[]string{"/srv/data/"}, "/srv/data/x", true},
		{[]string{"/srv/./data/../data"}, "/srv/data/x", true},
		{[]string{"/srv/data"}, "/srv/data/../database", false},
		{[]string{"/srv/data"}, "/srv/data/x/../../../etc", false},
		{[]string{"/"}, "/etc/passwd", true},
		{[]string{"/"}, "/", true},
		{[]string{"/srv"}, "/", false},
		// The Docker socket and every directory above it.
		{[]string{"/"}, "/var/run/docker.sock", false},
		{[]string{"/var"}, "/var/run/docker.sock", false},
		{[]string{"/var"}, "/var", true},
		{[]string{"/"}, "/var", false},
		{[]string{"/"}, "/run", false},
		{[]string{"/var/run"}, "/var/run/docker.sock", true},
		{[]string{"/var/run/docker.sock"}, "/var/run/docker.sock", true},
		{[]string{"/var/run/docker.sock"}, "/var/run//docker.sock", true},
		{[]string{"/var/run/docker.sock"}, "/run/docker.sock", false},
		{[]string{"/run"}, "/run/docker.sock", true},
		{[]string{"/run"}, "/run", true},
		{[]string{"/run"}, "/run/user/1000", true},
		{[]string{"/var/run/docker.sock"}, "/var/run", false},
		{[]string{"/var/run"}, "/var/run", true},
		{[]string{"/var/run/docker.sock"}, "/var/run/docker.sock/../docker.sock", true},
		{[]string{"/var/lib"}, "/var/run/docker.sock", false},
	} {
		if got := hostPathAllowed(tt.allowed, tt.path); got != tt.want {
			t.Errorf("hostPathAllowed(%q, %q) = %v, want %v", tt.allowed, tt.path, got, tt.want)
		}
	}
}
