package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/swarms"
	"github.com/moby/moby/client"
)

// sshToLocal runs an sshd of the test's own on a loopback port that lets
// the current user in with a key made for the test, and returns the ssh
// client configuration that reaches it and the port. Through it, `docker
// system dial-stdio` on "the remote host" reaches the local daemon.
func sshToLocal(t *testing.T) (config string, port int) {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" || os.Getenv("FLOTILLA_REQUIRE_SWARM") != "" {
			t.Fatalf("the ssh test needs sshd (openssh-server) and root: %v", err)
		}
		t.Skip("needs sshd (openssh-server) and root")
	}
	dir := t.TempDir()
	keygen := func(path string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen(filepath.Join(dir, "host"))
	keygen(filepath.Join(dir, "client"))
	pub, err := os.ReadFile(filepath.Join(dir, "client.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostPub, err := os.ReadFile(filepath.Join(dir, "host.pub"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auth := write("authorized_keys", string(pub))
	sshdConfig := write("sshd_config", fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
`, port, filepath.Join(dir, "host"), auth, filepath.Join(dir, "sshd.pid")))
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(sshd, "-D", "-e", "-f", sshdConfig)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd:\n%s", logs.String())
		}
	})
	known := write("known_hosts", fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub))
	config = write("ssh_config", fmt.Sprintf(`Host 127.0.0.1
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  StrictHostKeyChecking yes
  BatchMode yes
`, filepath.Join(dir, "client"), known))
	swarmtest.Eventually(t, 10*time.Second, func() (bool, string) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil, fmt.Sprintf("sshd not listening: %v", err)
	})
	return config, port
}

func TestASwarmReachedOverSSHThroughDockersConnectionHelperIsDeployedTo(t *testing.T) {
	t.Parallel()
	swarmtest.Need(t)
	config, port := sshToLocal(t)
	local, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	user := "root"
	if u := os.Getenv("USER"); u != "" {
		user = u
	}
	host := fmt.Sprintf("ssh://%s@127.0.0.1:%d", user, port)
	reg, err := swarms.New(context.Background(), []application.Swarm{{Name: "lab", Hosts: []string{host}}}, swarms.Options{
		Local: local, Logger: quiet, SSHFlags: []string{"-F", config},
		Backend: backend.Options{Logger: quiet},
	})
	if err != nil {
		t.Fatal(err)
	}
	// One check is bounded by swarms.CheckTimeout (5 s); on a loaded
	// machine an ssh handshake and the connection helper's start can take
	// longer (a stress run saw it), which the status reports as unreachable
	// until a later check: wait for that check.
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		st := reg.Check(context.Background())
		ok := len(st) == 2 && st[0].Name == "lab" && st[0].Reachable && st[0].Host == host && st[0].EngineVersion != ""
		return ok, fmt.Sprintf("swarm over ssh: %+v", st)
	})

	m := &multi{t: t, id: "e2e-" + swarmtest.Name(t, "ms"), reg: reg, repos: map[string]*gittest.Repo{}, cache: t.TempDir()}
	stack := swarmtest.Name(t, "ms")
	// The ssh session's docker speaks to the daemon at its default socket:
	// the suite's daemon on Debian's stage, Debian's beside the current
	// engine's stage. Clean up there, or the stack outlives the test.
	remote, err := client.New(client.WithHost(client.DefaultDockerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Close() })
	swarmtest.CleanupOn(t, remote, stack)
	m.add("s-"+stack, "lab", stack, time.Minute)
	ctl := m.controller()
	r := ctl.RunOnce(context.Background())[0]
	if r.Err != nil || r.Action != charts.Install {
		t.Fatalf("over ssh: %v %s", r.Err, r.Action)
	}
	m.converge(ctl)
	lab, _ := reg.Backend("lab")
	if n := lab.Stats().Writes; n == 0 {
		t.Error("nothing was written through the ssh host")
	}
	if n := local.Stats().Writes; n != 0 {
		t.Errorf("%d writes went through the local client, not the ssh host", n)
	}
}
