package chartengine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/source"
)

// Names of a chart's parts, relative to its directory.
const (
	ChartFile    = "Chart.yaml"
	ValuesFile   = "values.yaml"
	SchemaFile   = "values.schema.json"
	TemplatesDir = "templates"
	FilesDir     = "files"
)

// notesFile is Helm's post-install message, which a render ignores.
const notesFile = TemplatesDir + "/NOTES.txt"

// APIVersion is the only Chart.yaml apiVersion this build reads: Helm 3's.
const APIVersion = "v2"

// Limits on what one chart may hold, so a hostile repository cannot make a
// render read without bound.
const (
	maxChartFiles = 4096
	maxChartBytes = 32 << 20
)

// Sentinels for errors.Is on the Err of a *fault.Error this package
// returns. Messages are more specific.
var (
	// ErrInvalidChart: Chart.yaml is missing, unreadable or breaks a rule.
	ErrInvalidChart = errors.New("invalid chart")
	// ErrSymlink: the chart holds a symbolic link, which could point out of it.
	ErrSymlink = errors.New("symlinks are not allowed in a chart")
	// ErrTemplate: a template does not parse or fails to execute.
	ErrTemplate = errors.New("template error")
	// ErrValues: a values file or an override is malformed, or the merged
	// values break the chart's schema.
	ErrValues = errors.New("invalid values")
	// ErrOutput: a template's output is not a compose mapping, or two
	// templates set one field differently.
	ErrOutput = errors.New("invalid template output")
	// ErrUnsupported: a chart feature this build does not implement yet.
	ErrUnsupported = errors.New("not supported yet")
)

// Metadata is Chart.yaml. Unknown keys are refused.
type Metadata struct {
	// APIVersion must be "v2".
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	// Name is lowercase letters, digits, '-', '_' and '.', at most 63
	// characters. Required.
	Name string `yaml:"name" json:"name"`
	// Version is the chart's own SemVer 2 version. Required.
	Version string `yaml:"version" json:"version"`
	// AppVersion is the version of what the chart deploys; free text.
	AppVersion string `yaml:"appVersion,omitempty" json:"appVersion,omitempty"`
	// Description is one line for people.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Dependencies are subcharts. They are validated, and a chart that
	// declares any is refused at render: subcharts are not rendered yet.
	Dependencies []Dependency `yaml:"dependencies,omitempty" json:"dependencies,omitempty"`
}

// Dependency is one entry of Chart.yaml's dependencies.
type Dependency struct {
	Name       string `yaml:"name" json:"name"`
	Version    string `yaml:"version" json:"version"`
	Repository string `yaml:"repository,omitempty" json:"repository,omitempty"`
	Condition  string `yaml:"condition,omitempty" json:"condition,omitempty"`
	Alias      string `yaml:"alias,omitempty" json:"alias,omitempty"`
}

// chartNameRE is what a chart name may be: it ends up in archive names.
var chartNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// Chart is a chart directory read into memory.
type Chart struct {
	// Path is the chart directory relative to the repository root,
	// slash-separated: how messages name its files.
	Path string
	Meta Metadata
	// Values are values.yaml, or empty.
	Values map[string]any

	root      string            // repository root on disk; "" for an archive
	shown     string            // how messages name the chart when not by Path
	schema    []byte            // values.schema.json, nil when absent
	templates map[string]string // "templates/x.yaml" → text
	files     map[string][]byte // "files/x" → content
	all       map[string][]byte // every regular file, for packaging
	fetched   [2]string         // root and dir LoadFetched read it from
}

