package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/redact"
)

// Errors a Fetch wraps, so callers can tell bad input (wait for the
// applications file or the repository to change) from a transient failure
// (try again later).
var (
	// ErrRevisionNotFound means the remote answered but has no such branch,
	// tag or commit.
	ErrRevisionNotFound = errors.New("revision not found")
	// ErrUnreachable means the remote could not be listed or fetched:
	// network, DNS, authentication, or no repository at that URL.
	ErrUnreachable = errors.New("repository unreachable")
)

// Defaults applied by New to zero Options fields.
const (
	DefaultBackoffMin    = 10 * time.Second
	DefaultBackoffMax    = 5 * time.Minute
	DefaultKeep          = 3
	DefaultRemoteTimeout = 30 * time.Second
	DefaultFetchTimeout  = 5 * time.Minute
)

// Options configure a Fetcher.
type Options struct {
	// CacheDir holds one cache per repository URL. Required.
	CacheDir string
	// Logger receives the fetcher's logs, tagged component=source.
	// Default slog.Default().
	Logger *slog.Logger
	// Backoff bounds how long a repository that failed is left alone.
	Backoff Backoff
	// Clock returns the current time. Default time.Now; tests replace it.
	Clock func() time.Time
	// Keep is of how many commits each repository keeps the materialised
	// trees (whole or partial), most recently returned first, besides
	// those still leased (see Revision.Release). Default 3.
	Keep int
	// RemoteTimeout bounds the listing of a remote's refs (ls-remote), the
	// cheap check every Fetch makes. Default DefaultRemoteTimeout.
	RemoteTimeout time.Duration
	// FetchTimeout bounds one fetch of objects, the first clone included.
	// Default DefaultFetchTimeout. It also bounds the writing of a
	// commit's tree to disk.
	FetchTimeout time.Duration
	// TreeBudget bounds what one commit's tree may expand to on disk; a
	// tree past it is refused with ErrTreeTooLarge before anything is
	// written, unless the request's Path alone is within it (see
	// Request.Path). Zero fields take the Default* values.
	TreeBudget TreeBudget
}

// Backoff is the window after a failure during which Fetch returns the last
// error without contacting the repository. It starts at Min, doubles on
// each consecutive failure up to Max, and resets on success.
// Defaults 10s and 5m.
type Backoff struct {
	Min, Max time.Duration
}

// Request names a revision of a repository.
type Request struct {
	// RepoURL is https://, http://, ssh://, git@host:path, file:// or a
	// local path.
	RepoURL string
	// Revision is a branch, a tag, "HEAD" or a full commit SHA.
	// Default "HEAD".
	Revision string
	// Credentials names the files to authenticate with; nil falls back to
	// the FLOTILLA_GIT_* environment variables.
	Credentials *application.Credentials
	// Path is the directory within the repository the caller reads,
	// slash-separated; "" or "." means the whole tree. It matters only
	// when the whole tree is over the TreeBudget: then only Path is
	// written, if it alone is within the budget, so that a git bomb
	// elsewhere in the repository refuses only those who read it.
	// A path that is absolute or holds ".." is refused.
	Path string
}

// Revision is a commit made available on disk. Its tree is leased to the
// caller: it is not pruned, whatever other fetches of the repository do,
// until Release is called.
type Revision struct {
	// Commit is the full SHA the revision resolved to.
	Commit string
	// Dir is the absolute path of the commit's tree: the root that paths
	// in the repository are contained in. It stays at least until Release;
	// do not write to it.
	Dir string
	// Author is "Name <email>" of the commit's author.
	Author string
	// Message is the full commit message.
	Message string
	// Time is when the commit was authored.
	Time time.Time
	// Fetched reports whether this call fetched from the remote; false
	// means the commit was already cached.
	Fetched bool
	// Partial is, when the whole tree was over the budget, the one
	// directory (Request.Path) Dir holds, at its place: files outside it
	// are absent. "" when Dir holds the whole tree.
	Partial string

	release func()
}

