package chartengine

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/flotilla-gitops/flotilla/fault"
)

// ChartsDir holds a chart's vendored subcharts: directories and packaged
// archives.
const ChartsDir = "charts"

// maxDepth bounds how deep subcharts nest, and maxSubcharts how many one
// render may hold: a chart is untrusted, and its dependencies could
// otherwise name each other forever.
const (
	maxDepth     = 8
	maxSubcharts = 64
)

// Resolver fetches a dependency from a chart repository: the newest
// version of name at repoURL matching constraint, verified and loaded. It
// is asked only for a dependency that is not vendored in charts/ and is
// not a file:// path. A render without one refuses such a dependency.
type Resolver func(repoURL, name, constraint string) (*Chart, error)

// LoadFetched loads a chart that was fetched into root/dir (a chart
// repository's cache); origin names it in messages in place of its path
// on disk, such as "chart redis 7.2.1 from https://charts.example.com".
func LoadFetched(root, dir, origin string) (*Chart, error) {
	c, err := Load(root, dir)
	if err != nil {
		return nil, err
	}
	c.shown = origin
	c.root = "" // a file:// dependency must not reach into the cache
	c.fetched = [2]string{root, dir}
	return c, nil
}

// Fetched reports where LoadFetched read the chart from and how it is
// named, so another process can load the same chart; root is "" for a
// chart LoadFetched did not load.
func (c *Chart) Fetched() (root, dir, origin string) {
	return c.fetched[0], c.fetched[1], c.shown
}

// subchart is one dependency of a chart, resolved.
type subchart struct {
	key   string // alias, else name: its values key
	index int    // its place in dependencies, for messages
	dep   Dependency
	chart *Chart
}

// resolveDeps finds every dependency of c: vendored in charts/ (a
// directory named for it, or an archive of a matching version), else at a
// file:// path inside the repository, else through d.Resolve from a chart
// repository. Each must be the chart the entry names, at a version its
// constraint allows.
func (c *Chart) resolveDeps(d Dir) ([]subchart, error) {
	if len(c.Meta.Dependencies) == 0 {
		return nil, nil
	}
	archives, err := c.vendoredArchives()
	if err != nil {
		return nil, err
	}
	out := make([]subchart, 0, len(c.Meta.Dependencies))
	for i, dep := range c.Meta.Dependencies {
		field := "dependencies[" + strconv.Itoa(i) + "]"
		bad := func(format string, args ...any) error {
			return &fault.Error{File: c.rel(ChartFile), Field: field, Err: fmt.Errorf("%w: chart %s: dependency %s: %s", ErrInvalidChart, c.Meta.Name, dep.Name, fmt.Sprintf(format, args...))}
		}
		constraint, _ := semver.NewConstraint(dep.Version) // parseMetadata checked it
		sub, err := c.findDep(dep, constraint, archives, d, bad)
		if err != nil {
			return nil, err
		}
		if sub.Meta.Name != dep.Name {
			return nil, bad("%s holds chart %q", sub.shownDir(), sub.Meta.Name)
		}
		v, _ := semver.NewVersion(sub.Meta.Version)
		if !constraint.Check(v) {
			return nil, bad("%s is version %s, which does not match %q", sub.shownDir(), sub.Meta.Version, dep.Version)
		}
		key := dep.Name
		if dep.Alias != "" {
			key = dep.Alias
		}
		out = append(out, subchart{key: key, index: i, dep: dep, chart: sub})
	}
	return out, nil
}

