// Package swarmtest is the shared harness of every integration test package
// that needs the real swarm: one check and image build in TestMain, a random
// stack name per test, cleanup that leaves nothing behind, and polling with a
// deadline instead of sleeps.
//
// A test package uses it as
//
//	func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }
//
// Without a reachable swarm manager the tests that need it (those that call
// Need, Client, Name or Cleanup) are skipped, unless CI or
// FLOTILLA_REQUIRE_SWARM is set, in which case they fail: a CI run that
// silently tested nothing would look green. The package's pure unit tests run
// either way.
package swarmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/labels"
)

// Images built locally by scripts/build-test-image.sh. They hold the same
// program and differ in image id, so a change from one to the other is a real
// image change that still runs.
const (
	Image  = "flotilla-test/app:1"
	Image2 = "flotilla-test/app:2"
)

// Label keys the cleanup selects by. They are spelled out here rather than
// imported from package backend so backend's own tests can use this package.
const (
	namespaceLabel = labels.Namespace
	releaseLabel   = labels.Release
	recordLabel    = labels.Record
	notKeptLabel   = labels.NotKept
)

// requireEnv lists the variables that turn a missing swarm into a failure.
var requireEnv = []string{"CI", "FLOTILLA_REQUIRE_SWARM"}

var (
	mainRan   bool
	checkOnce sync.Once
	checkErr  error

	shared    *client.Client
	sharedErr error
	once      sync.Once
)

func sharedClient() (*client.Client, error) {
	once.Do(func() {
		shared, sharedErr = client.New(client.FromEnv)
	})
	return shared, sharedErr
}

// unavailable is why the swarm cannot serve this package's tests, set once by
// Main before any test runs; nil when it can.
var unavailable error

// Main checks the swarm, builds the test images when there is one, and runs
// the package's tests either way: the pure unit tests of a package do not
// need a swarm and must not be silently dropped with the ones that do. A test
// that needs the swarm says so through Need (Client, Name and Cleanup call it),
// and only that test is skipped — or failed, when CI or FLOTILLA_REQUIRE_SWARM
// is set. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	mainRan = true
	if err := ready(); err != nil {
		unavailable = err
		verb := "SKIPPING"
		if required() != "" {
			verb = "FAILING (" + required() + " is set)"
		}
		fmt.Fprintf(os.Stderr, "\n*** swarmtest: %s every test of this package that needs the swarm: no usable swarm: %v\n"+
			"*** pure unit tests still run; run scripts/swarm-up.sh to start one\n\n", verb, err)
	} else if err := buildImages(); err != nil {
		unavailable = fmt.Errorf("building test images: %w", err)
		fmt.Fprintf(os.Stderr, "\n*** swarmtest: %v\n\n", unavailable)
	} else {
		// Two engines run the suite; a failure must say which one it met.
		fmt.Fprintf(os.Stderr, "swarmtest: engine %s\n", engine)
	}
	return m.Run()
}

// required names the set variable that turns a missing swarm into a
// failure, or "".
func required() string {
	for _, k := range requireEnv {
		if os.Getenv(k) != "" {
			return k
		}
	}
	return ""
}

// Need marks t as needing the real swarm: without one it is skipped, or
// failed when CI or FLOTILLA_REQUIRE_SWARM is set, so a CI run that tested
// nothing cannot look green. Outside a package whose TestMain is Main it
// checks the swarm itself.
func Need(t testing.TB) {
	t.Helper()
	err := unavailable
	if !mainRan {
		checkOnce.Do(func() { checkErr = ready() })
		err = checkErr
	}
	if err == nil {
		return
	}
	if k := required(); k != "" {
		t.Fatalf("needs the swarm and %s is set: %v", k, err)
	}
	t.Skipf("needs the swarm: %v", err)
}