// Release ends the caller's use of Dir, which may then be pruned once Keep
// newer trees exist. A Revision that is never released keeps its tree for
// the life of the Fetcher. Release may be called more than once, and on a
// nil Revision or one the Fetcher did not make, where it does nothing.
func (r *Revision) Release() {
	if r != nil && r.release != nil {
		r.release()
	}
}

// Fetcher resolves revisions and serves their trees from a local cache. It is
// safe for concurrent use: calls for one repository URL are serialised,
// calls for different URLs never wait on each other.
type Fetcher struct {
	cacheDir string
	log      *slog.Logger
	backoff  Backoff
	now      func() time.Time
	keep     int
	// Deadlines of the remote calls; see Options.
	remoteTimeout, fetchTimeout time.Duration
	budget                      TreeBudget

	mu    sync.Mutex
	repos map[string]*repoCache // by location.key
}

// New returns a Fetcher with opts' defaults applied.
func New(opts Options) *Fetcher {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Backoff.Min <= 0 {
		opts.Backoff.Min = DefaultBackoffMin
	}
	if opts.Backoff.Max <= 0 {
		opts.Backoff.Max = DefaultBackoffMax
	}
	opts.Backoff.Max = max(opts.Backoff.Max, opts.Backoff.Min)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.RemoteTimeout <= 0 {
		opts.RemoteTimeout = DefaultRemoteTimeout
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	return &Fetcher{
		cacheDir:      opts.CacheDir,
		log:           opts.Logger.With("component", "source"),
		backoff:       opts.Backoff,
		now:           opts.Clock,
		keep:          opts.Keep,
		remoteTimeout: opts.RemoteTimeout,
		fetchTimeout:  opts.FetchTimeout,
		budget:        opts.TreeBudget.withDefaults(),
		repos:         make(map[string]*repoCache),
	}
}

// repoCache is the state kept for one repository URL.
type repoCache struct {
	loc  location
	root string // <CacheDir>/<loc.dir>

	// sem serialises git work and tree writes for this repository; a
	// channel rather than a mutex so that waiting honours a context.
	sem  chan struct{}
	repo *git.Repository // opened lazily, guarded by sem

	mu      sync.Mutex // guards the fields below; never held during I/O
	backoff *FailureWindow
	last    map[string]string // revision → commit
	// leases counts, per commit, the Revisions not yet released; a leased
	// tree is never pruned, so a render cannot lose its files to a fetch
	// made for another application.
	leases map[string]int

	// Listings of the remote's refs: listings counts those begun, and
	// listed is the newest that succeeded, with the number it was begun
	// as and the credentials it was made with. A Fetch reuses it when it
	// was begun after that Fetch was called, so it is no older than the
	// caller's own request: the passes of many applications on one
	// repository, queued on sem, then share one ls-remote instead of
	// making one each, and none sees the remote as it was before it asked
	// (a pass a webhook started sees the push the webhook announced).
	listings uint64
	listed   *listing
}

// listing is one successful ls-remote of a repository.
type listing struct {
	seq   uint64
	creds string
	refs  map[plumbing.ReferenceName]*plumbing.Reference
}

// credsKey names the credentials a listing was made with: a listing is
// shared only between fetches that authenticate alike.
func credsKey(c *application.Credentials) string {
	if c == nil {
		return ""
	}
	return strings.Join([]string{c.UsernameFile, c.PasswordFile, c.SSHKeyFile, c.KnownHostsFile}, "\x00")
}

// askedAt is the number of listings begun so far: a listing begun later
// than this is as new as a request made now.
func (r *repoCache) askedAt() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listings
}

// fresh returns the refs of the newest successful listing if it was begun
// after asked, with the same credentials.
func (r *repoCache) fresh(asked uint64, creds string) (map[plumbing.ReferenceName]*plumbing.Reference, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.listed; l != nil && l.seq > asked && l.creds == creds {
		return l.refs, true
	}
	return nil, false
}

// beginListing numbers a listing about to be made.
func (r *repoCache) beginListing() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listings++
	return r.listings
}

