package chartengine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/source"
)

// Dir is a chart inside a repository checkout, with the values one
// application gives it.
type Dir struct {
	// Root is the checkout root: no file outside it is read.
	Root string
	// Path is the chart directory relative to Root.
	Path string
	// ValueFiles are relative to Path and merged in order over values.yaml.
	// They may lie elsewhere in the repository, never outside it.
	ValueFiles []string
	// ExtraValueFiles come from other roots (a second repository's
	// checkout) and are merged in order after ValueFiles.
	ExtraValueFiles []ValueFile
	// Values are laid over the value files.
	Values map[string]any
	// Set are dotted keys ("image.tag") laid over everything else.
	Set map[string]any
	// Decrypt sees every value file and every file the compose output
	// reads from files/, as compose.Dir.Decrypt does.
	Decrypt compose.DecryptFunc
	// SealKey keys the digests that stand for decrypted content, as
	// compose.Dir.SealKey does; it also keys the values digest when a
	// value file was decrypted.
	SealKey []byte
	// Limits bound what the compose render of the output reads and writes.
	Limits compose.Limits
	// Resolve fetches dependencies from chart repositories; nil refuses a
	// dependency that is neither vendored nor a file:// path.
	Resolve Resolver
	// APIVersion is passed to the compose render, as compose.Dir's is:
	// each field that engine API cannot carry is named in the warnings.
	APIVersion string
	// SecretRef resolves the store references (x-flotilla.secretRef) the
	// templates write, as compose.Dir.SecretRef does. The values are read
	// after the templates ran, by the compose render of their output, so
	// no template ever sees one.
	SecretRef compose.SecretRefFunc
}

// ValueFile is a value file outside the chart's checkout.
type ValueFile struct {
	// Root is the checkout the file is contained in.
	Root string
	// File is relative to Root and never leaves it.
	File string
	// Origin names the checkout in messages, such as the repository's URL
	// with its credentials removed.
	Origin string
}

// Release is what a template sees as .Release.
type Release struct {
	// Name is the stack.
	Name string
	// Revision is the release revision being written, from 1.
	Revision int
}

// Rendered is a chart's output: the manifest and secrets the compose
// renderer would give for the compose document the templates produced,
// and what the release record keeps about the chart.
type Rendered struct {
	*compose.Rendered
	Chart Metadata
	// ValuesDigest is "sha256:<hex>" of the merged values.
	ValuesDigest string
}

// Render loads the chart at d and renders it for rel. Bad input is a
// *fault.Error naming the file (template, values file, schema) and, where
// known, the line and field.
func Render(d Dir, rel Release) (*Rendered, error) {
	c, err := Load(d.Root, d.Path)
	if err != nil {
		return nil, err
	}
	return c.Render(d, rel)
}

// Render renders a loaded chart; d.Root and d.Path must be where it was
// loaded from.
func (c *Chart) Render(d Dir, rel Release) (_ *Rendered, err error) {
	if rel.Revision < 1 {
		rel.Revision = 1
	}
	vals, secrets, err := c.mergedValues(d)
	if err != nil {
		return nil, err
	}
	defer func() { err = fault.Redact(err, secrets) }()
	units, err := c.units(d, vals)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		if err := u.chart.validateValues(u.vals, valuesPath(u.prefix)); err != nil {
			return nil, err
		}
	}
	digest, err := valuesDigest(vals, secrets, d.SealKey)
	if err != nil {
		return nil, &fault.Error{File: c.Path, Err: err}
	}
	sl, err := newSeals(d.SealKey)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", c.Meta.Name, err)
	}
	sl.seal(vals, secrets) // each unit's values lie within vals
	set := newRenderSet(units)
	doc, origin, err := set.execute(rel)
	if err != nil {
		return nil, err
	}
	if err := set.refuseSealed(doc, origin, sl); err != nil {
		return nil, err
	}
	out, err := set.compose(rel.Name, doc, origin, d)
	if err != nil {
		return nil, err
	}
	if err := c.refusePlaintext(out.Manifest, secrets, sl, d); err != nil {
		return nil, err
	}
	return &Rendered{Rendered: out, Chart: c.Meta, ValuesDigest: digest}, nil
}