// ready reports why the daemon cannot run the tests, or nil.
func ready() error {
	c, err := sharedClient()
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("docker daemon at %s does not answer: %w", c.DaemonHost(), err)
	}
	if info.Info.Swarm.LocalNodeState != swarm.LocalNodeStateActive || !info.Info.Swarm.ControlAvailable {
		return fmt.Errorf("node is not a swarm manager (state %q, manager %v)",
			info.Info.Swarm.LocalNodeState, info.Info.Swarm.ControlAvailable)
	}
	engine = fmt.Sprintf("%s, API %s spoken, at %s", info.Info.ServerVersion, c.ClientVersion(), c.DaemonHost())
	return nil
}

// engine describes the daemon the tests run on, once ready has met it.
var engine string

// Socket is the path of the unix socket of the daemon the tests use:
// DOCKER_HOST's when it names one, else the default. Tests that put a
// proxy in front of the daemon dial it, so they follow the engine under test.
func Socket() string {
	if p, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok && p != "" {
		return p
	}
	return "/var/run/docker.sock"
}

func buildImages() error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "build-test-image.sh"))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// RepoRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod, where the project's scripts are.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Client returns the shared Docker client.
func Client(t testing.TB) *client.Client {
	t.Helper()
	Need(t)
	c, err := sharedClient()
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	return c
}

// Name returns a random name that is safe as a stack name, a DNS label and a
// swarm object name prefix: lowercase, starting with a letter, at most 20
// characters. prefix is shortened to fit.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	Need(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random name: %v", err)
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		default:
			return -1
		}
	}, prefix)
	if len(clean) > 11 {
		clean = clean[:11]
	}
	return "t" + clean + hex.EncodeToString(b[:])
}

// Cleanup registers removal of everything stack left on the swarm: its
// services, networks, configs and secrets (by namespace label) and its
// release records. Errors are reported, not fatal, so one leftover does not
// hide a test's own failure.
func Cleanup(t testing.TB, stack string) {
	t.Helper()
	CleanupOn(t, Client(t), stack)
}

// CleanupOn is Cleanup on the daemon c speaks to, for a test that deploys
// to one the suite's client does not (a swarm reached over ssh).
func CleanupOn(t testing.TB, c *client.Client, stack string) {
	t.Helper()
	t.Cleanup(func() {
		// Generous: on a loaded machine a removed service's tasks take
		// long to go, and the networks wait for them (one stress run took
		// over a minute); a cleanup that gives up fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := RemoveAll(ctx, c, stack); err != nil {
			t.Errorf("cleanup of stack %s: %v", stack, err)
		}
	})
}

