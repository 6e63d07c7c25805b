// Package swarmnodes gives a test package a real multi-node swarm on this
// one machine: extra Docker daemons made by scripts/swarm-nodes.sh, each in
// its own network and UTS namespace, joined into one swarm for the length of
// the package's run.
//
// A test package uses it as
//
//	func TestMain(m *testing.M) {
//		os.Exit(swarmnodes.Main(m, swarmnodes.Spec{Prefix: "mn", Nodes: 3, Workers: 2}))
//	}
//
// and each test that needs the cluster calls Need. Without root, the tools
// the script needs, or a cluster that came up, those tests are skipped, or
// failed when CI or FLOTILLA_REQUIRE_SWARM is set: a CI run that silently
// tested nothing would look green. The cluster's name carries a random
// suffix, so two runs of one package (two people, two branches) never share
// or tear down each other's daemons; a run that died before its cleanup
// leaves its cluster to the next run's gc, which removes clusters whose
// recorded owner process is gone.
package swarmnodes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// Spec is the shape of the cluster a package wants.
type Spec struct {
	// Prefix starts the cluster's name: 1-4 characters of [a-z0-9]; a
	// random suffix follows.
	Prefix string
	// Nodes is how many daemons, 1-9; the first is the manager that
	// creates the swarm.
	Nodes int
	// Workers is how many of them (the last ones) join as workers; the
	// rest are managers.
	Workers int
}

// Node is one daemon of the cluster.
type Node struct {
	// Name is the node's hostname, which is also its name in the swarm.
	Name string
	// Host is its DOCKER_HOST, a unix socket.
	Host string
	// Role is "manager" or "worker", as it joined.
	Role string
	// Addr is its address on the cluster's bridge.
	Addr string
	// Index numbers the nodes from 1 in the script's order.
	Index int
}

// Cluster is a running multi-node swarm.
type Cluster struct {
	Name  string
	Nodes []Node
	spec  Spec

	mu      sync.Mutex
	clients map[string]*client.Client
}

// requireEnv lists the variables that turn an unavailable cluster into a
// failure; the same ones as package swarmtest.
var requireEnv = []string{"CI", "FLOTILLA_REQUIRE_SWARM"}

var (
	current     *Cluster
	unavailable = errors.New("swarmnodes.Main did not run: call it from TestMain")
	script      string
)

// upTimeout bounds bringing the cluster up: daemons start in seconds, and
// image loads and joins in a few more, even on a loaded machine.
const upTimeout = 3 * time.Minute