// listedOK keeps a successful listing for fetches that asked before it.
func (r *repoCache) listedOK(seq uint64, creds string, refs map[plumbing.ReferenceName]*plumbing.Reference) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed == nil || seq > r.listed.seq {
		r.listed = &listing{seq: seq, creds: creds, refs: refs}
	}
}

func (r *repoCache) lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *repoCache) unlock() { <-r.sem }

func (r *repoCache) treesDir() string { return filepath.Join(r.root, "trees") }

// cache returns the state for loc's repository, creating it on first use.
func (f *Fetcher) cache(loc location) *repoCache {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.repos[loc.key]
	if !ok {
		r = &repoCache{
			loc:     loc,
			root:    filepath.Join(f.cacheDir, loc.dir),
			sem:     make(chan struct{}, 1),
			backoff: NewFailureWindow(f.backoff.Min, f.backoff.Max),
			last:    make(map[string]string),
			leases:  make(map[string]int),
		}
		f.repos[loc.key] = r
	}
	return r
}

// Fetch makes req's revision available on disk. It lists the remote's refs,
// and fetches only when the commit they point to is not cached yet; a full
// commit SHA that is cached is served without contacting the remote. After
// a failure the repository is left alone for a backoff window, during which
// Fetch returns that failure at once. Every error is sanitised.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Revision, error) {
	if f.cacheDir == "" {
		return nil, errors.New("source: no cache directory configured")
	}
	loc, err := parseLocation(req.RepoURL)
	if err != nil {
		return nil, redact.Error(err)
	}
	sub, err := cleanRequestPath(req.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.safe, err)
	}
	rev := req.Revision
	if rev == "" {
		rev = "HEAD"
	}
	r := f.cache(loc)
	log := f.log.With("repo", loc.safe, "revision", rev)
	asked := r.askedAt()
	if err := r.lock(ctx); err != nil {
		return nil, err
	}
	defer r.unlock()

	out, err := f.fetchLocked(ctx, r, rev, sub, asked, req.Credentials, log)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.last[revKey(rev)] = out.Commit
	r.mu.Unlock()
	return out, nil
}

