package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/redact"
)

// ErrPushRejected is returned when every attempt's push was refused
// because the branch moved on meanwhile.
var ErrPushRejected = errors.New("push rejected: the branch moved on")

// MaxEditFile bounds a file Files reads or writes: the files image
// automation edits (compose files, values files) are a few KiB.
const MaxEditFile = 4 << 20

// CommitRequest asks for a change to be committed to a branch and pushed,
// the one write to git Flotilla makes (image automation). The push goes
// over the same transports and credentials as fetches, and is never
// forced.
type CommitRequest struct {
	RepoURL     string
	Branch      string
	Credentials *application.Credentials
	Author      application.CommitAuthor
	// SigningKeyFile, when set, is an unencrypted OpenSSH private key the
	// commit is signed with (git's gpg.format=ssh); read on every call,
	// so a rotated key applies to the next commit.
	SigningKeyFile string
	// Change computes the edit from the branch head's files, writing
	// through files; it returns the commit message, or "" when nothing is
	// to be committed (then nothing is written). After a rejected push it
	// is called again on the new head, so it must decide from the files,
	// not from what it did before.
	Change func(ctx context.Context, files *Files) (message string, err error)
	// DryRun runs Change and reports, without committing or pushing.
	DryRun bool
	// Attempts bounds push retries. Default 3.
	Attempts int
	// ScratchDir holds the temporary bare clone. Default os.TempDir().
	ScratchDir string
	// Own tells the caller's own commits (an author and a trailer, say).
	// With it, the result's LastOwn is found in the clone, so a writer
	// that restarted knows its last commit from git, not from memory.
	// Propose requires it: it replaces only a commit Own accepts.
	Own func(*object.Commit) bool
}

// OwnSearchDepth bounds the search for LastOwn: the newest commits of the
// branch, by committer time, that are looked at.
const OwnSearchDepth = 100

// CommitRef is a commit and its committer time, to the second as git
// records it, in UTC.
type CommitRef struct {
	Hash string
	Time time.Time
}

// CommitResult says what a CommitRequest did.
type CommitResult struct {
	// Base is the head Change last ran on.
	Base string
	// Commit is the pushed commit; "" when nothing was committed.
	Commit string
	// Message is the last message Change returned.
	Message string
	// Files are the paths Change wrote, relative to the repository.
	Files []string
	// Attempts is how many times Change ran.
	Attempts int
	// Time is Commit's committer time, as git records it (UTC, seconds).
	Time time.Time
	// LastOwn is the newest commit Own accepts among the branch's last
	// OwnSearchDepth commits as cloned, before this request's commit
	// (Propose: the head branch's tip when it is the caller's, else as
	// for Commit on the base); zero without Own or when there is none.
	LastOwn CommitRef
}

// lastOwn is the newest commit own accepts among the depth newest commits
// reachable from tip (by committer time, so a commit merged in through a
// second parent counts); zero when none is.
func lastOwn(s storer.EncodedObjectStorer, tip plumbing.Hash, own func(*object.Commit) bool, depth int) (CommitRef, error) {
	if own == nil || tip.IsZero() {
		return CommitRef{}, nil
	}
	c, err := object.GetCommit(s, tip)
	if err != nil {
		return CommitRef{}, err
	}
	iter := object.NewCommitIterCTime(c, nil, nil)
	defer iter.Close()
	for range depth {
		c, err := iter.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return CommitRef{}, err
		}
		if own(c) {
			return commitRef(c), nil
		}
	}
	return CommitRef{}, nil
}

func commitRef(c *object.Commit) CommitRef {
	return CommitRef{Hash: c.Hash.String(), Time: c.Committer.When.UTC()}
}

// Files gives Change the head commit's files. Nothing is checked out: reads
// come from the commit's tree and writes become new blobs and trees, so a
// repository's shape (a git bomb, a symlink out of it, a huge file) never
// reaches the controller's disk. Only existing regular files are read or
// written; the repository's author does not decide what the controller
// writes.
type Files struct {
	store   storer.EncodedObjectStorer
	tree    *object.Tree
	written map[string][]byte
	order   []string
}

// ReadFile reads the repository file rel (slash-separated), as written so
// far.
func (f *Files) ReadFile(rel string) ([]byte, error) {
	name, err := cleanRel(rel)
	if err != nil {
		return nil, err
	}
	if b, ok := f.written[name]; ok {
		return slices.Clone(b), nil
	}
	entry, err := f.regular(name)
	if err != nil {
		return nil, err
	}
	blob, err := object.GetBlob(f.store, entry.Hash)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if blob.Size > MaxEditFile {
		return nil, fmt.Errorf("%s is larger than %d bytes; it is not edited", name, MaxEditFile)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, MaxEditFile))
}

