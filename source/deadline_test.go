package source

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/application"
)

// hungServer accepts connections on 127.0.0.1, reads whatever is sent and
// never answers: the remote that keeps a fetch waiting for ever unless the
// fetch has a deadline.
type hungServer struct {
	ln       net.Listener
	accepted chan struct{} // receives once per connection that sent bytes
	mu       sync.Mutex
	conns    []net.Conn
}

func newHungServer(t *testing.T) *hungServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hungServer{ln: ln, accepted: make(chan struct{}, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				buf := make([]byte, 4096)
				signalled := false
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if !signalled {
						signalled = true
						s.accepted <- struct{}{}
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// url is an http URL of the server carrying credentials, which no error
// may repeat.
func (s *hungServer) url() string {
	return "http://flotilla:hunter2-token@" + s.ln.Addr().String() + "/team/app.git"
}

func (s *hungServer) waitRequest(t *testing.T) {
	t.Helper()
	select {
	case <-s.accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung server saw no request")
	}
}

type fetchResult struct {
	rev  *Revision
	err  error
	took time.Duration
}

func fetchAsync(f *Fetcher, req Request) <-chan fetchResult {
	ch := make(chan fetchResult, 1)
	start := time.Now()
	go func() {
		rev, err := f.Fetch(context.Background(), req)
		ch <- fetchResult{rev, err, time.Since(start)}
	}()
	return ch
}

// await fails the test if r does not arrive within limit: without a
// deadline the fetch would never return.
func await(t *testing.T, what string, ch <-chan fetchResult, limit time.Duration) fetchResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s still running after %s", what, limit)
		return fetchResult{}
	}
}

func checkHungError(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("%s = %v, want ErrUnreachable", what, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "/team/app.git") {
		t.Errorf("%s does not name the repository: %s", what, msg)
	}
	if strings.Contains(msg, "hunter2") || strings.Contains(msg, "flotilla:") {
		t.Errorf("%s leaks the credentials: %s", what, msg)
	}
}

func TestAHungRemoteFailsWithinItsDeadlineAndLeavesOtherRepositoriesAlone(t *testing.T) {
	const deadline = 3 * time.Second
	hung := newHungServer(t)
	other := newTestRepo(t)
	want := other.write(map[string]string{"f": "1"}).commit("one")
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: deadline})

	first := fetchAsync(f, Request{RepoURL: hung.url()})
	hung.waitRequest(t)
	// The same repository for a second application: it waits for the lock,
	// which the first fetch gives up with its deadline.
	second := fetchAsync(f, Request{RepoURL: hung.url(), Revision: "main"})

	// Another repository is not held up by the hung one.
	r, err := f.Fetch(context.Background(), Request{RepoURL: other.dir})
	if err != nil || r.Commit != want {
		t.Fatalf("another repository while one hangs = %v, %v", r, err)
	}
	r.Release()
	select {
	case res := <-first:
		t.Logf("the hung fetch ended before the other repository's (%s): %v", res.took, res.err)
	default:
	}

	res := await(t, "the hung fetch", first, deadline+10*time.Second)
	checkHungError(t, "the hung fetch", res.err)
	if !strings.Contains(res.err.Error(), "no answer within "+deadline.String()) {
		t.Errorf("the error does not say the deadline passed: %v", res.err)
	}
	t.Logf("the hung fetch failed after %s (deadline %s)", res.took.Round(time.Millisecond), deadline)

	// The second one gets the failure (its backoff) as soon as the lock
	// is free, not after a deadline of its own.
	res2 := await(t, "the same repository's second fetch", second, 5*time.Second)
	checkHungError(t, "the second fetch", res2.err)
	if !strings.Contains(res2.err.Error(), "backing off") {
		t.Errorf("the second fetch contacted the hung remote again: %v", res2.err)
	}
}