// LastCommit returns the commit revision of repoURL resolved to in the last
// successful Fetch, without any I/O.
func (f *Fetcher) LastCommit(repoURL, revision string) (string, bool) {
	loc, err := parseLocation(repoURL)
	if err != nil {
		return "", false
	}
	if revision == "" {
		revision = "HEAD"
	}
	f.mu.Lock()
	r, ok := f.repos[loc.key]
	f.mu.Unlock()
	if !ok {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.last[revKey(revision)]
	return c, ok
}

// revKey normalises a revision for LastCommit: full SHAs are lowercase.
func revKey(s string) string {
	if isFullSHA(s) {
		return strings.ToLower(s)
	}
	return s
}

// fetchLocked does the work of Fetch; the caller holds r's lock.
func (f *Fetcher) fetchLocked(ctx context.Context, r *repoCache, revision, sub string, asked uint64, creds *application.Credentials, log *slog.Logger) (out *Revision, err error) {
	var secrets []string
	defer func() {
		if err != nil {
			err = redact.Error(err, secrets...)
		}
	}()

	repo, err := f.openRepo(r)
	if err != nil {
		return nil, err
	}

	var t target
	if isFullSHA(revision) {
		h := plumbing.NewHash(revision)
		if c, ok := localCommit(repo, h); ok {
			log.Debug("commit already cached, remote not contacted", "commit", c.Hash.String())
			return f.serve(ctx, r, repo, c, sub, false, log)
		}
		t = shaTarget(h)
	}

	now := f.now()
	r.mu.Lock()
	until, last, blocked := r.backoff.Blocked(now)
	r.mu.Unlock()
	if blocked {
		return nil, fmt.Errorf("backing off until %s: %w", until.UTC().Format(time.RFC3339), last)
	}

	a, err := loadAuth(r.loc, creds)
	if err != nil {
		return nil, err
	}
	secrets = a.secrets
	remote := newRemote(repo, r.loc)

	if t.refspecs == nil {
		ck := credsKey(creds)
		refs, shared := r.fresh(asked, ck)
		var err error
		if shared {
			log.Debug("refs listed since this fetch was asked for; not listing again")
		} else {
			seq := r.beginListing()
			err = withDeadline(ctx, f.remoteTimeout, "list refs", func(ctx context.Context) (err error) {
				refs, err = listRefs(ctx, remote, r.loc, a)
				return err
			})
			if err == nil {
				r.listedOK(seq, ck, refs)
			}
		}
		if errors.Is(err, errEmptyRemote) {
			r.succeeded()
			return nil, notFound(revision, r.loc)
		}
		if err != nil {
			return nil, f.failed(ctx, r, log, fmt.Errorf("%w: %s: %w", ErrUnreachable, r.loc.safe, err))
		}
		var ok bool
		if t, ok = resolve(refs, revision); !ok {
			r.succeeded()
			return nil, notFound(revision, r.loc)
		}
		if c, ok := localCommit(repo, t.hash); ok {
			r.succeeded()
			log.Debug("revision unchanged, nothing to fetch", "commit", c.Hash.String())
			return f.serve(ctx, r, repo, c, sub, false, log)
		}
	}

	start := time.Now()
	err = withDeadline(ctx, f.fetchTimeout, "fetch", func(ctx context.Context) error {
		return fetchRefs(ctx, remote, r.loc, a, t.refspecs)
	})
	if err != nil {
		return nil, f.failed(ctx, r, log, fmt.Errorf("%w: fetch %s: %w", ErrUnreachable, r.loc.safe, err))
	}
	r.succeeded()
	c, err := t.commit(repo)
	if err != nil {
		return nil, notFound(revision, r.loc)
	}
	log.Info("fetched revision", "commit", c.Hash.String(), "duration", time.Since(start).Round(time.Millisecond))
	return f.serve(ctx, r, repo, c, sub, true, log)
}

// withDeadline runs call with ctx bounded by d. Running out of d is the
// remote's fault and says so; the caller's own cancellation is returned as
// it is, since it says nothing about the remote (see failed).
//
// Every transport honours the context once connected: go-git's HTTP client
// sends it with each request, the file transport kills git-upload-pack
// when a read is cancelled, and the in-process read of a local repository
// returns (see local.go), so the repository's lock is free again within d.
func withDeadline(ctx context.Context, d time.Duration, what string, call func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := call(cctx)
	// The connection deadline of an SSH remote can fire a moment before
	// the context's timer does; both mean the same thing.
	if until, _ := cctx.Deadline(); err != nil && ctx.Err() == nil && !time.Now().Before(until) {
		return fmt.Errorf("%s: no answer within %s: %w", what, d, context.DeadlineExceeded)
	}
	return err
}

func notFound(revision string, loc location) error {
	return fmt.Errorf("revision %q not found in %s: %w", revision, loc.safe, ErrRevisionNotFound)
}

// failed opens (or widens) the repository's backoff window, unless the
// caller gave up: a cancelled context says nothing about the remote.
func (f *Fetcher) failed(ctx context.Context, r *repoCache, log *slog.Logger, err error) error {
	if ctx.Err() != nil {
		return err
	}
	err = redact.Error(err)
	r.mu.Lock()
	until := r.backoff.Fail(f.now(), err)
	r.mu.Unlock()
	log.Warn("repository unreachable, backing off", "error", err.Error(), "until", until)
	return err
}

func (r *repoCache) succeeded() {
	r.mu.Lock()
	r.backoff.Reset()
	r.mu.Unlock()
}

// openRepo opens the repository's bare cache, creating it on first use and
// recreating it if it is unreadable: it is only a cache.
func (f *Fetcher) openRepo(r *repoCache) (*git.Repository, error) {
	if r.repo != nil {
		return r.repo, nil
	}
	dir := filepath.Join(r.root, "repo")
	if err := os.MkdirAll(r.treesDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create cache for %s: %w", r.loc.safe, err)
	}
	removeTemps(r.treesDir())
	removePartials(r.treesDir())
	repo, err := git.PlainOpen(dir)
	if err != nil {
		if !errors.Is(err, git.ErrRepositoryNotExists) {
			f.log.Warn("cache unreadable, recreating it", "repo", r.loc.safe, "error", redact.Error(err).Error())
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("remove cache for %s: %w", r.loc.safe, err)
			}
		}
		if repo, err = git.PlainInit(dir, true); err != nil {
			return nil, fmt.Errorf("create cache for %s: %w", r.loc.safe, err)
		}
	}
	r.repo = repo
	return repo, nil
}