// mergedValues applies the precedence, lowest first: values.yaml, each
// value file, inline values, set. secrets are the values of the files that
// were decrypted, which no message may quote.
func (c *Chart) mergedValues(d Dir) (vals map[string]any, secrets []string, err error) {
	vals = copyValues(c.Values)
	type valueFile struct{ root, file, shown string }
	files := make([]valueFile, 0, len(d.ValueFiles)+len(d.ExtraValueFiles))
	for _, name := range d.ValueFiles {
		file := path.Join(c.Path, filepath.ToSlash(name))
		shown := file
		if d.Root == "" {
			shown = c.rel(path.Clean(filepath.ToSlash(name))) // a package: named by the archive
		}
		files = append(files, valueFile{d.Root, file, shown})
	}
	for _, x := range d.ExtraValueFiles {
		file := path.Clean(filepath.ToSlash(x.File))
		files = append(files, valueFile{x.Root, file, x.Origin + ": " + file})
	}
	for i, vf := range files {
		file := vf.shown
		var (
			data      []byte
			decrypted bool
			err       error
		)
		if i < len(d.ValueFiles) && vf.root == "" {
			data, decrypted, err = c.readOwnFile(d.ValueFiles[i], d.Decrypt)
		} else {
			data, decrypted, err = readRepoFile(vf.root, vf.file, d.Decrypt)
		}
		if err != nil {
			return nil, nil, &fault.Error{File: file, Err: err}
		}
		over, err := parseValues(file, data)
		if err != nil {
			if decrypted {
				// The parser quotes what it could not read.
				return nil, nil, &fault.Error{File: file, Err: fmt.Errorf("%w: the decrypted file is not a YAML mapping", ErrValues)}
			}
			return nil, nil, err
		}
		if decrypted {
			secrets = secretsOf(over, secrets)
		}
		mergeValues(vals, over)
	}
	mergeValues(vals, copyValues(normalizeMap(d.Values)))
	set, err := setValues(d.Set)
	if err != nil {
		return nil, nil, &fault.Error{File: c.Path, Field: "set", Err: fmt.Errorf("%w: %v", ErrValues, err)}
	}
	return mergeValues(vals, set), secrets, nil
}

func normalizeMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return normalize(m).(map[string]any)
}

// readOwnFile reads a value file of a chart that is not on disk (a
// package): a file inside the chart, since there is no repository around
// it.
func (c *Chart) readOwnFile(name string, decrypt compose.DecryptFunc) ([]byte, bool, error) {
	rel := path.Clean(filepath.ToSlash(name))
	if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, false, fmt.Errorf("%q: a value file of a packaged chart must be inside it", name)
	}
	data, ok := c.all[rel]
	if !ok {
		return nil, false, fmt.Errorf("read %s: %w", rel, os.ErrNotExist)
	}
	if decrypt == nil {
		return data, false, nil
	}
	plain, err := decrypt(c.rel(rel), data)
	if err != nil {
		return nil, false, fmt.Errorf("decrypt %s: %w", rel, err)
	}
	return plain, !bytes.Equal(plain, data), nil
}

// readRepoFile reads one file of the repository, contained, and decrypts
// it; decrypted says whether it was encrypted.
func readRepoFile(root, rel string, decrypt compose.DecryptFunc) (data []byte, decrypted bool, err error) {
	if path.IsAbs(rel) {
		return nil, false, fmt.Errorf("%q: %w (absolute path)", rel, source.ErrOutsideRepository)
	}
	abs, err := source.Contain(root, filepath.FromSlash(rel))
	if err != nil {
		return nil, false, err
	}
	st, err := os.Lstat(abs)
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("read %s: not a regular file", rel)
	}
	if data, err = readLimited(abs, maxChartBytes); err != nil {
		return nil, false, err
	}
	if decrypt == nil {
		return data, false, nil
	}
	plain, err := decrypt(rel, data)
	if err != nil {
		return nil, false, fmt.Errorf("decrypt %s: %w", rel, err)
	}
	return plain, !bytes.Equal(plain, data), nil
}

// chartData is .Chart: Helm's field names.
type chartData struct {
	APIVersion  string
	Name        string
	Version     string
	AppVersion  string
	Description string
}

// releaseData is .Release.
type releaseData struct {
	Name      string
	Namespace string
	Revision  int
	IsInstall bool
	IsUpgrade bool
	Service   string
}