// WriteFile replaces the content of the existing regular file rel.
func (f *Files) WriteFile(rel string, data []byte) error {
	name, err := cleanRel(rel)
	if err != nil {
		return err
	}
	if _, err := f.regular(name); err != nil {
		return err
	}
	if len(data) > MaxEditFile {
		return fmt.Errorf("%s: %d bytes is more than %d", name, len(data), MaxEditFile)
	}
	if _, ok := f.written[name]; !ok {
		f.order = append(f.order, name)
	}
	f.written[name] = slices.Clone(data)
	return nil
}

func cleanRel(rel string) (string, error) {
	name := path.Clean(strings.TrimPrefix(rel, "./"))
	if rel == "" || path.IsAbs(name) || name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return "", fmt.Errorf("%q is not a path inside the repository", rel)
	}
	return name, nil
}

func (f *Files) regular(name string) (*object.TreeEntry, error) {
	entry, err := f.tree.FindEntry(name)
	if err != nil {
		return nil, fmt.Errorf("%s: not in the repository", name)
	}
	if entry.Mode != filemode.Regular && entry.Mode != filemode.Executable {
		return nil, fmt.Errorf("%s is not a regular file (a symlink, a directory or a submodule); it is not edited", name)
	}
	return entry, nil
}

// commit writes the changed files as a commit on parent and returns its
// hash.
func (f *Files) commit(parent *object.Commit, msg string, sig object.Signature, signer *sshSigner) (plumbing.Hash, error) {
	root := parent.TreeHash
	for _, name := range f.order {
		blob := f.store.NewEncodedObject()
		blob.SetType(plumbing.BlobObject)
		w, err := blob.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(f.written[name]); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		bh, err := f.store.SetEncodedObject(blob)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if root, err = replaceInTree(f.store, root, strings.Split(name, "/"), bh); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %w", name, err)
		}
	}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root, ParentHashes: []plumbing.Hash{parent.Hash}}
	if signer != nil {
		unsigned := &plumbing.MemoryObject{}
		if err := c.EncodeWithoutSignature(unsigned); err != nil {
			return plumbing.ZeroHash, err
		}
		r, err := unsigned.Reader()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		message, err := io.ReadAll(r)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		armored, err := signer.sign(message)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		c.PGPSignature = string(armored)
	}
	obj := f.store.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return f.store.SetEncodedObject(obj)
}

// replaceInTree returns the hash of tree th with the blob at parts set to
// blob, writing the new trees along the path; every other entry, and its
// mode, is kept.
func replaceInTree(s storer.EncodedObjectStorer, th plumbing.Hash, parts []string, blob plumbing.Hash) (plumbing.Hash, error) {
	t, err := object.GetTree(s, th)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	entries := slices.Clone(t.Entries)
	i := slices.IndexFunc(entries, func(e object.TreeEntry) bool { return e.Name == parts[0] })
	if i < 0 {
		return plumbing.ZeroHash, errors.New("not in the tree")
	}
	if len(parts) == 1 {
		entries[i].Hash = blob
	} else {
		if entries[i].Mode != filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("%s is not a directory", parts[0])
		}
		if entries[i].Hash, err = replaceInTree(s, entries[i].Hash, parts[1:], blob); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// Commit clones req.Branch (bare: nothing is checked out), runs
// req.Change, and commits and pushes what it wrote. A push the remote
// rejects (the branch moved) fetches the new head and runs Change again on
// it, up to req.Attempts times; it never force-pushes. Errors are
// sanitised.
func Commit(ctx context.Context, req CommitRequest) (res CommitResult, err error) {
	branch := plumbing.NewBranchReferenceName(req.Branch)
	sc, err := openScratch(ctx, req, "flotilla-commit-", branch)
	if err != nil {
		return res, err
	}
	defer sc.close()
	defer func() { err = redact.Error(err, sc.auth.secrets...) }()
	loc, a, signer, repo, attempts := sc.loc, sc.auth, sc.signer, sc.repo, sc.attempts
	for res.Attempts < attempts {
		res.Attempts++
		ref, err := repo.Reference(branch, true)
		if err != nil {
			return res, fmt.Errorf("branch %s: %w", req.Branch, err)
		}
		head, err := repo.CommitObject(ref.Hash())
		if err != nil {
			return res, err
		}
		if res.Attempts == 1 {
			if res.LastOwn, err = lastOwn(repo.Storer, head.Hash, req.Own, OwnSearchDepth); err != nil {
				return res, fmt.Errorf("branch %s: looking for the last own commit: %w", req.Branch, err)
			}
		}
		tree, err := head.Tree()
		if err != nil {
			return res, err
		}
		res.Base = head.Hash.String()
		files := &Files{store: repo.Storer, tree: tree, written: map[string][]byte{}}
		msg, err := req.Change(ctx, files)
		if err != nil {
			return res, err
		}
		res.Message, res.Files = msg, files.order
		if msg == "" || len(files.order) == 0 || req.DryRun {
			return res, nil
		}
		sig := signature(req.Author)
		h, err := files.commit(head, msg, sig, signer)
		if err != nil {
			return res, fmt.Errorf("commit: %w", err)
		}
		if err := repo.Storer.SetReference(plumbing.NewHashReference(branch, h)); err != nil {
			return res, err
		}
		spec := config.RefSpec(branch + ":" + branch) // no "+": never forced
		err = repo.PushContext(ctx, &git.PushOptions{RemoteName: "origin", Auth: a.method, RefSpecs: []config.RefSpec{spec}, ProxyOptions: connDeadline(ctx, loc)})
		if err == nil {
			res.Commit, res.Time = h.String(), sig.When
			return res, nil
		}
		if !rejected(err) {
			return res, fmt.Errorf("push to %s branch %s: %w", loc.safe, req.Branch, err)
		}
		// The branch moved: start again from its new head.
		err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: a.method, Tags: git.NoTags,
			RefSpecs: []config.RefSpec{config.RefSpec("+" + branch + ":" + branch)}, ProxyOptions: connDeadline(ctx, loc)})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return res, fmt.Errorf("fetch %s branch %s after a rejected push: %w", loc.safe, req.Branch, err)
		}
	}
	return res, fmt.Errorf("%s branch %s: %w (%d attempts)", loc.safe, req.Branch, ErrPushRejected, attempts)
}