// serve makes sure c's tree (or, for a tree over the budget, the part sub
// of it) is materialised, marks it most recently used, prunes older trees
// and describes the result.
func (f *Fetcher) serve(ctx context.Context, r *repoCache, repo *git.Repository, c *object.Commit, sub string, fetched bool, log *slog.Logger) (*Revision, error) {
	sha := c.Hash.String()
	dir, partial, err := f.tree(ctx, r, repo, c, sub, log)
	if err != nil {
		return nil, err
	}
	now := f.now()
	if err := os.Chtimes(dir, now, now); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	// Leased before pruning, and both under the repository's lock, which
	// every prune holds: no prune can fall between the two.
	release := r.lease(sha)
	if err := pruneTrees(r.treesDir(), f.keep, r.leased()); err != nil {
		// A tree that could not be removed costs disk, not correctness.
		f.log.Warn("could not prune old trees", "repo", r.loc.safe, "error", redact.Error(err).Error())
	}
	return &Revision{
		Commit:  sha,
		Dir:     abs,
		Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
		Message: c.Message,
		Time:    c.Author.When,
		Fetched: fetched,
		Partial: partial,
		release: release,
	}, nil
}

// tree returns the directory holding c's tree, writing it first if it is not
// there yet: the whole tree when it is within the budget, else only sub
// (when given) when that is, and partial is then sub. A partial tree once
// written is served as it is: the whole tree was measured against the same
// budget.
func (f *Fetcher) tree(ctx context.Context, r *repoCache, repo *git.Repository, c *object.Commit, sub string, log *slog.Logger) (dir, partial string, err error) {
	sha := c.Hash.String()
	whole := filepath.Join(r.treesDir(), sha)
	if ok, err := exists(whole); ok || err != nil {
		return whole, "", err
	}
	var part string
	if sub != "" {
		part = filepath.Join(r.treesDir(), partialTreeName(sha, sub))
		if ok, err := exists(part); ok || err != nil {
			return part, sub, err
		}
	}
	err = withDeadline(ctx, f.fetchTimeout, "write tree", func(ctx context.Context) error {
		return materialise(ctx, repo.Storer, c, whole, f.budget)
	})
	if err == nil {
		return whole, "", nil
	}
	if sub == "" || !errors.Is(err, ErrTreeTooLarge) {
		return "", "", fmt.Errorf("materialise %s of %s: %w", sha, r.loc.safe, err)
	}
	whyWhole := err
	err = withDeadline(ctx, f.fetchTimeout, "write tree", func(ctx context.Context) error {
		return materialiseSubtree(ctx, repo.Storer, c, sub, part, f.budget)
	})
	if err != nil {
		return "", "", fmt.Errorf("materialise %s of %s: %w; path %s alone: %w", sha, r.loc.safe, whyWhole, sub, err)
	}
	log.Warn("tree over the git tree budget: wrote only the requested path, files outside it are absent",
		"commit", sha, "path", sub, "reason", whyWhole.Error())
	return part, sub, nil
}

func exists(p string) (bool, error) {
	_, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// lease marks sha's tree in use and returns the function that ends that use,
// once however often it is called.
func (r *repoCache) lease(sha string) func() {
	r.mu.Lock()
	r.leases[sha]++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.leases[sha]--; r.leases[sha] <= 0 {
				delete(r.leases, sha)
			}
		})
	}
}

// leased returns the commits whose trees are leased now.
func (r *repoCache) leased() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.leases))
	for sha := range r.leases {
		out[sha] = true
	}
	return out
}