func (c *Chart) findDep(dep Dependency, constraint *semver.Constraints, archives []*Chart, d Dir, bad func(string, ...any) error) (*Chart, error) {
	dir := ChartsDir + "/" + dep.Name
	if _, ok := c.all[dir+"/"+ChartFile]; ok {
		return c.subtree(dir)
	}
	var best *Chart
	var seen []string
	for _, a := range archives {
		if a.Meta.Name != dep.Name {
			continue
		}
		v, _ := semver.NewVersion(a.Meta.Version)
		seen = append(seen, a.Meta.Version)
		if constraint.Check(v) && (best == nil || v.GreaterThan(semver.MustParse(best.Meta.Version))) {
			best = a
		}
	}
	if best != nil {
		return best, nil
	}
	repo := dep.Repository
	switch {
	case len(seen) > 0 && repo == "":
		slices.Sort(seen)
		return nil, bad("%s/ holds versions %s, none matches %q", c.rel(ChartsDir), strings.Join(seen, ", "), dep.Version)
	case strings.HasPrefix(repo, "file://"):
		if c.root == "" {
			return nil, bad("a file:// dependency of a chart that is not in the repository (a package, a chart repository) must be vendored in %s/", ChartsDir)
		}
		rel := strings.TrimPrefix(repo, "file://")
		if path.IsAbs(rel) {
			return nil, bad("file:// path %q must be relative to the chart", rel)
		}
		return Load(c.root, path.Join(c.Path, rel))
	case strings.HasPrefix(repo, "https://") || strings.HasPrefix(repo, "http://"):
		if d.Resolve == nil {
			return nil, bad("not vendored in %s/, and this render has no chart repository client to fetch it from %s", ChartsDir, repo)
		}
		sub, err := d.Resolve(repo, dep.Name, dep.Version)
		if err != nil {
			var fe *fault.Error
			if errors.As(err, &fe) {
				return nil, err
			}
			return nil, &fault.Error{File: c.rel(ChartFile), Field: "dependencies", Err: fmt.Errorf("chart %s: dependency %s: %w", c.Meta.Name, dep.Name, err)}
		}
		return sub, nil
	case repo == "":
		return nil, bad("not found in %s/ and no repository is named", c.rel(ChartsDir))
	}
	return nil, &fault.Error{File: c.rel(ChartFile), Field: "dependencies[].repository", Err: fmt.Errorf(
		"%w: chart %s: dependency %s: repository %q: only https://, http:// and file:// repositories are supported", ErrUnsupported, c.Meta.Name, dep.Name, repo)}
}

// subtree is the vendored chart in directory dir of c.
func (c *Chart) subtree(dir string) (*Chart, error) {
	sub := &Chart{Path: path.Join(c.Path, dir), root: c.root, all: map[string][]byte{}}
	if c.shown != "" {
		sub.shown = c.shown + "/" + dir
	}
	for name, data := range c.all {
		if rest, ok := strings.CutPrefix(name, dir+"/"); ok {
			sub.all[rest] = data
		}
	}
	return sub, sub.build()
}

// vendoredArchives loads the packaged charts directly in charts/.
func (c *Chart) vendoredArchives() ([]*Chart, error) {
	var out []*Chart
	for _, name := range c.Files() {
		rest, ok := strings.CutPrefix(name, ChartsDir+"/")
		if !ok || strings.Contains(rest, "/") || !strings.HasSuffix(rest, ".tgz") {
			continue
		}
		a, err := LoadArchive(bytes.NewReader(c.all[name]), c.rel(name))
		if err != nil {
			return nil, err
		}
		a.shown = c.rel(name) + ":" + a.Meta.Name
		out = append(out, a)
	}
	return out, nil
}

// unit is one chart of a render, the chart itself or a subchart, with the
// values its templates see.
type unit struct {
	chart *Chart
	// prefix is where the unit's templates and files are named in the
	// render: "" for the chart, "charts/<key>/" (nested) for a subchart.
	prefix string
	vals   map[string]any
}