// signature is author's, now, to the second and in UTC as git records it,
// so the time a writer reports equals the one read back from the commit.
func signature(author application.CommitAuthor) object.Signature {
	return object.Signature{Name: author.Name, Email: author.Email, When: time.Now().UTC().Truncate(time.Second)}
}

// scratch is what Commit and Propose set up before deciding anything: the
// remote, its auth, the commit signer, the attempts allowed, and a bare
// single-branch clone in a scratch directory that close removes.
type scratch struct {
	loc      location
	auth     auth
	signer   *sshSigner
	attempts int
	repo     *git.Repository
	dir      string
}

// openScratch clones req's remote at branch into a new directory named
// with prefix under req.ScratchDir. Its errors after the credentials are
// read are sanitised with them.
func openScratch(ctx context.Context, req CommitRequest, prefix string, branch plumbing.ReferenceName) (sc *scratch, err error) {
	loc, err := parseLocation(req.RepoURL)
	if err != nil {
		return nil, err
	}
	a, err := loadAuth(loc, req.Credentials)
	if err != nil {
		return nil, err
	}
	defer func() { err = redact.Error(err, a.secrets...) }()
	sc = &scratch{loc: loc, auth: a, attempts: req.Attempts}
	if req.SigningKeyFile != "" {
		if sc.signer, err = newSSHSigner(req.SigningKeyFile); err != nil {
			return nil, err
		}
	}
	if sc.attempts <= 0 {
		sc.attempts = 3
	}
	if req.ScratchDir != "" {
		if err := os.MkdirAll(req.ScratchDir, 0o700); err != nil {
			return nil, fmt.Errorf("scratch clone: %w", err)
		}
	}
	if sc.dir, err = os.MkdirTemp(req.ScratchDir, prefix); err != nil {
		return nil, fmt.Errorf("scratch clone: %w", err)
	}
	sc.repo, err = git.PlainCloneContext(ctx, sc.dir, true, &git.CloneOptions{
		URL: loc.url(), Auth: a.method, ReferenceName: branch, SingleBranch: true, Tags: git.NoTags,
		ProxyOptions: connDeadline(ctx, loc),
	})
	if err != nil {
		os.RemoveAll(sc.dir)
		return nil, fmt.Errorf("clone %s branch %s: %w", loc.safe, req.Branch, err)
	}
	return sc, nil
}

func (sc *scratch) close() { os.RemoveAll(sc.dir) }

// rejected reports whether a push failed because the remote branch is not
// an ancestor of ours, as go-git finds it before sending or as the server
// says after.
func rejected(err error) bool {
	if errors.Is(err, git.ErrNonFastForwardUpdate) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "non-fast-forward") || strings.Contains(s, "fetch first") || strings.Contains(s, "rejected")
}

// BranchHead is the commit branch points to on the remote, asked as a
// fetch's cheap remote check is (ls-remote, same credentials, deadline and
// sanitising), so a writer can tell that nothing moved without cloning.
func BranchHead(ctx context.Context, repoURL, branch string, creds *application.Credentials) (_ string, err error) {
	loc, err := parseLocation(repoURL)
	if err != nil {
		return "", redact.Error(err)
	}
	a, err := loadAuth(loc, creds)
	if err != nil {
		return "", redact.Error(err)
	}
	defer func() {
		if err != nil {
			err = redact.Error(fmt.Errorf("list refs of %s: %w", loc.safe, err), a.secrets...)
		}
	}()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{loc.url()}})
	var head string
	err = withDeadline(ctx, DefaultRemoteTimeout, "list refs", func(ctx context.Context) error {
		refs, err := listRefs(ctx, remote, loc, a)
		if err != nil {
			return err
		}
		ref, ok := refs[plumbing.NewBranchReferenceName(branch)]
		if !ok {
			return fmt.Errorf("branch %s: %w", branch, ErrRevisionNotFound)
		}
		head = ref.Hash().String()
		return nil
	})
	return head, err
}