// Load reads the chart at dir, relative to the repository root, and
// checks Chart.yaml. Nothing outside root is read, and a symlink anywhere
// in the chart is refused.
func Load(root, dir string) (*Chart, error) {
	if dir == "" {
		dir = "."
	}
	if filepath.IsAbs(dir) {
		return nil, &fault.Error{File: dir, Err: fmt.Errorf("chart path must be relative: %w", source.ErrOutsideRepository)}
	}
	dir = filepath.ToSlash(filepath.Clean(dir))
	abs, err := source.Contain(root, filepath.FromSlash(dir))
	if err != nil {
		return nil, &fault.Error{File: dir, Err: err}
	}
	c := &Chart{Path: dir, root: root, all: map[string][]byte{}}
	if err := c.readTree(abs); err != nil {
		return nil, err
	}
	return c, c.build()
}

// build sorts c.all into templates and files and reads Chart.yaml, values
// and the schema. Entries under charts/ belong to subcharts and are left
// to them.
func (c *Chart) build() error {
	c.templates, c.files = map[string]string{}, map[string][]byte{}
	for rel, data := range c.all {
		switch {
		case rel == notesFile:
			// Helm prints it after an install; there is no one to print
			// it to here, and it is not a compose fragment.
		case strings.HasPrefix(rel, TemplatesDir+"/"):
			c.templates[rel] = string(data)
		case strings.HasPrefix(rel, FilesDir+"/"):
			c.files[rel] = data
		}
	}
	meta, ok := c.all[ChartFile]
	if !ok {
		return &fault.Error{File: c.rel(ChartFile), Err: fmt.Errorf("%w: no %s in %s: %w", ErrInvalidChart, ChartFile, c.shownDir(), fs.ErrNotExist)}
	}
	if err := c.parseMetadata(meta); err != nil {
		return err
	}
	if v, ok := c.all[ValuesFile]; ok {
		vals, err := parseValues(c.rel(ValuesFile), v)
		if err != nil {
			return err
		}
		c.Values = vals
	}
	if c.Values == nil {
		c.Values = map[string]any{}
	}
	if s, ok := c.all[SchemaFile]; ok {
		c.schema = s
		if _, err := compileSchema(c.rel(SchemaFile), s); err != nil {
			return err
		}
	}
	return nil
}

// rel names a chart file by its repository path, or for a chart that did
// not come from the repository (an archive, a chart repository) by where
// it came from.
func (c *Chart) rel(name string) string {
	if c.shown != "" {
		return c.shown + "/" + name
	}
	return path.Join(c.Path, name)
}

// shownDir names the chart directory in messages.
func (c *Chart) shownDir() string {
	if c.shown != "" {
		return c.shown
	}
	return c.Path
}

// readTree reads every regular file under abs into c, refusing symlinks
// and anything that is neither a file nor a directory.
func (c *Chart) readTree(abs string) error {
	st, err := os.Stat(abs)
	if err != nil || !st.IsDir() {
		return &fault.Error{File: c.Path, Err: fmt.Errorf("%w: chart directory not found: %w", ErrInvalidChart, fs.ErrNotExist)}
	}
	total := 0
	return filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(abs, p)
		rel = filepath.ToSlash(rel)
		if err != nil {
			return &fault.Error{File: c.rel(rel), Err: err}
		}
		if rel == "." {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return &fault.Error{File: c.rel(rel), Err: fmt.Errorf("%w: %s is a symlink", ErrSymlink, rel)}
		}
		if d.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return &fault.Error{File: c.rel(rel), Err: fmt.Errorf("%w: %s is not a regular file", ErrInvalidChart, rel)}
		}
		if len(c.all) >= maxChartFiles {
			return &fault.Error{File: c.Path, Err: fmt.Errorf("%w: more than %d files", ErrInvalidChart, maxChartFiles)}
		}
		data, err := readLimited(p, maxChartBytes-total)
		if err != nil {
			return &fault.Error{File: c.rel(rel), Err: err}
		}
		total += len(data)
		c.all[rel] = data
		return nil
	})
}

func readLimited(p string, room int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(room)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > room {
		return nil, fmt.Errorf("%w: the chart is larger than %d MiB", ErrInvalidChart, maxChartBytes>>20)
	}
	return data, nil
}

// yamlLineRE finds the line yaml.v3 names in its messages.
var yamlLineRE = regexp.MustCompile(`line (\d+): `)