// renderSet is the charts of one render, the chart and its subcharts,
// whose templates run as one template set: a helper one chart defines can
// be included by another, as in Helm. Template names are the unit's
// prefix and the template's path in its chart.
type renderSet struct {
	top    *Chart
	units  []*unit
	byName map[string]*unit // template name → its unit
}

func newRenderSet(units []*unit) *renderSet {
	s := &renderSet{top: units[0].chart, units: units, byName: map[string]*unit{}}
	for _, u := range units {
		for n := range u.chart.templates {
			s.byName[u.prefix+n] = u
		}
	}
	return s
}

// unitOf is the unit a name of the render (a template, or a file of the
// render view) belongs to: the one with the longest matching prefix.
func (s *renderSet) unitOf(name string) *unit {
	if u, ok := s.byName[name]; ok {
		return u
	}
	best := s.units[0]
	for _, u := range s.units[1:] {
		if strings.HasPrefix(name, u.prefix) && len(u.prefix) > len(best.prefix) {
			best = u
		}
	}
	return best
}

// fileOf names a template or view file by the chart file it came from.
func (s *renderSet) fileOf(name string) string {
	u := s.unitOf(name)
	return u.chart.rel(strings.TrimPrefix(name, u.prefix))
}

// chartOf names the chart a template or view file belongs to.
func (s *renderSet) chartOf(name string) string { return s.unitOf(name).chart.Meta.Name }

// execute parses every template of every unit and runs each one that is
// not a helper, in name order, merging their outputs into one compose
// document. origin maps each field of the document to the template that
// set it.
func (s *renderSet) execute(rel Release) (map[string]any, map[string]string, error) {
	names := sortedKeys(s.byName)
	c := s.top
	var root *template.Template
	fm, bud := funcMap(&root)
	root = template.New(c.Meta.Name).Funcs(fm).Option("missingkey=zero")
	for _, n := range names {
		u := s.byName[n]
		if _, err := root.New(n).Parse(u.chart.templates[strings.TrimPrefix(n, u.prefix)]); err != nil {
			return nil, nil, s.templateFault(n, err)
		}
		if isHelper(n) {
			if err := helperOnly(root.Lookup(n)); err != nil {
				return nil, nil, &fault.Error{File: s.fileOf(n), Err: fmt.Errorf("%w: chart %s: %v", ErrTemplate, s.chartOf(n), err)}
			}
		}
	}
	data := make(map[*unit]map[string]any, len(s.units))
	for _, u := range s.units {
		m := u.chart.Meta
		data[u] = map[string]any{
			"Values": u.vals,
			"Chart": chartData{APIVersion: m.APIVersion, Name: m.Name, Version: m.Version,
				AppVersion: m.AppVersion, Description: m.Description},
			"Release": releaseData{Name: rel.Name, Namespace: rel.Name, Revision: rel.Revision,
				IsInstall: rel.Revision == 1, IsUpgrade: rel.Revision > 1, Service: "Flotilla"},
			"Files": Files(u.chart.files),
		}
	}
	doc := map[string]any{}
	origin := map[string]string{}
	for _, n := range names {
		if isHelper(n) {
			continue
		}
		u := s.byName[n]
		b := limitedBuffer{budget: bud}
		if err := root.ExecuteTemplate(&b, n, data[u]); err != nil {
			return nil, nil, s.templateFault(n, err)
		}
		text := strings.ReplaceAll(b.String(), noValue, "")
		if err := s.mergeOutput(doc, origin, n, text); err != nil {
			return nil, nil, err
		}
	}
	if len(doc) == 0 {
		return nil, nil, &fault.Error{File: c.rel(TemplatesDir), Err: fmt.Errorf("%w: chart %s: no template produced any output", ErrOutput, c.Meta.Name)}
	}
	return doc, origin, nil
}

func isHelper(name string) bool { return strings.HasPrefix(path.Base(name), "_") }

// helperOnly refuses a helper file with content outside its define blocks:
// that text would be silently dropped.
func helperOnly(t *template.Template) error {
	if t == nil || t.Tree == nil || t.Tree.Root == nil {
		return nil
	}
	for _, n := range t.Tree.Root.Nodes {
		if tn, ok := n.(*parse.TextNode); ok && len(bytes.TrimSpace(tn.Text)) == 0 {
			continue
		}
		if _, ok := n.(*parse.CommentNode); ok {
			continue
		}
		return fmt.Errorf("a file whose name starts with _ may only define templates; found %s outside a define", n)
	}
	return nil
}

