package source

import (
	"context"
	"errors"
	"net/url"
	"os/exec"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
)

// inProcessScheme is the URL scheme under which a local repository is
// served by go-git's own server, in this process, when no git program is
// installed (the controller's image has none). go-git chooses a transport
// by scheme from a process-wide table; registering a scheme of our own
// leaves "file" — and so every other user of go-git in the process —
// exactly as it was.
const inProcessScheme = "flotilla-local"

func init() {
	client.InstallProtocol(inProcessScheme, inProcessTransport{server.NewClient(repoLoader{})})
}

// localRemote is the URL go-git is given for the local repository at the
// absolute path abs: the path itself, served by git-upload-pack as git
// does, when git is installed; else the in-process server. Decided on each
// call, so installing git takes effect without a restart.
func localRemote(abs string) string {
	if gitInstalled() {
		return abs
	}
	return (&url.URL{Scheme: inProcessScheme, Path: abs}).String()
}

// gitInstalled reports whether go-git's file transport can run: it looks
// git-upload-pack up on the PATH, then in `git --exec-path`.
func gitInstalled() bool {
	if _, err := exec.LookPath(transport.UploadPackServiceName); err == nil {
		return true
	}
	_, err := exec.LookPath("git")
	return err == nil
}

// repoLoader opens the repository at the endpoint's path as git does: bare,
// or a work tree's .git (a directory or a "gitdir:" file). go-git's own
// filesystem loader reads a work tree's objects from the tree's root, where
// there are none. Opened afresh for every session, so each sees the
// repository's refs and objects as they are now.
type repoLoader struct{}

func (repoLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	repo, err := git.PlainOpen(ep.Path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, transport.ErrRepositoryNotFound
	}
	if err != nil {
		return nil, err
	}
	return repo.Storer, nil
}

// inProcessTransport bounds the in-process server by the caller's context
// and refuses pushes.
//
// go-git's server ignores the context until it has walked the objects to
// send: that walk runs here in a goroutine of its own, and the call
// returns when the context ends; the walk then finishes in the background,
// reading only the local repository, and its result is discarded. The pack
// itself is streamed through a reader that honours the context, so a fetch
// past its deadline fails at the deadline and frees the repository's lock.
//
// Pushes (commits, image updates) are refused: go-git's server updates a
// ref without checking that it still holds the value the client saw, and
// would move the checked-out branch of a work tree under it, both of which
// git-receive-pack refuses.
type inProcessTransport struct {
	transport.Transport
}

// ErrLocalPushNeedsGit is returned for a push to a local repository when no
// git program is installed.
var ErrLocalPushNeedsGit = errors.New("pushing to a local repository needs git installed (git-receive-pack); fetching does not")

func (t inProcessTransport) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	s, err := t.Transport.NewUploadPackSession(ep, auth)
	if err != nil {
		return nil, err
	}
	return boundedUploadPack{s}, nil
}

func (inProcessTransport) NewReceivePackSession(*transport.Endpoint, transport.AuthMethod) (transport.ReceivePackSession, error) {
	return nil, ErrLocalPushNeedsGit
}

// boundedUploadPack returns from each call of the session when its context
// ends, whether or not the server has.
type boundedUploadPack struct {
	transport.UploadPackSession
}

func (s boundedUploadPack) AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error) {
	return bounded(ctx, func() (*packp.AdvRefs, error) {
		return s.UploadPackSession.AdvertisedReferencesContext(ctx)
	}, nil)
}

func (s boundedUploadPack) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	return bounded(ctx, func() (*packp.UploadPackResponse, error) {
		return s.UploadPackSession.UploadPack(ctx, req)
	}, func(r *packp.UploadPackResponse) { _ = r.Close() })
}

// bounded runs call and returns its result, or ctx's error as soon as ctx
// ends; a result that arrives after that is handed to discard, if given.
func bounded[T any](ctx context.Context, call func() (T, error), discard func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil && discard != nil {
				discard(r.v)
			}
		}()
		var zero T
		return zero, ctx.Err()
	}
}
