// Package source is the only part of Flotilla that talks to git. It turns a
// repository URL and a revision into a directory holding the repository's
// tree at one commit, and it keeps reads of that directory inside it
// (Contain).
//
// A Fetcher keeps one bare cache repository per repository URL under its
// cache directory, shared by every application that uses the URL, and
// materialises each commit it serves into its own directory:
//
//	<CacheDir>/<repo-key>/repo/            bare repository (objects and refs)
//	<CacheDir>/<repo-key>/trees/<commit>/  the tree at <commit>, read-only by convention
//
// Every Fetch lists the remote's refs first (ls-remote), which is cheap, and
// only fetches when the commit it resolves to is not already cached; a full
// commit SHA that is already cached needs no remote at all.
//
// Each returned Revision leases its tree: only trees nobody holds are pruned,
// so a render reading one is never left with half a tree because another
// application's fetch of the same repository moved on. Callers Release the
// Revision when they are done reading.
//
// # Deadlines
//
// The listing is bounded by Options.RemoteTimeout (default 30s) and a fetch
// of objects by Options.FetchTimeout (default 5m). A remote that accepts the
// connection and never answers fails within its deadline with
// ErrUnreachable, and the repository's lock is free again at that moment:
// other applications of the same repository get the failure (its backoff) at
// once, and other repositories never wait on it. Over HTTP the context
// bounds each request; a local repository's git-upload-pack is killed (see
// Local repositories for the in-process read without git); an
// SSH connection carries the deadline itself, since go-git's handshake takes
// no context.
//
// # Credentials
//
// Credentials are read from files, on every fetch so that a rotated secret
// takes effect without a restart, and never from the command line or the
// applications file itself. When an application names no credentials, these
// environment variables supply default file paths:
//
//	FLOTILLA_GIT_USERNAME_FILE     HTTPS user name (default "git")
//	FLOTILLA_GIT_PASSWORD_FILE     HTTPS password or token
//	FLOTILLA_GIT_SSH_KEY_FILE      SSH private key (unencrypted)
//	FLOTILLA_GIT_KNOWN_HOSTS_FILE  known_hosts pinning the SSH host keys
//
//	FLOTILLA_GIT_CREDENTIAL_HOSTS  hosts (host or host:port, comma-separated) the defaults are for
//
// HTTPS credentials are used for http:// and https:// URLs, SSH credentials
// for ssh:// and git@host:path URLs. The defaults are used only for https and
// ssh URLs whose host is listed; with no host listed they are used nowhere.
// An SSH key without a known_hosts file is refused: host keys are always
// verified.
//
// # Tree budget
//
// A commit's tree is measured against Options.TreeBudget (files and
// directories, bytes, depth, largest file) before any of it is written, and
// refused with ErrTreeTooLarge past any limit: a few kilobytes of objects can
// describe millions of files. Writing it is bounded by Options.FetchTimeout.
//
// A tree within the budget is written whole, whatever the request's Path, so
// that files outside it (../common.env) can be read. A tree over it is still
// served to a request naming a Path when that directory alone is within the
// same budget: only it is written, at its place, into a directory of its own,
// and Revision.Partial names it; files outside it are absent. So a git bomb
// in one directory of a monorepo refuses only the requests that read it:
//
//	<CacheDir>/<repo-key>/trees/<commit>-<path digest>/<path>/  only <path>
//
// Partial trees are leased and pruned with their commit's whole tree, as one.
//
// # Local repositories
//
// A plain path or a file:// URL names a repository on this machine (a work
// tree or a bare repository). Where git is installed, go-git reads it by
// running git-upload-pack, as git does. Where it is not — the controller's
// image has no git program — go-git's own server reads it in this process,
// under a URL scheme of Flotilla's own (see localRemote), so go-git's file
// transport is left as it is for every other user in the process. The
// choice is made on every fetch.
//
// The in-process read honours the fetch's deadline as far as go-git allows:
// the server walks the objects to send without looking at the context, so
// the call returns at the deadline and that walk finishes in the
// background, reading only the local repository; the pack is streamed
// through a reader that stops at the deadline. What is fetched lands in
// the cache as from any remote, and the tree budget applies to it alike.
//
// Pushing to a local repository (Commit, Propose) needs git-receive-pack:
// without git it fails with ErrLocalPushNeedsGit. go-git's server would
// update the branch without checking that it still points where the client
// saw it, and would move a work tree's checked-out branch under it; git
// refuses both.
//
// # Errors
//
// Every error Fetch returns has passed through Sanitize: URL user info,
// query strings, token-like strings and the credential values in use are
// removed. Failures wrap ErrRevisionNotFound or ErrUnreachable where they
// apply.
package source
