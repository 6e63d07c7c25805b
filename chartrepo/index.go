package chartrepo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/chartengine"
)

// Index is a repository's index.yaml. Only the fields Flotilla uses are
// read; an index written by other tools carries more (keywords,
// maintainers, ...), which are ignored rather than refused, since the
// index is the repository's format and not Flotilla's.
type Index struct {
	APIVersion string             `yaml:"apiVersion"`
	Entries    map[string][]Entry `yaml:"entries"`
	Generated  string             `yaml:"generated,omitempty"`
}

// Entry is one version of one chart in an index.
type Entry struct {
	APIVersion  string   `yaml:"apiVersion,omitempty"`
	Name        string   `yaml:"name"`
	Version     string   `yaml:"version"`
	AppVersion  string   `yaml:"appVersion,omitempty"`
	Description string   `yaml:"description,omitempty"`
	Created     string   `yaml:"created,omitempty"`
	Digest      string   `yaml:"digest"`
	URLs        []string `yaml:"urls"`
}

// parseIndex reads an index.yaml.
func parseIndex(data []byte) (*Index, error) {
	var ix Index
	if err := yaml.Unmarshal(data, &ix); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadIndex, err)
	}
	if ix.APIVersion != "v1" {
		return nil, fmt.Errorf("%w: apiVersion %q, want v1", ErrBadIndex, ix.APIVersion)
	}
	return &ix, nil
}

// resolve picks the newest version of chart that satisfies constraint.
// Versions that are not SemVer are skipped; pre-releases match only a
// constraint that names one, as SemVer ranges have it.
func (ix *Index) resolve(chart, constraint string) (Entry, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: version %q is not a SemVer constraint: %w", ErrNoVersion, constraint, err)
	}
	entries, ok := ix.Entries[chart]
	if !ok || len(entries) == 0 {
		return Entry{}, fmt.Errorf("%w: the index has no chart %q", ErrNoVersion, chart)
	}
	var (
		best    Entry
		bestVer *semver.Version
		all     []string
	)
	for _, e := range entries {
		v, err := semver.NewVersion(e.Version)
		if err != nil {
			continue
		}
		all = append(all, e.Version)
		if c.Check(v) && (bestVer == nil || v.GreaterThan(bestVer)) {
			best, bestVer = e, v
		}
	}
	if bestVer == nil {
		slices.Sort(all)
		return Entry{}, fmt.Errorf("%w: no version of %q matches %q (the index has %s)", ErrNoVersion, chart, constraint, strings.Join(all, ", "))
	}
	if best.Name == "" {
		best.Name = chart
	}
	if best.Name != chart {
		return Entry{}, fmt.Errorf("%w: entry %s %s is named %q", ErrBadIndex, chart, best.Version, best.Name)
	}
	if len(best.URLs) == 0 {
		return Entry{}, fmt.Errorf("%w: %s %s has no urls", ErrBadIndex, chart, best.Version)
	}
	if _, err := digestHex(best.Digest); err != nil {
		return Entry{}, fmt.Errorf("%w: %s %s: %w", ErrBadIndex, chart, best.Version, err)
	}
	return best, nil
}

// digestHex is the lowercase hex sha256 of an index digest, which is
// written bare (as Helm writes it) or with a "sha256:" prefix.
func digestHex(d string) (string, error) {
	h := strings.ToLower(strings.TrimPrefix(d, "sha256:"))
	if len(h) != sha256.Size*2 {
		return "", fmt.Errorf("digest %q is not a sha256", d)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("digest %q is not a sha256", d)
	}
	return h, nil
}

// BuildIndex returns the index.yaml of the chart archives (*.tgz) in dir.
// Each archive is unpacked (with the limits every fetched archive has) and
// its Chart.yaml read, so an index only lists charts that load. An entry's
// URL is baseURL + "/" + the file name, or the bare file name (relative to
// the index) without baseURL. created is every entry's creation time and
// the index's generated time: the same archives and created give the same
// bytes.
func BuildIndex(dir, baseURL string, created time.Time) ([]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	stamp := created.UTC().Format(time.RFC3339)
	ix := Index{APIVersion: "v1", Entries: map[string][]Entry{}, Generated: stamp}
	seen := map[string]string{}
	for _, name := range names {
		e, err := indexEntry(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(name), err)
		}
		key := e.Name + " " + e.Version
		if other, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s and %s both hold %s %s", other, filepath.Base(name), e.Name, e.Version)
		}
		seen[key] = filepath.Base(name)
		u := filepath.Base(name)
		if baseURL != "" {
			u = strings.TrimRight(baseURL, "/") + "/" + u
		}
		e.URLs, e.Created = []string{u}, stamp
		ix.Entries[e.Name] = append(ix.Entries[e.Name], e)
	}
	for _, es := range ix.Entries {
		slices.SortFunc(es, func(a, b Entry) int { return compareVersions(b.Version, a.Version) })
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(ix); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// indexEntry reads one archive's entry: its digest and Chart.yaml.
func indexEntry(name string) (Entry, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return Entry{}, err
	}
	tmp, err := os.MkdirTemp("", "flotilla-index-*")
	if err != nil {
		return Entry{}, err
	}
	defer os.RemoveAll(tmp)
	top, err := unpack(bytes.NewReader(data), tmp, Limits{})
	if err != nil {
		return Entry{}, err
	}
	c, err := chartengine.Load(tmp, top)
	if err != nil {
		return Entry{}, err
	}
	if c.Meta.Name != top {
		return Entry{}, fmt.Errorf("%w: chart %q is packaged under %q", ErrBadArchive, c.Meta.Name, top)
	}
	sum := sha256.Sum256(data)
	return Entry{
		APIVersion:  c.Meta.APIVersion,
		Name:        c.Meta.Name,
		Version:     c.Meta.Version,
		AppVersion:  c.Meta.AppVersion,
		Description: c.Meta.Description,
		Digest:      hex.EncodeToString(sum[:]),
	}, nil
}

// compareVersions orders SemVer versions, and anything else after them by
// text, so an index's order never depends on the order of the files.
func compareVersions(a, b string) int {
	va, erra := semver.NewVersion(a)
	vb, errb := semver.NewVersion(b)
	switch {
	case erra == nil && errb == nil:
		if c := va.Compare(vb); c != 0 {
			return c
		}
	case erra == nil:
		return 1
	case errb == nil:
		return -1
	}
	return strings.Compare(a, b)
}