func TestAFetchOfObjectsFromAHungRemoteFailsWithinTheFetchDeadline(t *testing.T) {
	hung := newHungServer(t)
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: time.Hour, FetchTimeout: time.Second})
	// A full SHA that is not cached skips the listing and fetches at once,
	// so only FetchTimeout can end this.
	sha := strings.Repeat("ab", 20)
	res := await(t, "the fetch", fetchAsync(f, Request{RepoURL: hung.url(), Revision: sha}), 15*time.Second)
	checkHungError(t, "the fetch", res.err)
	if !strings.Contains(res.err.Error(), "no answer within 1s") {
		t.Errorf("the error does not say the fetch deadline passed: %v", res.err)
	}
}

// A local repository is served by a git-upload-pack child process; one that
// hangs must be killed by the deadline, not left behind.
func TestAHungLocalUploadPackIsKilledAtTheDeadline(t *testing.T) {
	src := newTestRepo(t)
	src.write(map[string]string{"f": "1"}).commit("one")
	bin := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	// It keeps its stdout open and never writes to it.
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s\nexec sleep 3600\n", pidFile)
	if err := os.WriteFile(filepath.Join(bin, "git-upload-pack"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: time.Second})
	res := await(t, "the fetch", fetchAsync(f, Request{RepoURL: src.dir}), 15*time.Second)
	if !errors.Is(res.err, ErrUnreachable) || !strings.Contains(res.err.Error(), "no answer within 1s") {
		t.Fatalf("fetch = %v, want unreachable after the deadline", res.err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the fake git-upload-pack never ran: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("git-upload-pack (pid %d) still exists after the deadline: kill -0 = %v", pid, err)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// go-git shakes hands over SSH without a context; the connection deadline
// is what ends a server that accepts and never sends its banner.
func TestAHungSSHRemoteFailsWithinItsDeadline(t *testing.T) {
	hung := newHungServer(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	key := writeTemp(t, "id", string(pem.EncodeToMemory(block)))
	host, port, _ := net.SplitHostPort(hung.ln.Addr().String())
	known := writeTemp(t, "known_hosts", "["+host+"]:"+port+" "+string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	creds := &application.Credentials{SSHKeyFile: key, KnownHostsFile: known}
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: time.Second, FetchTimeout: time.Second})
	url := "ssh://git@" + hung.ln.Addr().String() + "/team/app.git"

	for _, rev := range []string{"main", strings.Repeat("cd", 20)} { // ls-remote, then a fetch by SHA
		res := await(t, "the ssh fetch of "+rev, fetchAsync(f, Request{RepoURL: url, Revision: rev, Credentials: creds}), 15*time.Second)
		if !errors.Is(res.err, ErrUnreachable) || !strings.Contains(res.err.Error(), "/team/app.git") {
			t.Fatalf("ssh fetch of %s = %v, want unreachable naming the repository", rev, res.err)
		}
		t.Logf("ssh fetch of %s failed after %s: %v", rev, res.took.Round(time.Millisecond), res.err)
		f = New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: time.Second, FetchTimeout: time.Second})
	}
}

// git:// (git daemon) is plain TCP: a daemon that accepts and never answers
// must end the listing and the fetch at their deadlines like the others.
func TestAHungGitDaemonFailsWithinItsDeadline(t *testing.T) {
	hung := newHungServer(t)
	url := "git://" + hung.ln.Addr().String() + "/team/app.git"
	for _, rev := range []string{"main", strings.Repeat("ef", 20)} { // ls-remote, then a fetch by SHA
		f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: time.Second, FetchTimeout: time.Second})
		res := await(t, "the git:// fetch of "+rev, fetchAsync(f, Request{RepoURL: url, Revision: rev}), 15*time.Second)
		if !errors.Is(res.err, ErrUnreachable) || !strings.Contains(res.err.Error(), "/team/app.git") {
			t.Fatalf("git:// fetch of %s = %v, want unreachable naming the repository", rev, res.err)
		}
		t.Logf("git:// fetch of %s failed after %s: %v", rev, res.took.Round(time.Millisecond), res.err)
	}
}
