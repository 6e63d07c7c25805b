package source

import (
	"strings"
)

// RepositoryKey identifies the repository a URL names, for telling whether
// two spellings of a URL are one repository, as a webhook must when it
// compares the URL a forge sends with the one an application declares. It
// ignores the scheme, the user, the port, a trailing ".git" or "/" and the
// case of host and path, so https://GitHub.com/org/repo.git and
// git@github.com:org/repo name the same key. A local repository keeps its
// "file://" form. The key is for comparing only, never for fetching.
//
// Ports and case are dropped although they can in principle tell two
// repositories apart: forges serve ssh and https on different ports, and
// treat owner and repository names case-insensitively. A false match costs
// one needless fetch; a missed one costs a polling interval.
func RepositoryKey(raw string) (string, error) {
	loc, err := parseLocation(raw)
	if err != nil {
		return "", err
	}
	if loc.protocol == "file" {
		return loc.key, nil
	}
	// loc.key is protocol://host[:port]/path with the host already lowercase.
	_, rest, _ := strings.Cut(loc.key, "://")
	host, p, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "]"); strings.HasPrefix(host, "[") && i > 0 {
		host = host[:i+1] // [::1]:2222
	} else {
		host, _, _ = strings.Cut(host, ":")
	}
	return host + "/" + strings.ToLower(p), nil
}

// SameRepository reports whether a and b name one repository by
// RepositoryKey. A URL that does not parse matches nothing.
func SameRepository(a, b string) bool {
	ka, err := RepositoryKey(a)
	if err != nil {
		return false
	}
	kb, err := RepositoryKey(b)
	return err == nil && ka == kb
}