// yamlFault is a YAML problem in file, with the line yaml.v3 named.
func yamlFault(file string, kind, err error) *fault.Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	fe := &fault.Error{File: file}
	if m := yamlLineRE.FindStringSubmatchIndex(msg); m != nil {
		fe.Line, _ = strconv.Atoi(msg[m[2]:m[3]])
		msg = msg[:m[0]] + msg[m[1]:]
	}
	fe.Err = fmt.Errorf("%w: %s", kind, strings.TrimSpace(msg))
	return fe
}

func (c *Chart) parseMetadata(data []byte) error {
	file := c.rel(ChartFile)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Metadata
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return &fault.Error{File: file, Err: fmt.Errorf("%w: the file is empty", ErrInvalidChart)}
		}
		return yamlFault(file, ErrInvalidChart, err)
	}
	lines := fieldLines(data)
	bad := func(field, format string, args ...any) error {
		return &fault.Error{File: file, Line: lines[field], Field: field, Err: fmt.Errorf("%w: %s", ErrInvalidChart, fmt.Sprintf(format, args...))}
	}
	switch {
	case m.APIVersion == "":
		return bad("apiVersion", "required; set it to %q", APIVersion)
	case m.APIVersion != APIVersion:
		return bad("apiVersion", "%q is not supported; this build reads %q", m.APIVersion, APIVersion)
	case m.Name == "":
		return bad("name", "required")
	case len(m.Name) > 63 || !chartNameRE.MatchString(m.Name):
		return bad("name", "%q must be at most 63 lowercase letters, digits, '-', '_' and '.', starting with a letter or digit", m.Name)
	case m.Version == "":
		return bad("version", "required: a SemVer 2 version such as 0.1.0")
	}
	if _, err := semver.StrictNewVersion(m.Version); err != nil {
		return bad("version", "%q is not a SemVer 2 version (such as 1.2.3): %v", m.Version, err)
	}
	seen := map[string]bool{}
	for i, d := range m.Dependencies {
		f := "dependencies[" + strconv.Itoa(i) + "]"
		name := d.Name
		if d.Alias != "" {
			name = d.Alias
		}
		switch {
		case d.Name == "":
			return bad(f+".name", "required")
		case !chartNameRE.MatchString(d.Name):
			return bad(f+".name", "%q is not a chart name", d.Name)
		case d.Alias != "" && !chartNameRE.MatchString(d.Alias):
			return bad(f+".alias", "%q is not a chart name", d.Alias)
		case seen[name]:
			return bad(f+".name", "%q is listed twice (use alias to tell them apart)", name)
		case d.Version == "":
			return bad(f+".version", "required: a SemVer constraint such as ~1.2")
		}
		if _, err := semver.NewConstraint(d.Version); err != nil {
			return bad(f+".version", "%q is not a SemVer constraint: %v", d.Version, err)
		}
		seen[name] = true
	}
	c.Meta = m
	return nil
}

// fieldLines maps each top-level key of a YAML mapping, and each
// dependencies[i] and its keys, to the line it is written on.
func fieldLines(data []byte) map[string]int {
	out := map[string]int{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return out
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		out[k.Value] = k.Line
		if k.Value == "dependencies" && v.Kind == yaml.SequenceNode {
			for j, item := range v.Content {
				p := "dependencies[" + strconv.Itoa(j) + "]"
				out[p] = item.Line
				for n := 0; item.Kind == yaml.MappingNode && n+1 < len(item.Content); n += 2 {
					out[p+"."+item.Content[n].Value] = item.Content[n].Line
				}
			}
		}
	}
	return out
}

// Files returns the chart's regular files, sorted, relative to its
// directory: what a package holds.
func (c *Chart) Files() []string {
	names := make([]string, 0, len(c.all))
	for n := range c.all {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// File returns the content of one of Files.
func (c *Chart) File(name string) []byte { return c.all[name] }