// templateLineRE finds "template: NAME:LINE:" in text/template errors.
var templateLineRE = regexp.MustCompile(`template: ([^:]+):(\d+):`)

// templateFault names the template file and line an error happened at.
// An error inside an include names the included template's file; that is
// the line worth reading, so it wins.
func (s *renderSet) templateFault(name string, err error) *fault.Error {
	msg := err.Error()
	fe := &fault.Error{File: s.fileOf(name)}
	chart := s.chartOf(name)
	if ms := templateLineRE.FindAllStringSubmatch(msg, -1); ms != nil {
		m := ms[len(ms)-1]
		if _, ok := s.byName[m[1]]; ok {
			fe.File, chart = s.fileOf(m[1]), s.chartOf(m[1])
		}
		fe.Line, _ = strconv.Atoi(m[2])
	}
	fe.Err = fmt.Errorf("%w: chart %s: %s", ErrTemplate, chart, msg)
	return fe
}

// mergeOutput parses one template's output and merges it into doc. Empty
// output (a template switched off by a value) adds nothing.
func (s *renderSet) mergeOutput(doc map[string]any, origin map[string]string, name, text string) error {
	file, chart, prefix := s.fileOf(name), s.chartOf(name), s.unitOf(name).prefix
	dec := yaml.NewDecoder(strings.NewReader(text))
	for i := 0; ; i++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			fe := yamlFault(file, ErrOutput, err)
			fe.Err = fmt.Errorf("chart %s: the output is not YAML (line %d of the output): %w", chart, fe.Line, fe.Err)
			fe.Line = 0
			return fe
		}
		if v == nil {
			continue
		}
		m, ok := normalize(v).(map[string]any)
		if !ok {
			return &fault.Error{File: file, Err: fmt.Errorf("%w: chart %s: the output is %s, not a compose mapping", ErrOutput, chart, describe(v))}
		}
		if prefix != "" {
			if field, err := relocateFiles(m, prefix); err != nil {
				return &fault.Error{File: file, Field: field, Err: fmt.Errorf("%w: chart %s: %v", ErrOutput, chart, err)}
			}
		}
		if err := mergeFragment(doc, m, "", name, origin); err != nil {
			return &fault.Error{File: file, Field: err.field, Err: fmt.Errorf("%w: chart %s: %s", ErrOutput, chart, err.msg)}
		}
	}
}

type mergeConflict struct{ field, msg string }

