// Package compattest deploys every file of the compatibility corpus
// (compose/testdata/compat) twice on the real swarm, once with `docker stack
// deploy` and once with Flotilla, and compares what the swarm then holds.
// docs/compatibility.md lists the differences that remain and why.
package compattest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }

const corpusDir = "../testdata/compat"

// externals are the objects corpus files reach with external: true, made
// once per run under random names.
type externals struct {
	network, config, secret string
}

func createExternals(t *testing.T) externals {
	t.Helper()
	ctx := context.Background()
	api := swarmtest.Client(t)
	base := swarmtest.Name(t, "cext")
	e := externals{network: base + "-net", config: base + "-conf", secret: base + "-secret"}
	n, err := api.NetworkCreate(ctx, e.network, client.NetworkCreateOptions{Driver: "overlay", Attachable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNetwork(t, api, n.ID) })
	c, err := api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: e.config}, Data: []byte("shared\n")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = api.ConfigRemove(context.Background(), c.ID, client.ConfigRemoveOptions{}) })
	s, err := api.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{Annotations: swarm.Annotations{Name: e.secret}, Data: []byte("shared\n")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = api.SecretRemove(context.Background(), s.ID, client.SecretRemoveOptions{}) })
	return e
}

// removeNetwork retries while the tasks of removed services still hold it.
func removeNetwork(t *testing.T, api *client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := api.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err == nil || strings.Contains(err.Error(), "not found") {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("external network %s still present", id)
}

// removeJobContainers removes the exited containers of the stacks' job
// tasks, which outlive their services on this engine.
func removeJobContainers(t *testing.T, stacks ...string) {
	api := swarmtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stack := range stacks {
		list, err := api.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "com.docker.stack.namespace="+stack).Add("status", "exited")})
		if err != nil {
			t.Logf("list containers of %s: %v", stack, err)
			continue
		}
		for _, c := range list.Items {
			_, _ = api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{})
		}
	}
}

// vars are what a corpus file interpolates; SELF differs per deploy, so the
// objects a file names itself do not meet.
func (e externals) vars(self string) map[string]string {
	return map[string]string{"EXT_NET": e.network, "EXT_CONFIG": e.config, "EXT_SECRET": e.secret, "SELF": self}
}

// project is one corpus file copied into a checkout of its own, with the
// env file Flotilla reads its variables from.
func project(t *testing.T, dir string, vars map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(corpusDir, dir))); err != nil {
		t.Fatal(err)
	}
	var env bytes.Buffer
	keys := mapKeys(vars)
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&env, "%s=%s\n", k, vars[k])
	}
	if err := os.WriteFile(filepath.Join(root, "compat.env"), env.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

// stackDeploy runs the docker CLI on the project, as an operator would.
func stackDeploy(t *testing.T, ctx context.Context, root, stack string, vars map[string]string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "docker", "stack", "deploy", "--resolve-image", "never", "--detach=true", "-c", "docker-compose.yml", stack)
	cmd.Dir = root
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker stack deploy: %v\n%s", err, out)
	}
}

// flotilla is one Flotilla deploy of a project: the backend it used and
// what it deployed.
type flotilla struct {
	b        *backend.Backend
	deployer charts.Backend
	stack    string
	rendered *compose.Rendered
}

