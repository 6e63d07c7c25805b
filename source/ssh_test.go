package source

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/application"
)

// sshGitServer serves git-upload-pack for one local repository over real
// SSH on 127.0.0.1, accepting one client key: enough to fetch through
// go-git's SSH transport end to end.
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
				command := string(req.Payload[4:])
				if !strings.HasPrefix(command, "git-upload-pack") {
					_ = req.Reply(false, nil)
					continue
				}
				_ = req.Reply(true, nil)
				cmd := exec.Command("git-upload-pack", repoDir)
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
