package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// nodeCluster is a swarm of extra Docker daemons, each in its own network
// namespace, made by scripts/swarm-nodes.sh for one test and torn down after
// it. Its name is random, so tests running side by side (and other suites
// making clusters of their own) never share one.
type nodeCluster struct {
	t     *testing.T
	name  string
	size  int
	hosts []string // unix:// sockets, node 1 first
}

// nodesScript is the project's script that makes the clusters.
var nodesScript = filepath.Join("..", "scripts", "swarm-nodes.sh")

// upCluster makes a swarm of n managers. Without the script, or not as
// root, the test is skipped unless the environment requires a swarm.
func upCluster(t *testing.T, n int) *nodeCluster {
	t.Helper()
	swarmtest.Need(t)
	if _, err := os.Stat(nodesScript); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" || os.Getenv("FLOTILLA_REQUIRE_SWARM") != "" {
			t.Fatalf("multi-node swarms need %s and root: %v", nodesScript, err)
		}
		t.Skipf("multi-node swarms need %s and root", nodesScript)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	c := &nodeCluster{t: t, name: "ms" + hex.EncodeToString(b[:]), size: n}
	t.Cleanup(func() { c.script("down", c.name) })
	c.script("up", c.name, strconv.Itoa(n), "--owner", strconv.Itoa(os.Getpid()))
	for _, line := range strings.Split(strings.TrimSpace(c.script("status", c.name)), "\n") {
		// node NAME-I unix:///…/docker.sock ROLE ADDR PID|down
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "node" {
			c.hosts = append(c.hosts, f[2])
		}
	}
	if len(c.hosts) != n {
		t.Fatalf("cluster %s: %d nodes reported, want %d", c.name, len(c.hosts), n)
	}
	return c
}

func (c *nodeCluster) script(args ...string) string {
	c.t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command("bash", append([]string{nodesScript}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("swarm-nodes.sh %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// kill stops node i's daemon (1-based) as a crash does, and waits until it
// has gone.
func (c *nodeCluster) kill(i int) {
	c.t.Helper()
	pidFile := filepath.Join("/run/flotilla-nodes", c.name, strconv.Itoa(i), "dockerd.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		c.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	swarmtest.Eventually(c.t, 30*time.Second, func() (bool, string) {
		return syscall.Kill(pid, 0) != nil, "dockerd " + strconv.Itoa(pid) + " still running"
	})
}

// start brings back every daemon that is not running, with its swarm state.
func (c *nodeCluster) start() {
	c.t.Helper()
	c.script("up", c.name, strconv.Itoa(c.size), "--owner", strconv.Itoa(os.Getpid()))
}