func flotillaDeploy(t *testing.T, ctx context.Context, root, stack string, e externals) *flotilla {
	t.Helper()
	r, err := compose.Render(stack, compose.Dir{Root: root, EnvFiles: []string{"compat.env"}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	b, err := backend.New(ctx, backend.Options{Host: swarmtest.Client(t).DaemonHost()})
	if err != nil {
		t.Fatal(err)
	}
	f := &flotilla{
		b:     b,
		stack: stack,
		// What the corpus reaches outside itself, as an application
		// would allow it.
		deployer: b.WithAllowedReferences(application.Allow{
			Networks:  []string{e.network, "host", "bridge"},
			Configs:   []string{e.config},
			Secrets:   []string{e.secret},
			HostPaths: []string{"/etc/hostname"},
			// v3.5-self-named and v3.4-anchors name volumes outside the
			// stack's namespace, which a node creates on first use.
			Volumes: []string{stack + "-self-vol", stack + "-self-shared-data"},
			// v3.9-limits adds a capability and sets a sysctl, v3.8-jobs
			// templates a config.
			Capabilities:    []string{"NET_ADMIN"},
			Sysctls:         []string{"net.core.somaxconn"},
			TemplateDrivers: []string{"golang"},
		}),
		rendered: r,
	}
	if w := f.deploy(t, ctx); w == 0 {
		t.Fatal("first deploy wrote nothing")
	}
	return f
}

// deploy is one apply of the rendered manifest; it returns the writes sent.
func (f *flotilla) deploy(t *testing.T, ctx context.Context) int {
	t.Helper()
	before := f.b.Stats()
	_, err := f.deployer.DeployStack(ctx, charts.DeployRequest{
		Stack: f.stack, Manifest: f.rendered.Manifest, Secrets: f.rendered.Secrets,
		Labels: map[string]string{"io.flotilla.owner": "compat/" + f.stack},
	})
	if err != nil {
		t.Fatalf("flotilla deploy: %v", err)
	}
	return f.b.Stats().Sub(before).Writes
}

// drift is every field live drift reports, as "service: field".
func (f *flotilla) drift(t *testing.T, ctx context.Context) []string {
	t.Helper()
	desired, err := f.b.DesiredServices(ctx, f.rendered.Manifest, f.stack)
	if err != nil {
		t.Fatal(err)
	}
	live, err := f.b.LiveServices(ctx, f.stack)
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.b.LiveNetworkNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, spec := range desired.Services {
		svc, ok := live[name]
		if !ok {
			out = append(out, name+": missing")
			continue
		}
		for _, c := range drift.Diff(spec, svc.Spec, drift.Options{NetworkNames: names}) {
			out = append(out, fmt.Sprintf("%s: %s (desired %q, live %q)", name, c.Field, c.Desired, c.Live))
		}
	}
	slices.Sort(out)
	return out
}

// Every corpus file deploys with Flotilla to what `docker stack deploy`
// makes of it, field for field once the names each deployer chooses are
// normalised (docs/compatibility.md lists what is normalised and why), and
// two further Flotilla passes write nothing and see no drift.
func TestCorpusDeploysLikeDockerStackDeploy(t *testing.T) {
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	e := createExternals(t)
	var dirs []string
	for _, d := range entries {
		if d.IsDir() {
			dirs = append(dirs, d.Name())
		}
	}
	if len(dirs) < 11 {
		t.Fatalf("corpus holds %d files, want one per version 3.0..3.9 and a version-less one", len(dirs))
	}
	t.Run("group", func(t *testing.T) {
		for _, dir := range dirs {
			t.Run(dir, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				docker := swarmtest.Name(t, "cd"+dir)
				flot := swarmtest.Name(t, "cf"+dir)
				// Registered first so it runs last, once the services are gone.
				t.Cleanup(func() { removeJobContainers(t, docker, flot) })
				swarmtest.Cleanup(t, docker)
				swarmtest.Cleanup(t, flot)

				dv, fv := e.vars(docker+"-self"), e.vars(flot+"-self")
				stackDeploy(t, ctx, project(t, dir, dv), docker, dv)
				f := flotillaDeploy(t, ctx, project(t, dir, fv), flot, e)

				want := snapshot(t, ctx, docker, docker+"-self")
				got := snapshot(t, ctx, flot, flot+"-self")
				if len(want) == 0 {
					t.Fatal("docker stack deploy left nothing to compare with")
				}
				for _, d := range compare("", want, got) {
					t.Errorf("differs from docker stack deploy: %s", d)
				}

				for pass := 1; pass <= 2; pass++ {
					if w := f.deploy(t, ctx); w != 0 {
						t.Errorf("pass %d: %d writes, want none", pass, w)
					}
					for _, d := range f.drift(t, ctx) {
						t.Errorf("pass %d: drift %s", pass, d)
					}
				}
			})
		}
	})
}

// snapshot is what the swarm holds of a stack in comparable form: every
// object by its normalised name, with ids, timestamps, versions and
// Flotilla's own labels dropped, and every name the deployer chose
// (stack prefix, SELF prefix, content hash) replaced by a placeholder.
func snapshot(t *testing.T, ctx context.Context, stack, self string) map[string]any {
	t.Helper()
	api := swarmtest.Client(t)
	ns := make(client.Filters).Add("label", "com.docker.stack.namespace="+stack)
	out := map[string]any{}

	allNets, err := api.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	netName := map[string]string{}
	for _, n := range allNets.Items {
		netName[n.ID] = n.Name
	}

	services, err := api.ServiceList(ctx, client.ServiceListOptions{Filters: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range services.Items {
		spec := s.Spec
		for i, a := range spec.TaskTemplate.Networks {
			if n, ok := netName[a.Target]; ok {
				spec.TaskTemplate.Networks[i].Target = n
			}
		}
		out["service "+spec.Name] = spec
	}
	nets, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets.Items {
		out["network "+n.Name] = map[string]any{
			"Driver": n.Driver, "Scope": n.Scope, "Internal": n.Internal, "Attachable": n.Attachable,
			"Ingress": n.Ingress, "EnableIPv6": n.EnableIPv6, "Options": n.Options, "Labels": n.Labels,
			"IPAMDriver": n.IPAM.Driver, "IPAMOptions": n.IPAM.Options,
		}
	}
	configs, err := api.ConfigList(ctx, client.ConfigListOptions{Filters: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs.Items {
		out["config "+c.Spec.Name] = c.Spec
	}
	secrets, err := api.SecretList(ctx, client.SecretListOptions{Filters: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out["secret "+s.Spec.Name] = s.Spec
	}
	return normalise(t, out, stack, self)
}

// hashSuffixRE is the content hash Flotilla appends to the names of the
// configs and secrets it creates.
var hashSuffixRE = regexp.MustCompile(`(STACK_[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*?)-[0-9a-f]{10}\b`)

// normalise turns v into plain JSON values with the deployer's own names
// replaced, ids blanked and Flotilla's labels gone.
func normalise(t *testing.T, v any, stack, self string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(raw), self, "SELF")
	s = strings.ReplaceAll(s, stack+"_", "STACK_")
	s = strings.ReplaceAll(s, `"`+stack+`"`, `"STACK"`)
	s = hashSuffixRE.ReplaceAllString(s, "$1")
	var out map[string]any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	scrub(out)
	return out
}

// scrub removes what differs between any two deploys of one file: ids and
// VXLAN ids the swarm assigns, and labels in Flotilla's own namespace. It
// sorts the references a service holds, which convert orders by the
// object's swarm name — a name each deployer chose differently.
func scrub(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch {
			case strings.HasPrefix(k, "io.flotilla."), k == "ConfigID", k == "SecretID",
				k == "com.docker.network.driver.overlay.vxlanid_list":
				delete(v, k)
			default:
				scrub(e)
				if l, ok := e.([]any); ok && (k == "Configs" || k == "Secrets" || k == "Networks") {
					slices.SortFunc(l, func(a, b any) int { return strings.Compare(show(a), show(b)) })
				}
			}
		}
	case []any:
		for _, e := range v {
			scrub(e)
		}
	}
}

// compare lists every path at which want and got differ, as
// "path: docker X, flotilla Y".
func compare(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []string
		keys := mapKeys(w)
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			out = append(out, compare(join(path, k), w[k], g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			out = append(out, compare(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if fmt.Sprint(want) == fmt.Sprint(got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: docker %s, flotilla %s", path, show(want), show(got))}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func show(v any) string {
	if v == nil {
		return "absent"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
