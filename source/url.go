package source

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/flotilla-gitops/flotilla/redact"
)

// location is a repository URL parsed once: what go-git is given, the cache
// key, and the form shown to people.
type location struct {
	// remote is the repository's URL, a local path made absolute; url()
	// is what go-git is given.
	remote string
	// protocol is go-git's: http, https, ssh, git or file.
	protocol string
	// user is the user name in the URL, if any (ssh uses it).
	user string
	// hostname (lowercase) and port (the protocol's default when the URL
	// names none) of a remote; empty and 0 for a local repository.
	hostname string
	port     int
	// key identifies the repository however its URL was spelled.
	key string
	// dir is the cache directory name derived from key.
	dir string
	// safe is the URL for messages and logs: no user info, no query.
	safe string
}

// url is the URL go-git is given for the repository: remote, except that
// a local repository is read in process when git is not installed (see
// localRemote), decided on each call.
func (l location) url() string {
	if l.protocol == "file" {
		return localRemote(l.remote)
	}
	return l.remote
}

// parseLocation accepts https://, http://, ssh://, git://, git@host:path,
// file:// and plain local paths.
func parseLocation(raw string) (location, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return location{}, fmt.Errorf("repository URL is empty")
	}
	safe := redact.Text(raw)
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return location{}, fmt.Errorf("repository URL %s: invalid", safe)
		}
		switch strings.ToLower(u.Scheme) {
		case "http", "https", "ssh", "git", "file":
		default:
			return location{}, fmt.Errorf("repository URL %s: unsupported scheme %q", safe, u.Scheme)
		}
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return location{}, fmt.Errorf("repository URL %s: invalid", safe)
	}
	loc := location{remote: raw, protocol: ep.Protocol, user: ep.User, safe: safe}
	if ep.Protocol == "file" {
		abs, err := filepath.Abs(ep.Path)
		if err != nil {
			return location{}, fmt.Errorf("repository path %s: %w", safe, err)
		}
		loc.remote = abs
		loc.safe = abs
		loc.key = "file://" + trimRepoPath(filepath.ToSlash(abs))
	} else {
		host := strings.ToLower(ep.Host)
		loc.hostname, loc.port = host, ep.Port
		if loc.port == 0 {
			loc.port = defaultPort(ep.Protocol)
		}
		if ep.Port != 0 && ep.Port != defaultPort(ep.Protocol) {
			host += ":" + strconv.Itoa(ep.Port)
		}
		p := ep.Path
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		loc.key = ep.Protocol + "://" + host + trimRepoPath(p)
	}
	loc.dir = cacheDirName(loc.key)
	return loc, nil
}

// trimRepoPath makes /org/repo, /org/repo/ and /org/repo.git the same key.
func trimRepoPath(p string) string {
	p = path.Clean(p)
	p = strings.TrimSuffix(p, ".git")
	return strings.TrimSuffix(p, "/")
}

func defaultPort(protocol string) int {
	switch protocol {
	case "http":
		return 80
	case "https":
		return 443
	case "ssh":
		return 22
	case "git":
		return 9418
	}
	return 0
}

// cacheDirName is readable (the last path parts of the key) and unique (a
// hash of the whole key), and safe as a single path element.
func cacheDirName(key string) string {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	for _, r := range key[strings.Index(key, "://")+3:] {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	slug := strings.Trim(b.String(), "-.")
	if len(slug) > 48 {
		slug = strings.TrimLeft(slug[len(slug)-48:], "-.")
	}
	if slug == "" {
		slug = "repo"
	}
	return slug + "-" + hex.EncodeToString(sum[:])[:12]
}
