package source

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/application"
)

// sshGitServer serves git-upload-pack and git-receive-pack for one local
// repository over real SSH on 127.0.0.1, accepting one client key: enough
// to fetch and push through go-git's SSH transport end to end.
type sshGitServer struct {
	addr  string
	creds *application.Credentials
}

func newSSHGitServer(t *testing.T, repoDir string) *sshGitServer {
	t.Helper()
	requireUploadPack(t)
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	clientSigner, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if !bytes.Equal(k.Marshal(), clientSigner.PublicKey().Marshal()) {
			return nil, errUnknownKey
		}
		return nil, nil
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveSSH(c, cfg, repoDir) })
		}
	})

	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	return &sshGitServer{
		addr: ln.Addr().String(),
		creds: &application.Credentials{
			SSHKeyFile:     writeTemp(t, "id", string(pem.EncodeToMemory(block))),
			KnownHostsFile: writeTemp(t, "known_hosts", "["+host+"]:"+port+" "+string(ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))),
		},
	}
}

var errUnknownKey = errors.New("unknown client key")

func serveSSH(c net.Conn, cfg *ssh.ServerConfig, repoDir string) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range chReqs {
				if req.Type != "exec" || len(req.Payload) < 4 {
					_ = req.Reply(false, nil)
					continue
				}
				service, _, _ := strings.Cut(string(req.Payload[4:]), " ")
				if service != "git-upload-pack" && service != "git-receive-pack" {
					_ = req.Reply(false, nil)
					continue
				}
				_ = req.Reply(true, nil)
				cmd := exec.Command(service, repoDir)
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				status := uint32(0)
				if err := cmd.Run(); err != nil {
					status = 1
				}
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], status)
				_, _ = ch.SendRequest("exit-status", false, b[:])
				return
			}
		}()
	}
}

// The deadline dialer stands in the SSH path of every fetch; it must leave
// a healthy remote working.
func TestAFetchOverSSHWorksThroughTheDeadlineDialer(t *testing.T) {
	src := newTestRepo(t)
	want := src.write(map[string]string{"docker-compose.yml": "services: {}\n"}).commit("one")
	srv := newSSHGitServer(t, src.dir)
	f := New(Options{CacheDir: t.TempDir(), Logger: testLogger(t), RemoteTimeout: 20 * time.Second, FetchTimeout: 20 * time.Second})
	r, err := f.Fetch(context.Background(), Request{RepoURL: "ssh://git@" + srv.addr + "/team/app.git", Credentials: srv.creds})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.Commit != want || !r.Fetched || readFile(t, r.Dir, "docker-compose.yml") != "services: {}\n" {
		t.Fatalf("ssh fetch = %+v, want %s fetched with its tree", r, want)
	}
}

// A commit is pushed over SSH with the application's key file, as fetches
// are, and lands in the server's repository; a push the server's branch
// has moved past meanwhile is retried on the new head, fetched over SSH.
func TestCommit_pushesOverSSHWithAKeyFileAndRetriesOnTheNewHead(t *testing.T) {
	src := newTestRepo(t)
	initial := src.write(map[string]string{"compose.yaml": "image: app:1\n"}).commit("initial")
	origin := bareCopy(t, src)
	srv := newSSHGitServer(t, origin)
	var theirs string
	req := CommitRequest{
		RepoURL: "ssh://git@" + srv.addr + "/team/app.git", Branch: "master", Credentials: srv.creds,
		Author: application.CommitAuthor{Name: "Bot", Email: "bot@example.invalid"}, ScratchDir: t.TempDir(),
		Change: func(_ context.Context, f *Files) (string, error) {
			if theirs == "" {
				// A colleague pushes between the clone and the push.
				theirs = pushAs(t, src, origin, "master", "NOTES")
			}
			b, err := f.ReadFile("compose.yaml")
			if err != nil || string(b) != "image: app:1\n" {
				return "", fmt.Errorf("compose.yaml: %q, %v", b, err)
			}
			return "images: app 2", f.WriteFile("compose.yaml", []byte("image: app:2\n"))
		},
	}
	res, err := Commit(context.Background(), req)
	if err != nil || res.Commit == "" || res.Attempts != 2 || res.Base != theirs {
		t.Fatalf("push over ssh: %+v, %v; want a commit on their %s at the second attempt", res, err, theirs)
	}
	if got := headOf(t, origin).String(); got != res.Commit {
		t.Fatalf("the server's master at %s, want the pushed %s", got, res.Commit)
	}
	if ps := parentsOf(t, origin, res.Commit); len(ps) != 1 || ps[0] != theirs || theirs == initial {
		t.Fatalf("the pushed commit's parents %v, want their commit %s", ps, theirs)
	}
	repo, _ := git.PlainOpen(origin)
	c, err := repo.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"compose.yaml": "image: app:2\n", "NOTES": "theirs\n"} {
		f, err := c.File(name)
		if err != nil {
			t.Fatalf("%s at the pushed commit: %v", name, err)
		}
		if got, _ := f.Contents(); got != want {
			t.Fatalf("%s at the pushed commit: %q, want %q", name, got, want)
		}
	}
}