// mergeFragment merges src into dst: mappings merge key by key; any other
// value may be set by several templates only when they agree, so two
// templates that disagree are an error rather than an order-dependent
// outcome.
func mergeFragment(dst, src map[string]any, prefix, tmpl string, origin map[string]string) *mergeConflict {
	for _, k := range sortedKeys(src) {
		field := k
		if prefix != "" {
			field = prefix + "." + k
		}
		v := src[k]
		old, exists := dst[k]
		if !exists {
			dst[k] = v
			if _, ok := origin[field]; !ok {
				origin[field] = tmpl
			}
			continue
		}
		om, oldMap := old.(map[string]any)
		nm, newMap := v.(map[string]any)
		if oldMap && newMap {
			if err := mergeFragment(om, nm, field, tmpl, origin); err != nil {
				return err
			}
			continue
		}
		if !reflect.DeepEqual(old, v) {
			return &mergeConflict{field: field, msg: fmt.Sprintf("%s is set differently by %s", field, originOf(origin, field))}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// composeFile is the name the merged document has in the render view.
const composeFile = "compose.yaml"

// compose hands the merged document to the compose renderer. It writes the
// document and the chart's files/ into a private directory and renders
// that as a compose project, so a chart's output is loaded, contained and
// converted by exactly the code a compose application's is: a `file:`
// that climbs out of the directory is refused as leaving the repository.
func (s *renderSet) compose(stack string, doc map[string]any, origin map[string]string, d Dir) (*compose.Rendered, error) {
	c := s.top
	decrypt := d.Decrypt
	escapeDollars(doc)
	text, err := yaml.Marshal(doc)
	if err != nil {
		return nil, &fault.Error{File: c.rel(TemplatesDir), Err: fmt.Errorf("%w: chart %s: %v", ErrOutput, c.Meta.Name, err)}
	}
	view, err := os.MkdirTemp("", "flotilla-chart-")
	if err != nil {
		return nil, fmt.Errorf("chart %s: render view: %w", c.Meta.Name, err)
	}
	defer os.RemoveAll(view)
	write := func(name string, data []byte) error {
		p := filepath.Join(view, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o600)
	}
	for _, u := range s.units {
		for _, name := range sortedKeys(u.chart.files) {
			if err := write(u.prefix+name, u.chart.files[name]); err != nil {
				return nil, fmt.Errorf("chart %s: render view: %w", c.Meta.Name, err)
			}
		}
	}
	if err := write(composeFile, text); err != nil {
		return nil, fmt.Errorf("chart %s: render view: %w", c.Meta.Name, err)
	}
	var dec compose.DecryptFunc
	if decrypt != nil {
		// The decrypter picks the format by the path and may name it in
		// messages: give it the file's repository path.
		dec = func(file string, data []byte) ([]byte, error) { return decrypt(s.fileOf(file), data) }
	}
	r, err := compose.Render(stack, compose.Dir{Root: view, Path: ".", Files: []string{composeFile}, Decrypt: dec, SealKey: d.SealKey, Limits: d.Limits, APIVersion: d.APIVersion, SecretRef: d.SecretRef})
	if err != nil {
		return nil, s.composeFault(err, origin)
	}
	return r, nil
}

// composeFault names, in an error from the compose renderer, the template
// that produced the field at fault (or the chart file it read) instead of
// the render view's file.
func (s *renderSet) composeFault(err error, origin map[string]string) error {
	c := s.top
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return fmt.Errorf("chart %s: %w", c.Meta.Name, err)
	}
	out := *fe
	switch {
	case fe.File == composeFile || fe.File == "":
		out.File = c.rel(TemplatesDir)
		if t := originOf(origin, fe.Field); t != "" {
			out.File = s.fileOf(t)
		}
		out.Line = 0 // a line of the merged document means nothing to the author
		out.Err = fmt.Errorf("chart %s: rendered compose: %w", c.Meta.Name, fe.Err)
	default:
		out.File = s.fileOf(fe.File)
		out.Err = fmt.Errorf("chart %s: %w", s.chartOf(fe.File), fe.Err)
	}
	return &out
}

// originOf is the template that set field or its nearest ancestor.
func originOf(origin map[string]string, field string) string {
	for f := field; f != ""; f = parentField(f) {
		if t, ok := origin[f]; ok {
			return t
		}
	}
	return ""
}

func parentField(f string) string {
	i := strings.LastIndexByte(f, '.')
	if i < 0 {
		return ""
	}
	return f[:i]
}

// escapeDollars doubles every "$" in the document's strings: a chart's
// output is final, and compose interpolation (which a chart does not
// feed) must leave it as written.
func escapeDollars(m map[string]any) {
	for k, v := range m {
		m[k] = escapeValue(v)
	}
}

func escapeValue(v any) any {
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, "$", "$$")
	case map[string]any:
		escapeDollars(v)
		return v
	case []any:
		for i := range v {
			v[i] = escapeValue(v[i])
		}
		return v
	}
	return v
}

// ErrPlaintextSecret is a value from an encrypted value file that a template
// wrote into the manifest, where it would be stored as plaintext in the
// release record and shown by history and diff.
var ErrPlaintextSecret = errors.New("a value decrypted from an encrypted value file would be stored in plaintext")

// refusePlaintext refuses a manifest that holds a decrypted number. Text
// values are sealed before templates run (refuseSealed), but a number
// cannot be: it still decides replica counts and comparisons, so one
// written out as it is is caught here, by its digits.
func (c *Chart) refusePlaintext(manifest string, secrets []string, sl *seals, d Dir) error {
	for _, s := range secrets {
		if _, sealed := sl.byValue[s]; sealed {
			continue
		}
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			continue // text shorter than minRedacted, or a boolean
		}
		if strings.Contains(manifest, s) {
			return &fault.Error{File: c.rel(TemplatesDir), Field: "values", Err: fmt.Errorf(
				"%w in the release record (value files %v): put the secret in an encrypted file under files/ and mount it as a secret or config, whose content is never recorded",
				ErrPlaintextSecret, d.ValueFiles)}
		}
	}
	return nil
}
