package chartrepo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// originsFile lists, one a line, the repositories (redacted base URLs)
// that served the chart of a cache directory. The cache is keyed by
// digest; this is what ties an entry to where it came from, so an offline
// fallback never takes a same-named chart another repository left.
const originsFile = ".origins"

// served records that repo served the chart unpacked at root. A failure
// to record only loses the entry's use as an offline fallback.
func (c *Client) served(root, repo string) {
	c.unpack.Lock()
	defer c.unpack.Unlock()
	repo = originKey(repo)
	have := readOrigins(root)
	if slices.Contains(have, repo) {
		return
	}
	f, err := os.OpenFile(filepath.Join(root, originsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintln(f, repo)
	f.Close()
}

// originKey is repo as origins hold it: without a trailing slash.
func originKey(repo string) string { return strings.TrimRight(repo, "/") }

func readOrigins(root string) []string {
	data, err := os.ReadFile(filepath.Join(root, originsFile))
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Cached returns the newest chart called name in the cache whose version
// matches constraint and that repoURL itself served, without asking any
// repository: what an offline render can fall back on. A chart of the
// same name from another repository is never returned, nor one cached
// before origins were recorded.
func (c *Client) Cached(repoURL, name, constraint string) (*Chart, error) {
	cons, err := semver.NewConstraint(constraint)
	if err != nil {
		return nil, fmt.Errorf("%w: version %q is not a SemVer constraint: %w", ErrNoVersion, constraint, err)
	}
	base, err := parseRepoURL(repoURL, true)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	repo := originKey(redactURL(base))
	dirs, err := os.ReadDir(c.o.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("chart cache: %w", err)
	}
	var best *Chart
	var bestVer *semver.Version
	for _, d := range dirs {
		root := filepath.Join(c.o.CacheDir, d.Name())
		if !d.IsDir() || len(d.Name()) != sha256.Size*2 || !cached(root, name) || !slices.Contains(readOrigins(root), repo) {
			continue
		}
		ch, err := chartengine.Load(root, name)
		if err != nil {
			continue
		}
		v, err := semver.NewVersion(ch.Meta.Version)
		if err != nil || !cons.Check(v) || bestVer != nil && !v.GreaterThan(bestVer) {
			continue
		}
		best, bestVer = &Chart{Name: name, Version: ch.Meta.Version, AppVersion: ch.Meta.AppVersion, Digest: "sha256:" + d.Name(), Root: root}, v
	}
	if best == nil {
		return nil, fmt.Errorf("%w: the cache holds no version of %q from %s matching %q", ErrNoVersion, name, repo, constraint)
	}
	return best, nil
}