// units lists c and every enabled subchart, depth first, each with its
// values scoped as Helm scopes them: a subchart sees its own values.yaml
// with the parent's values under its key laid over it, and `global` from
// the parent over its own. The parent's values under that key become the
// merged ones, so the parent's templates see the subchart's defaults too.
func (c *Chart) units(d Dir, vals map[string]any) ([]*unit, error) {
	var out []*unit
	var walk func(ch *Chart, prefix string, vals map[string]any, depth int) error
	walk = func(ch *Chart, prefix string, vals map[string]any, depth int) error {
		out = append(out, &unit{chart: ch, prefix: prefix, vals: vals})
		if len(out) > maxSubcharts {
			return &fault.Error{File: c.rel(ChartFile), Err: fmt.Errorf("%w: chart %s: more than %d subcharts", ErrInvalidChart, c.Meta.Name, maxSubcharts)}
		}
		if len(ch.Meta.Dependencies) > 0 && depth >= maxDepth {
			return &fault.Error{File: ch.rel(ChartFile), Field: "dependencies", Err: fmt.Errorf("%w: chart %s: subcharts nest more than %d deep", ErrInvalidChart, ch.Meta.Name, maxDepth)}
		}
		subs, err := ch.resolveDeps(d)
		if err != nil {
			return err
		}
		for _, s := range subs {
			on, err := enabled(vals, s.dep.Condition)
			if err != nil {
				return &fault.Error{File: ch.rel(ChartFile), Field: "dependencies[" + strconv.Itoa(s.index) + "].condition", Err: fmt.Errorf("%w: chart %s: %v", ErrValues, ch.Meta.Name, err)}
			}
			if !on {
				continue
			}
			sv, err := scopeValues(s, vals)
			if err != nil {
				return &fault.Error{File: ch.rel(ValuesFile), Field: s.key, Err: fmt.Errorf("%w: chart %s: %v", ErrValues, ch.Meta.Name, err)}
			}
			vals[s.key] = sv
			if err := walk(s.chart, prefix+ChartsDir+"/"+s.key+"/", sv, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(c, "", vals, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// valuesPath is where a unit's values sit in the top chart's values:
// "charts/cache/charts/inner/" is cache.inner.
func valuesPath(prefix string) string {
	if prefix == "" {
		return ""
	}
	parts := strings.Split(strings.Trim(prefix, "/"), "/")
	var keys []string
	for i := 1; i < len(parts); i += 2 { // charts/<key>/charts/<key>/...
		keys = append(keys, parts[i])
	}
	return strings.Join(keys, ".")
}

// scopeValues is what subchart s sees as .Values.
func scopeValues(s subchart, parent map[string]any) (map[string]any, error) {
	sv := copyValues(s.chart.Values)
	if pv, ok := parent[s.key]; ok && pv != nil {
		m, ok := pv.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("value %s is %s; it holds the values of subchart %s and must be a mapping", s.key, describe(pv), s.key)
		}
		mergeValues(sv, copyValues(m))
	}
	own, hasOwn := sv["global"]
	pg, hasParent := parent["global"]
	if !hasOwn && !hasParent {
		return sv, nil
	}
	g := map[string]any{}
	for _, layer := range []any{own, pg} {
		if layer == nil {
			continue
		}
		m, ok := layer.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("value global is %s, not a mapping", describe(layer))
		}
		mergeValues(g, copyValues(m))
	}
	sv["global"] = g
	return sv, nil
}

// enabled evaluates a dependency's condition against its parent's values:
// comma-separated dotted paths, the first that is set decides; none set
// (or no condition) means enabled.
func enabled(vals map[string]any, condition string) (bool, error) {
	if strings.TrimSpace(condition) == "" {
		return true, nil
	}
	for _, p := range strings.Split(condition, ",") {
		p = strings.TrimSpace(p)
		parts, err := SplitKey(p)
		if err != nil {
			return false, fmt.Errorf("condition %q: %v", condition, err)
		}
		var v any = vals
		for _, part := range parts {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
		switch v := v.(type) {
		case nil:
			continue
		case bool:
			return v, nil
		default:
			return false, fmt.Errorf("condition %s is %s, not true or false", p, describe(v))
		}
	}
	return true, nil
}

// relocateFiles rewrites the `file:` and `env_file` paths in a subchart's
// output, which are relative to the subchart, to where the subchart's
// files are in the render view (under prefix), so a subchart reads its own
// files/ and not its parent's. A path that leaves the subchart is refused;
// field names it.
func relocateFiles(doc map[string]any, prefix string) (string, error) {
	move := func(field, p string) (string, error) {
		if path.IsAbs(p) {
			return p, nil // the compose renderer refuses it, naming the field
		}
		np := path.Join(prefix, p)
		if !strings.HasPrefix(np, prefix) {
			return "", fmt.Errorf("%s: %q leaves the subchart", field, p)
		}
		return np, nil
	}
	for _, kind := range []string{"configs", "secrets"} {
		objs, _ := doc[kind].(map[string]any)
		for _, k := range sortedKeys(objs) {
			o, _ := objs[k].(map[string]any)
			if f, ok := o["file"].(string); ok {
				field := kind + "." + k + ".file"
				np, err := move(field, f)
				if err != nil {
					return field, err
				}
				o["file"] = np
			}
		}
	}
	svcs, _ := doc["services"].(map[string]any)
	for _, k := range sortedKeys(svcs) {
		svc, _ := svcs[k].(map[string]any)
		field := "services." + k + ".env_file"
		switch ef := svc["env_file"].(type) {
		case string:
			np, err := move(field, ef)
			if err != nil {
				return field, err
			}
			svc["env_file"] = np
		case []any:
			for i, e := range ef {
				switch e := e.(type) {
				case string:
					np, err := move(field, e)
					if err != nil {
						return field, err
					}
					ef[i] = np
				case map[string]any:
					if p, ok := e["path"].(string); ok {
						np, err := move(field, p)
						if err != nil {
							return field, err
						}
						e["path"] = np
					}
				}
			}
		}
	}
	return "", nil
}