// Main brings the cluster up, runs the package's tests, and takes it down.
// The package's tests run whether or not the cluster came up: those that do
// not need it must not be dropped with those that do. It returns the exit
// code for os.Exit.
func Main(m *testing.M, spec Spec) int {
	c, err := up(spec)
	if err != nil {
		unavailable = err
		verb := "SKIPPING"
		if k := required(); k != "" {
			verb = "FAILING (" + k + " is set)"
		}
		fmt.Fprintf(os.Stderr, "\n*** swarmnodes: %s every test of this package that needs the multi-node swarm: %v\n\n", verb, err)
		return m.Run()
	}
	current, unavailable = c, nil
	// Two engines run the suite; a failure must say which one it met.
	fmt.Fprintf(os.Stderr, "swarmnodes: cluster %s of %d nodes, engine %s\n", c.Name, len(c.Nodes), c.engine())
	code := m.Run()
	if err := c.down(); err != nil {
		fmt.Fprintf(os.Stderr, "swarmnodes: taking cluster %s down: %v\n", c.Name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Need returns the package's cluster, or skips t (fails it when CI or
// FLOTILLA_REQUIRE_SWARM is set) when there is none.
func Need(t testing.TB) *Cluster {
	t.Helper()
	if current != nil {
		return current
	}
	if k := required(); k != "" {
		t.Fatalf("needs the multi-node swarm and %s is set: %v", k, unavailable)
	}
	t.Skipf("needs the multi-node swarm: %v", unavailable)
	return nil
}

func required() string {
	for _, k := range requireEnv {
		if os.Getenv(k) != "" {
			return k
		}
	}
	return ""
}

var prefixRE = regexp.MustCompile(`^[a-z0-9]{1,4}$`)

func up(spec Spec) (*Cluster, error) {
	if !prefixRE.MatchString(spec.Prefix) {
		return nil, fmt.Errorf("spec prefix %q: want 1-4 characters of [a-z0-9]", spec.Prefix)
	}
	if spec.Nodes < 1 || spec.Nodes > 9 || spec.Workers < 0 || spec.Workers >= spec.Nodes {
		return nil, fmt.Errorf("spec: %d nodes with %d workers: want 1-9 nodes and fewer workers than nodes", spec.Nodes, spec.Workers)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("making Docker daemons in network namespaces needs root")
	}
	root, err := swarmtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	script = filepath.Join(root, "scripts", "swarm-nodes.sh")
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	// Clusters of this prefix whose runs died before their cleanup go first.
	if out, err := run(ctx, "gc", spec.Prefix); err != nil {
		return nil, fmt.Errorf("swarm-nodes.sh gc: %w\n%s", err, out)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("random cluster name: %w", err)
	}
	c := &Cluster{Name: spec.Prefix + hex.EncodeToString(b[:]), spec: spec, clients: map[string]*client.Client{}}
	out, err := run(ctx, "up", c.Name, strconv.Itoa(spec.Nodes), "--workers", strconv.Itoa(spec.Workers),
		"--owner", strconv.Itoa(os.Getpid()))
	if err != nil {
		_ = c.down()
		return nil, fmt.Errorf("swarm-nodes.sh up %s: %w\n%s", c.Name, err, out)
	}
	nodes, err := parseStatus(out)
	if err != nil {
		_ = c.down()
		return nil, err
	}
	c.Nodes = nodes
	return c, nil
}

func run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// statusLine is the script's "node NAME unix://SOCK ROLE ADDR PID|down".
type statusLine struct {
	Node
	pid int
}

func parseStatusLines(out []byte) ([]statusLine, error) {
	var lines []statusLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[0] != "node" {
			continue
		}
		i := strings.LastIndexByte(f[1], '-')
		idx, err := strconv.Atoi(f[1][i+1:])
		if i < 0 || err != nil {
			return nil, fmt.Errorf("swarm-nodes.sh status: node name %q has no index", f[1])
		}
		l := statusLine{Node: Node{Name: f[1], Host: f[2], Role: f[3], Addr: f[4], Index: idx}}
		if f[5] != "down" {
			if l.pid, err = strconv.Atoi(f[5]); err != nil {
				return nil, fmt.Errorf("swarm-nodes.sh status: pid %q of %s: %w", f[5], f[1], err)
			}
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("swarm-nodes.sh printed no node:\n%s", out)
	}
	return lines, nil
}

func parseStatus(out []byte) ([]Node, error) {
	lines, err := parseStatusLines(out)
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, len(lines))
	for i, l := range lines {
		nodes[i] = l.Node
	}
	return nodes, nil
}

func (c *Cluster) down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.mu.Lock()
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	c.clients = map[string]*client.Client{}
	c.mu.Unlock()
	if out, err := run(ctx, "down", c.Name); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return leftovers(ctx, c.Name)
}

// leftovers checks that down removed everything up made, so a script that
// leaks (a namespace, the bridge, its firewall rule, a directory) fails the
// package's run instead of piling up on the machine.
func leftovers(ctx context.Context, name string) error {
	var left []string
	for _, dir := range []string{"/run/flotilla-nodes/" + name, "/var/lib/flotilla-nodes/" + name} {
		if _, err := os.Stat(dir); err == nil {
			left = append(left, dir)
		}
	}
	if ns, _ := filepath.Glob("/var/run/netns/fln-" + name + "-*"); len(ns) > 0 {
		left = append(left, ns...)
	}
	bridge := "fb-" + name
	if exec.CommandContext(ctx, "ip", "link", "show", bridge).Run() == nil {
		left = append(left, "bridge "+bridge)
	}
	if exec.CommandContext(ctx, "iptables", "-C", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT").Run() == nil {
		left = append(left, "iptables rule for "+bridge)
	}
	if len(left) > 0 {
		return fmt.Errorf("swarm-nodes.sh down %s left %s", name, strings.Join(left, ", "))
	}
	return nil
}

// Manager is the node that created the swarm.
func (c *Cluster) Manager() Node { return c.Nodes[0] }

// Workers are the nodes that joined as workers.
func (c *Cluster) Workers() []Node {
	var out []Node
	for _, n := range c.Nodes {
		if n.Role == "worker" {
			out = append(out, n)
		}
	}
	return out
}

// Client returns a Docker client of node n, shared by the package's tests
// and closed when the cluster goes down.
func (c *Cluster) Client(t testing.TB, n Node) *client.Client {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[n.Host]; ok {
		return cl
	}
	cl, err := client.New(client.WithHost(n.Host))
	if err != nil {
		t.Fatalf("docker client of node %s: %v", n.Name, err)
	}
	c.clients[n.Host] = cl
	return cl
}

// engine names the manager's daemon version and API, for the log.
func (c *Cluster) engine() string {
	cl, err := client.New(client.WithHost(c.Manager().Host))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := cl.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v.Version + ", API " + v.APIVersion
}

// Pid is the process id of node n's dockerd, or 0 when it is not running.
func (c *Cluster) Pid(ctx context.Context, n Node) (int, error) {
	out, err := run(ctx, "status", c.Name)
	if err != nil {
		return 0, fmt.Errorf("swarm-nodes.sh status %s: %w\n%s", c.Name, err, out)
	}
	lines, err := parseStatusLines(out)
	if err != nil {
		return 0, err
	}
	for _, l := range lines {
		if l.Name == n.Name {
			return l.pid, nil
		}
	}
	return 0, fmt.Errorf("cluster %s has no node %s", c.Name, n.Name)
}

// Kill stops node n's dockerd with SIGKILL, as a machine that loses power
// would, and waits until the process is gone. Its containers stay as they
// were; Swarm learns of the loss only when the node misses its heartbeats.
func (c *Cluster) Kill(t testing.TB, n Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid, err := c.Pid(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if pid == 0 {
		t.Fatalf("node %s: no dockerd to kill", n.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill dockerd %d of node %s: %v", pid, n.Name, err)
	}
	for ctx.Err() == nil {
		if p, err := c.Pid(ctx, n); err == nil && p == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("dockerd %d of node %s still runs 30s after SIGKILL", pid, n.Name)
}

// Restore brings every node that is not running back (a killed daemon
// restarts with its swarm state and rejoins) and waits until the swarm sees
// every node Ready again.
func (c *Cluster) Restore(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	out, err := run(ctx, "up", c.Name, strconv.Itoa(c.spec.Nodes), "--workers", strconv.Itoa(c.spec.Workers))
	if err != nil {
		t.Fatalf("swarm-nodes.sh up %s: %v\n%s", c.Name, err, out)
	}
}