// RemoveAll deletes every object of stack, release records and the
// not-kept memory included, and waits for its tasks to go so its networks
// can be removed.
func RemoveAll(ctx context.Context, c *client.Client, stack string) error {
	ns := make(client.Filters).Add("label", namespaceLabel+"="+stack)
	var errs []error

	services, err := c.ServiceList(ctx, client.ServiceListOptions{Filters: ns})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, s := range services.Items {
		if _, err := c.ServiceRemove(ctx, s.ID, client.ServiceRemoveOptions{}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("remove service %s: %w", s.Spec.Name, err))
		}
	}
	if len(services.Items) > 0 {
		errs = append(errs, waitNoTasks(ctx, c, services.Items))
	}

	networks, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: ns})
	if err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	}
	for _, n := range networks.Items {
		if err := removeNetwork(ctx, c, n.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}

	secrets, err := c.SecretList(ctx, client.SecretListOptions{Filters: ns})
	if err != nil {
		errs = append(errs, fmt.Errorf("list secrets: %w", err))
	}
	for _, s := range secrets.Items {
		if _, err := c.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("remove secret %s: %w", s.Spec.Name, err))
		}
	}

	records := make(client.Filters).Add("label", recordLabel).Add("label", releaseLabel+"="+stack)
	notKept := make(client.Filters).Add("label", notKeptLabel+"="+stack)
	for _, f := range []client.Filters{ns, records, notKept} {
		configs, err := c.ConfigList(ctx, client.ConfigListOptions{Filters: f})
		if err != nil {
			errs = append(errs, fmt.Errorf("list configs: %w", err))
			continue
		}
		for _, cfg := range configs.Items {
			if _, err := c.ConfigRemove(ctx, cfg.ID, client.ConfigRemoveOptions{}); err != nil && !notFound(err) {
				errs = append(errs, fmt.Errorf("remove config %s: %w", cfg.Spec.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// waitNoTasks waits until the removed services' tasks are gone: a network
// cannot be removed while a container is still attached to it. The daemon
// refuses a filter naming a removed service, so every task is listed.
func waitNoTasks(ctx context.Context, c *client.Client, services []swarm.Service) error {
	removed := make(map[string]string, len(services))
	for _, s := range services {
		removed[s.ID] = s.Spec.Name
	}
	// Generous: on two cores under a whole suite, a task can take far
	// longer to stop than it does alone (one CI run, with other builds
	// beside it, passed 90s with three job services' tasks still there).
	const within = 4 * time.Minute
	deadline := time.Now().Add(within)
	for {
		tasks, err := c.TaskList(ctx, client.TaskListOptions{})
		// A task in a terminal state holds no container and no network
		// attachment; Swarm keeps finished job tasks around after their
		// service is gone, so waiting for those would never end.
		var left []string
		for _, t := range tasks.Items {
			if name, ok := removed[t.ServiceID]; ok && !terminal(t.Status.State) {
				left = append(left, fmt.Sprintf("%s.%d %s (desired %s)", name, t.Slot, t.Status.State, t.DesiredState))
			}
		}
		if err == nil && len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("tasks of %d removed services: list after %s: %w", len(services), within, err)
			}
			return fmt.Errorf("tasks of %d removed services still present after %s: %s", len(services), within, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func terminal(s swarm.TaskState) bool {
	switch s {
	case swarm.TaskStateComplete, swarm.TaskStateFailed, swarm.TaskStateShutdown,
		swarm.TaskStateRejected, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
		return true
	}
	return false
}

// removeNetwork retries briefly: the daemon may still be detaching the last
// container when the task list is already empty.
func removeNetwork(ctx context.Context, c *client.Client, id string) error {
	var err error
	for range 40 {
		_, err = c.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		// A network the node still lists after Swarm forgot it (a job's
		// container outlived its service) answers a 500 "not found": it
		// is gone from the swarm, and nothing can remove the node's copy.
		if err == nil || notFound(err) || strings.Contains(err.Error(), "not found") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return err
}

func notFound(err error) bool { return cerrdefs.IsNotFound(err) }

// Eventually polls cond every 150ms until it reports true or timeout passes,
// then fails the test with the last message cond gave.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", timeout, msg)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// Settled reports whether every service of a stack read is at rest: all
// desired tasks running, no rolling update in progress, and no task still on
// its way in or out. A service's version can still move by itself until
// then, because Swarm records update progress on the service.
func Settled(states []charts.ServiceState) (bool, string) {
	if len(states) == 0 {
		return false, "no services"
	}
	for _, s := range states {
		if s.Running != s.Desired {
			msg := ""
			if len(s.Tasks) > 0 {
				msg = ": " + s.Tasks[0].State + " " + s.Tasks[0].Err
			}
			return false, fmt.Sprintf("%s %d/%d running%s", s.Name, s.Running, s.Desired, msg)
		}
		if s.UpdateState != "" && s.UpdateState != "completed" {
			return false, s.Name + " update " + s.UpdateState
		}
		var current uint64
		for _, t := range s.Tasks {
			if t.DesiredState == "running" {
				if t.State != "running" {
					return false, s.Name + " task " + t.State
				}
				current++
			}
		}
		if current != s.Desired {
			return false, fmt.Sprintf("%s has %d current tasks, wants %d", s.Name, current, s.Desired)
		}
	}
	return true, ""
}
