package chartengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"gopkg.in/yaml.v3"
)

// removedFuncs are sprig functions a template does not get. env and
// expandenv would read the controller's environment and getHostByName the
// network: templates come from a repository and are untrusted. The rest
// give a different answer on every call (clock, randomness, random salts
// and keys), which would make every pass see a changed manifest and
// redeploy.
var removedFuncs = []string{
	"env", "expandenv", "getHostByName",
	"now", "ago", "date", "dateInZone", "date_in_zone", "htmlDate", "htmlDateInZone", "dateModify", "date_modify", "mustDateModify", "must_date_modify", "unixEpoch", "duration", "durationRound",
	"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4", "shuffle",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"htpasswd", "bcrypt", "encryptAES",
}

// Bounds on what one render may do. A chart comes from a repository and
// is untrusted: without them, a template including itself, a helper that
// includes another twice at every level, or `until 1000000000` would take
// the controller's memory or time for every application.
const (
	maxIncludeDepth = 100
	maxOutput       = 16 << 20 // bytes of one template's output, or one include's
	maxListLength   = 100_000  // elements until, untilStep and seq may make
)

// maxIncludeCalls bounds includes per render; a variable so a test can
// reach it quickly.
var maxIncludeCalls = 100_000

// errTooLarge ends a template whose output passed maxOutput.
var errTooLarge = fmt.Errorf("output is larger than %d MiB", maxOutput>>20)

// limitedBuffer is a buffer that refuses to grow past maxOutput, and
// charges what it is given to the render's budget, so that a loop that
// writes is clocked even when it calls no function.
type limitedBuffer struct {
	strings.Builder
	budget *budget
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxOutput {
		return 0, errTooLarge
	}
	if b.budget != nil {
		if err := b.budget.clock(); err != nil {
			return 0, err
		}
		if err := b.budget.charge("the output", int64(len(p))); err != nil {
			return 0, err
		}
	}
	return b.Builder.Write(p)
}

// funcMap returns the functions of one render and the budget they share
// (see budget.go). include and tpl need the template set, which exists
// only once the map is installed, hence t.
func funcMap(t **template.Template) (template.FuncMap, *budget) {
	fm := sprig.TxtFuncMap()
	for _, name := range removedFuncs {
		delete(fm, name)
	}
	bud := newBudget()
	// text/template's own print functions, so that they are budgeted too.
	fm["print"], fm["printf"], fm["println"] = fmt.Sprint, fmt.Sprintf, fmt.Sprintln
	fm["html"], fm["js"], fm["urlquery"] = template.HTMLEscaper, template.JSEscaper, template.URLQueryEscaper
	depth, calls := 0, 0
	fm["include"] = func(name string, data any) (string, error) {
		if depth >= maxIncludeDepth {
			return "", fmt.Errorf("include %q: nested more than %d deep (a template including itself?)", name, maxIncludeDepth)
		}
		if calls++; calls > maxIncludeCalls {
			return "", fmt.Errorf("include %q: more than %d includes in one render", name, maxIncludeCalls)
		}
		depth++
		defer func() { depth-- }()
		b := limitedBuffer{budget: bud}
		if err := (*t).ExecuteTemplate(&b, name, data); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	fm["tpl"] = func(text string, data any) (string, error) {
		if depth >= maxIncludeDepth {
			return "", fmt.Errorf("tpl: nested more than %d deep", maxIncludeDepth)
		}
		depth++
		defer func() { depth-- }()
		clone, err := (*t).Clone()
		if err != nil {
			return "", err
		}
		nt, err := clone.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		b := limitedBuffer{budget: bud}
		if err := nt.Execute(&b, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(b.String(), noValue, ""), nil
	}
	fm["required"] = func(msg string, v any) (any, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	fm["until"], fm["untilStep"], fm["seq"] = until, untilStep, seq
	fm["repeat"] = func(count int, s string) (string, error) {
		if count < 0 || len(s) > 0 && count > maxOutput/len(s) {
			return "", fmt.Errorf("repeat: the result would be larger than %d MiB", maxOutput>>20)
		}
		return strings.Repeat(s, count), nil
	}
	fm["toYaml"] = toYAML
	fm["fromYaml"] = func(s string) (map[string]any, error) {
		var v any
		if err := yaml.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("fromYaml: %w", err)
		}
		if v == nil {
			return map[string]any{}, nil
		}
		m, ok := normalize(v).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("fromYaml: the text is %s, not a mapping", describe(v))
		}
		return m, nil
	}
	fm["toJson"] = func(v any) (string, error) {
		js, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("toJson: %w", err)
		}
		return string(js), nil
	}
	wrapFuncs(fm, bud)
	return fm, bud
}

// toYAML is yaml.v3 with sorted keys and no trailing newline, so
// `{{ toYaml .Values.x | nindent 6 }}` lines up.
func toYAML(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// noValue is what text/template prints for a missing map key; Helm charts
// expect nothing instead.
const noValue = "<no value>"

// Files are the chart's files/ directory, keyed by their path in the chart
// ("files/app.conf"). A template reads them; it cannot reach anything else.
type Files map[string][]byte

// Get returns a file's content as text, or "" when there is no such file.
func (f Files) Get(name string) string { return string(f[path.Clean(name)]) }

// GetBytes returns a file's content, or nil.
func (f Files) GetBytes(name string) []byte { return f[path.Clean(name)] }

// Glob returns the files whose path matches pattern (path.Match syntax,
// no "**").
func (f Files) Glob(pattern string) (Files, error) {
	out := Files{}
	for name, data := range f {
		ok, err := path.Match(pattern, name)
		if err != nil {
			return nil, fmt.Errorf("glob %q: %w", pattern, err)
		}
		if ok {
			out[name] = data
		}
	}
	return out, nil
}

// Names returns the paths, sorted.
func (f Files) Names() []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// AsConfigs writes a compose configs (or secrets) mapping with one entry
// per file, keyed by its base name and pointing at the file, so that
// `configs: {{ (.Files.Glob "files/conf/*").AsConfigs | nindent 2 }}`
// declares them all. The content stays in the file; the compose renderer
// reads it and gives it a content-hashed name.
func (f Files) AsConfigs() (string, error) {
	m := map[string]any{}
	for _, name := range f.Names() {
		key := path.Base(name)
		if _, dup := m[key]; dup {
			return "", fmt.Errorf("AsConfigs: two files are named %s; glob a narrower pattern", key)
		}
		m[key] = map[string]any{"file": name}
	}
	if len(m) == 0 {
		return "{}", nil
	}
	return toYAML(m)
}

// AsSecrets is AsConfigs, for the secrets mapping.
func (f Files) AsSecrets() (string, error) { return f.AsConfigs() }
