package application

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/forge"
)

// ApplicationSet generates applications from a template, one per element
// its generators produce. Generated applications are ordinary applications
// in every other way; Status.Set names the set they came from.
type ApplicationSet struct {
	// Name identifies the set: the rule of an application's name, unique
	// among sets. Required.
	Name string `yaml:"name"`
	// Generators produce the elements; their elements are concatenated.
	// At least one required.
	Generators []Generator `yaml:"generators"`
	// Template is an application whose strings are Go templates
	// ({{.basename}}, {{.number}}) over one element's parameters. Its name
	// is required and must differ per element.
	Template Application `yaml:"template"`
	// Prune removes the stack of an application that leaves the set (only
	// what its records prove it created). Default false: the stack is kept
	// and reported like that of an application removed from the file.
	// Pull-request previews are always removed once the forge no longer
	// lists their pull request as open (or a rule leaves it out).
	Prune bool `yaml:"prune,omitempty"`
	// Preview grants the applications of a set with a pullRequest
	// generator what they may reach (preview.allow). Only for such sets.
	Preview *Preview `yaml:"preview,omitempty"`
}

// Generator is exactly one of its fields.
type Generator struct {
	// List yields its elements as they are.
	List *ListGenerator `yaml:"list,omitempty"`
	// Git yields one element per directory of a repository matching a
	// pattern: path (apps/web) and basename (web).
	Git *GitGenerator `yaml:"git,omitempty"`
	// Swarms yields one element per swarm the controller deploys to:
	// name.
	Swarms *SwarmsGenerator `yaml:"swarms,omitempty"`
	// PullRequest yields one element per open pull request its rules
	// admit: number, ref, sha, shortSHA, author.
	PullRequest *PullRequestGenerator `yaml:"pullRequest,omitempty"`
	// Matrix yields every combination of two generators' elements, their
	// parameters merged (a parameter both define is an error).
	Matrix *MatrixGenerator `yaml:"matrix,omitempty"`
}

// ListGenerator is a literal list of parameter mappings.
type ListGenerator struct {
	// Elements are mappings of parameter names to values. At least one.
	Elements []Values `yaml:"elements"`
}

// GitGenerator lists directories of a git repository.
type GitGenerator struct {
	// RepoURL takes the forms of Source.RepoURL. Required.
	RepoURL string `yaml:"repoURL"`
	// Revision is a branch, tag or commit. Default "HEAD".
	Revision string `yaml:"revision,omitempty"`
	// Directories are path.Match patterns relative to the repository root
	// ("apps/*"). At least one.
	Directories []string `yaml:"directories"`
	// Exclude are patterns of directories left out. Default: none.
	Exclude []string `yaml:"exclude,omitempty"`
	// Credentials are as Source.Credentials. Default: none.
	Credentials *Credentials `yaml:"credentials,omitempty"`
}

// SwarmsGenerator lists the swarms the controller knows.
type SwarmsGenerator struct {
	// Names are globs of swarm names to keep. Default: every swarm.
	Names []string `yaml:"names,omitempty"`
}

// PullRequestGenerator lists the open pull requests of a repository, as
// its forge's API reports them, that the generator's rules let through.
// Pull requests are untrusted input: anyone who can open one on a public
// repository chooses what a preview runs. So previews are bounded: only
// open pull requests, fork pull requests only when Forks says so, only
// those with one of Labels or by one of Authors when given, at most Max,
// none idle longer than TTL; and a preview's application is granted only
// what its set's preview.allow grants, never the template's allow.
type PullRequestGenerator struct {
	// RepoURL takes the forms of Source.RepoURL. Required.
	RepoURL string `yaml:"repoURL"`
	// Forge is the API that says which pull requests are open. Default:
	// derived from a github.com RepoURL; required for any other host.
	Forge *Forge `yaml:"forge,omitempty"`
	// Forks lets pull requests whose head lives in another repository
	// through. Default false.
	Forks bool `yaml:"forks,omitempty"`
	// Labels: a pull request needs one of them. Default: no label needed.
	Labels []string `yaml:"labels,omitempty"`
	// Authors: a pull request must be opened by one of these logins.
	// Default: any author. With Labels too, both must hold.
	Authors []string `yaml:"authors,omitempty"`
	// Max caps the previews: the most recently updated pull requests that
	// pass the rules are kept, the rest are reported. Default
	// DefaultPreviewMax, at most MaxPreviewMax.
	Max int `yaml:"max,omitempty"`
	// TTL leaves out a pull request not updated for this long. Default
	// DefaultPreviewTTL.
	TTL Duration `yaml:"ttl,omitempty"`
	// Credentials are as Source.Credentials, for ls-remote. Default: none.
	Credentials *Credentials `yaml:"credentials,omitempty"`
}

// Forge names the API of the forge hosting a pull-request generator's
// repository.
type Forge struct {
	// Kind is "github" or "gitea" (Forgejo too). Required.
	Kind string `yaml:"kind"`
	// API is the API's base URL, such as https://api.github.com or
	// https://git.example.com/api/v1. Required.
	API string `yaml:"api"`
	// Repo is the repository's owner/name on the forge. Required unless
	// derived from a github.com RepoURL.
	Repo string `yaml:"repo,omitempty"`
	// TokenFile is an absolute path to a file holding an API token, sent
	// only to API. Default: none (public repositories, low rate limits).
	TokenFile string `yaml:"tokenFile,omitempty"`
}

// Bounds of previews.
const (
	DefaultPreviewMax = 10
	MaxPreviewMax     = 100
	DefaultPreviewTTL = 7 * 24 * time.Hour
)

// PreviewRef is the ref a preview is fetched at: where GitHub, Gitea and
// Forgejo publish the head of pull request N.
const PreviewRef = "refs/pull/%d/head"

// Preview is what a set that makes pull-request previews grants them.
type Preview struct {
	// Allow is the allow list of every preview application; the template's
	// allow is never used for previews. Default: nothing.
	Allow Allow `yaml:"allow,omitempty"`
	// SOPS is the key previews decrypt SOPS files with. Default: none, so
	// a preview decrypts nothing: neither its project's key nor the
	// controller's opens a file for code a pull request chose, since that
	// code could mount the plaintext and send it anywhere. Give previews a
	// key of their own, with files encrypted to it for that purpose.
	SOPS *SOPS `yaml:"sops,omitempty"`
	// SecretStores are the store entries previews may read. Default: none;
	// the grants of secretStores[] by application name or project never
	// reach a preview, whatever its name or project.
	SecretStores []PreviewStoreGrant `yaml:"secretStores,omitempty"`
}

// PreviewStoreGrant lets a set's previews read some paths of one store.
type PreviewStoreGrant struct {
	// Store is the name of one of the file's secretStores. Required.
	Store string `yaml:"store"`
	// Paths are path.Match globs of the entry paths granted, as in
	// secretStores[].grants[].paths. Required: at least one.
	Paths []string `yaml:"paths"`
}

// MatrixGenerator combines two generators.
type MatrixGenerator struct {
	// Generators are exactly two, neither of them a matrix.
	Generators []Generator `yaml:"generators"`
}

// kind names the one field g sets, or "" when it sets none or several.
func (g *Generator) kind() (string, int) {
	var k string
	n := 0
	for name, set := range map[string]bool{
		"list": g.List != nil, "git": g.Git != nil, "swarms": g.Swarms != nil,
		"pullRequest": g.PullRequest != nil, "matrix": g.Matrix != nil,
	} {
		if set {
			k, n = name, n+1
		}
	}
	return k, n
}

// TemplateFuncs are what a set's template may call besides text/template's
// builtins: string shaping only.
var TemplateFuncs = template.FuncMap{
	"lower":   strings.ToLower,
	"upper":   strings.ToUpper,
	"replace": func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"trunc": func(n int, s string) string {
		if n >= 0 && len(s) > n {
			return s[:n]
		}
		return s
	},
}

func (c *checker) applicationSets(f *File) {
	stores := map[string]*SecretStore{}
	for i := range f.SecretStores {
		stores[f.SecretStores[i].Name] = &f.SecretStores[i]
	}
	names := map[string]int{}
	for i := range f.ApplicationSets {
		s := &f.ApplicationSets[i]
		p := "applicationSets[" + strconv.Itoa(i) + "]"
		c.dnsName("", p+".name", s.Name)
		if j, dup := names[s.Name]; dup && s.Name != "" {
			c.report("", p+".name", ErrDuplicate, "name %q is already used by applicationSets[%d]", s.Name, j)
		}
		names[s.Name] = i
		if len(s.Generators) == 0 {
			c.report("", p+".generators", ErrRequired, "required: at least one generator (list, git, swarms, pullRequest or matrix)")
		}
		for j := range s.Generators {
			c.generator(&s.Generators[j], fmt.Sprintf("%s.generators[%d]", p, j), true)
		}
		switch previews := s.MakesPreviews(); {
		case previews && !reflect.ValueOf(s.Template.Allow).IsZero():
			c.report("", p+".template.allow", ErrInvalid, "a preview set's template cannot grant an allow list: pull requests are untrusted, so previews get only what the set grants under preview.allow")
		case !previews && s.Preview != nil:
			c.report("", p+".preview", ErrInvalid, "preview is only for a set with a pullRequest generator")
		}
		if s.Preview != nil {
			c.allow("", p+".preview.allow", &s.Preview.Allow)
			c.previewSecrets(p+".preview", s.Preview, stores)
		}
		if s.MakesPreviews() && s.Template.SOPS != nil {
			c.report("", p+".template.sops", ErrInvalid, "a preview set's template cannot name a SOPS key: pull requests are untrusted, so previews decrypt only with the key the set grants under preview.sops")
		}
		if s.MakesPreviews() && previewRepo(s.Generators, s.Template.Source.RepoURL) && s.Template.Source.Revision != "{{.sha}}" {
			c.report("", p+".template.source.revision", ErrInvalid, "a preview of the pull request's own repository must be at revision \"{{.sha}}\", the head commit the forge reports and the expansion fetched, not %q, which can move after the check", s.Template.Source.Revision)
		}
		if s.Template.Name == "" {
			c.report("", p+".template.name", ErrRequired, "required: a template that differs per element, such as \"{{.basename}}\"")
		}
		// A key chosen by a directory name or a pull request would let
		// untrusted input pick another team's key.
		if k := s.Template.SOPS; k != nil && strings.Contains(k.AgeKeyFile, "{{") {
			c.report("", p+".template.sops.ageKeyFile", ErrInvalid, "must be a fixed path, not a template: generated input must not choose which key decrypts")
		}
		c.templateFeedback(p, s.Template.Feedback)
		WalkStrings(&s.Template, func(field, v string) (string, error) {
			if _, err := template.New("").Funcs(TemplateFuncs).Option("missingkey=error").Parse(v); err != nil {
				c.report("", p+".template"+field, ErrInvalid, "not a valid template: %v", err)
			}
			return v, nil
		})
	}
}

func (c *checker) generator(g *Generator, p string, top bool) {
	kind, n := g.kind()
	switch {
	case n == 0:
		c.report("", p, ErrRequired, "required: one of list, git, swarms, pullRequest or matrix")
		return
	case n > 1:
		c.report("", p, ErrInvalid, "give exactly one of list, git, swarms, pullRequest or matrix")
		return
	}
	switch kind {
	case "list":
		if len(g.List.Elements) == 0 {
			c.report("", p+".list.elements", ErrRequired, "required: at least one element")
		}
	case "git":
		gg := g.Git
		tr := c.repoURL("", p+".git.repoURL", gg.RepoURL)
		if gg.Credentials != nil {
			c.credentials("", p+".git.credentials", gg.Credentials, tr)
		}
		if strings.HasPrefix(gg.Revision, "-") || strings.IndexFunc(gg.Revision, badRevisionRune) >= 0 {
			c.report("", p+".git.revision", ErrInvalid, "%q is not a branch, tag or commit SHA", gg.Revision)
		}
		if len(gg.Directories) == 0 {
			c.report("", p+".git.directories", ErrRequired, "required: at least one pattern such as \"apps/*\"")
		}
		for _, l := range []struct {
			name string
			pats []string
		}{{"directories", gg.Directories}, {"exclude", gg.Exclude}} {
			for j, pat := range l.pats {
				fp := fmt.Sprintf("%s.git.%s[%d]", p, l.name, j)
				if _, err := path.Match(pat, ""); err != nil || pat == "" || path.IsAbs(pat) || escapes(pat) {
					c.report("", fp, ErrInvalid, "%q is not a pattern relative to the repository", pat)
				}
			}
		}
	case "swarms":
		for j, pat := range g.Swarms.Names {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				c.report("", fmt.Sprintf("%s.swarms.names[%d]", p, j), ErrInvalid, "%q is not a name or glob", pat)
			}
		}
	case "pullRequest":
		c.pullRequest(g.PullRequest, p+".pullRequest")
	case "matrix":
		if !top {
			c.report("", p+".matrix", ErrInvalid, "a matrix cannot hold another matrix")
			return
		}
		if len(g.Matrix.Generators) != 2 {
			c.report("", p+".matrix.generators", ErrInvalid, "a matrix combines exactly two generators, not %d", len(g.Matrix.Generators))
		}
		for j := range g.Matrix.Generators {
			c.generator(&g.Matrix.Generators[j], fmt.Sprintf("%s.matrix.generators[%d]", p, j), false)
		}
	}
}

// MakesPreviews says whether s has a pullRequest generator, directly or in
// a matrix: its applications are pull-request previews.
func (s *ApplicationSet) MakesPreviews() bool { return hasPullRequest(s.Generators) }

func hasPullRequest(gs []Generator) bool {
	for _, g := range gs {
		if g.PullRequest != nil || (g.Matrix != nil && hasPullRequest(g.Matrix.Generators)) {
			return true
		}
	}
	return false
}

// previewRepo says whether a pullRequest generator of gs reads repoURL.
func previewRepo(gs []Generator, repoURL string) bool {
	for _, g := range gs {
		if (g.PullRequest != nil && g.PullRequest.RepoURL == repoURL) || (g.Matrix != nil && previewRepo(g.Matrix.Generators, repoURL)) {
			return true
		}
	}
	return false
}

// pullRequest checks a pull-request generator. The applications file is
// trusted, so these are mistakes, but a mistake here is a preview of
// anyone's code: each bound is checked.
func (c *checker) pullRequest(pr *PullRequestGenerator, p string) {
	tr := c.repoURL("", p+".repoURL", pr.RepoURL)
	if pr.Credentials != nil {
		c.credentials("", p+".credentials", pr.Credentials, tr)
	}
	if pr.Forge == nil {
		if _, _, _, ok := forge.Derive(pr.RepoURL); !ok && pr.RepoURL != "" {
			c.report("", p+".forge", ErrRequired, "required for a repository not on github.com: {kind: github|gitea, api: URL, repo: owner/name}; the forge's API says which pull requests are open, refs do not")
		}
	} else {
		f := pr.Forge
		if f.Kind != forge.GitHub && f.Kind != forge.Gitea {
			c.report("", p+".forge.kind", ErrInvalid, "%q is not github or gitea (gitea also for Forgejo)", f.Kind)
		}
		u, err := url.Parse(f.API)
		switch {
		case f.API == "":
			c.report("", p+".forge.api", ErrRequired, "required: the API's base URL, such as https://api.github.com or https://git.example.com/api/v1")
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			c.report("", p+".forge.api", ErrInvalid, "%q is not an http(s) base URL without user, query or fragment", f.API)
		case u.Scheme == "http" && f.TokenFile != "" && !loopback(u.Hostname()):
			c.report("", p+".forge.api", ErrInvalid, "a token is not sent over plain http:// to %s; use https", u.Hostname())
		}
		if f.Repo == "" {
			if _, _, _, ok := forge.Derive(pr.RepoURL); !ok {
				c.report("", p+".forge.repo", ErrRequired, "required: the repository's owner/name on the forge")
			}
		} else if !forge.ValidRepo(f.Repo) {
			c.report("", p+".forge.repo", ErrInvalid, "%q is not owner/name", f.Repo)
		}
		if f.TokenFile != "" && !path.IsAbs(f.TokenFile) {
			c.report("", p+".forge.tokenFile", ErrInvalid, "%q must be an absolute path", f.TokenFile)
		}
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"labels", pr.Labels}, {"authors", pr.Authors}} {
		for j, v := range l.v {
			if strings.TrimSpace(v) == "" || v != strings.TrimSpace(v) {
				c.report("", fmt.Sprintf("%s.%s[%d]", p, l.name, j), ErrInvalid, "%q is empty or has surrounding spaces", v)
			}
		}
	}
	if pr.Max < 0 || pr.Max > MaxPreviewMax {
		c.report("", p+".max", ErrInvalid, "%d is not between 1 and %d (default %d)", pr.Max, MaxPreviewMax, DefaultPreviewMax)
	}
	if pr.TTL.Duration < 0 || (pr.TTL.Duration > 0 && pr.TTL.Duration < time.Minute) {
		c.report("", p+".ttl", ErrInvalid, "%s is not a duration of a minute or more (default %s)", pr.TTL.Duration, DefaultPreviewTTL)
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WalkStrings calls fn on every string of a, writing copies of whatever a
// shares with other values (pointers, slices, maps) before it changes them (fields, slice items and
// string values of mappings, the hidden Generated excepted), with its field
// path below a (".source.path"), and stores what fn returns. The first
// error stops the walk. It is how a set's template is checked and expanded
// without listing the fields of Application by hand, so a field added later
// is templated too.
func WalkStrings(a *Application, fn func(field, v string) (string, error)) error {
	return walk(reflect.ValueOf(a).Elem(), "", fn)
}

func walk(v reflect.Value, p string, fn func(string, string) (string, error)) error {
	switch v.Kind() {
	case reflect.String:
		out, err := fn(p, v.String())
		if err != nil {
			return err
		}
		v.SetString(out)
	case reflect.Pointer:
		if v.IsNil() || v.Type() == reflect.TypeFor[*Generated]() {
			return nil
		}
		// Copied before writing, so that a copy of the template walked
		// here never writes through to the template.
		n := reflect.New(v.Elem().Type())
		n.Elem().Set(v.Elem())
		v.Set(n)
		return walk(n.Elem(), p, fn)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if !sf.IsExported() || name == "-" || name == "" {
				continue
			}
			if err := walk(v.Field(i), p+"."+name, fn); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(n, v)
		v.Set(n)
		for i := range v.Len() {
			if err := walk(v.Index(i), p+"["+strconv.Itoa(i)+"]", fn); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		// Values are any; only their strings are templates, and a copy is
		// written so the template's own map is never changed.
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for _, k := range v.MapKeys() {
			e, err := walkAny(v.MapIndex(k).Interface(), p+"."+k.String(), fn)
			if err != nil {
				return err
			}
			out.SetMapIndex(k, reflect.ValueOf(&e).Elem())
		}
		v.Set(out)
	}
	return nil
}

func walkAny(x any, p string, fn func(string, string) (string, error)) (any, error) {
	switch t := x.(type) {
	case string:
		return fn(p, t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			w, err := walkAny(e, p+"."+k, fn)
			if err != nil {
				return nil, err
			}
			out[k] = w
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			w, err := walkAny(e, p+"["+strconv.Itoa(i)+"]", fn)
			if err != nil {
				return nil, err
			}
			out[i] = w
		}
		return out, nil
	}
	return x, nil
}

// Expanded returns a new File holding f's applications followed by
// generated, which Defaults fills, validated together: names and stacks
// unique across both, dependencies known and acyclic, projects obeyed. A
// problem in a generated application names its set and the application.
// It is strict, for flotilla validate; a running controller uses Admit.
func (f *File) Expanded(generated []Application) (*File, error) {
	out, probs := f.expand(generated)
	if len(probs) > 0 {
		return nil, joinFaults(f.locate(out, probs))
	}
	return out, nil
}

// Admit is Expanded for a running controller, where generated input (a
// directory name, a pull request) is not trusted: a generated application
// with a problem of its own is left out, and its problem, naming set,
// element and field, is returned in refused, while the rest of the file
// applies. When two generated applications claim one name, the one known
// (an element of the last expansion) says which stays (an application already running is not displaced by a
// newcomer); without it, the first. err is only for problems of f's own
// applications, such as a dependency on an application no set produced.
func (f *File) Admit(generated []Application, known func(*Application) bool) (out *File, refused []Refusal, err error) {
	keep := make([]Application, 0, len(generated))
	var dups []Application
	byName := map[string]int{}
	for _, a := range generated {
		j, dup := byName[a.Name]
		switch {
		case !dup || a.Name == "":
			byName[a.Name] = len(keep)
			keep = append(keep, a)
		case known != nil && known(&a) && !known(&keep[j]):
			// a is the one running; the newcomer at j yields to it.
			dups = append(dups, keep[j])
			keep[j] = a
		default:
			dups = append(dups, a)
		}
	}
	for _, a := range dups {
		p := &fault.Error{App: a.Name, Field: "applications[0].name",
			Err: newProblem(ErrDuplicate, "name %q is generated by another element too", a.Name)}
		refused = append(refused, Refusal{a, f.describe(a, p)})
	}
	for range len(generated) + 1 {
		var probs []*fault.Error
		out, probs = f.expand(keep)
		bad := map[int]bool{}
		static := len(f.Applications)
		var own []*fault.Error
		for _, p := range probs {
			if i := appIndex(p.Field); i >= static {
				if !bad[i] {
					refused = append(refused, Refusal{keep[i-static], f.describe(out.Applications[i], p)})
				}
				bad[i] = true
				continue
			}
			own = append(own, p)
		}
		if len(bad) == 0 {
			if len(own) > 0 {
				return nil, refused, joinFaults(f.locate(out, own))
			}
			return out, refused, nil
		}
		next := keep[:0:0]
		for i, a := range keep {
			if !bad[static+i] {
				next = append(next, a)
			}
		}
		keep = next
	}
	return nil, refused, fmt.Errorf("generated applications: no valid subset found")
}

// Refusal is a generated application Admit left out, and why.
type Refusal struct {
	Application Application
	Err         error
}

// expand is f's applications followed by generated, defaulted, with the
// problems of the whole; its sets are not checked again.
func (f *File) expand(generated []Application) (*File, []*fault.Error) {
	out := *f
	out.meta = nil
	out.Applications = make([]Application, 0, len(f.Applications)+len(generated))
	out.Applications = append(out.Applications, f.Applications...)
	out.Applications = append(out.Applications, generated...)
	Defaults(&out)
	return &out, validateExpanded(&out)
}

// appIndex is the application a field path lies under, or -1.
func appIndex(field string) int {
	m := appIndexRE.FindStringSubmatch(field)
	if m == nil {
		return -1
	}
	i, _ := strconv.Atoi(m[1])
	return i
}

// describe rewrites a problem of the generated application a (at any
// index) to name its set, element and the template's line of the field.
func (f *File) describe(a Application, p *fault.Error) *fault.Error {
	m := appIndexRE.FindStringSubmatch(p.Field)
	if m == nil {
		return p
	}
	if f.meta != nil {
		p.File = f.meta.file
	}
	set := ""
	if a.Generated != nil {
		set = fmt.Sprintf("applicationSets[%d] (set %q) generated application %q", a.Generated.Index, a.Generated.Set, a.Name)
		if a.Generated.Element != "" {
			set = fmt.Sprintf("applicationSets[%d] (set %q, element %s) generated application %q", a.Generated.Index, a.Generated.Set, a.Generated.Element, a.Name)
		}
		// The template's line of the field, or of its nearest written
		// ancestor.
		if f.meta != nil {
			p.Line = f.meta.lineOf(fmt.Sprintf("applicationSets[%d].template", a.Generated.Index) + strings.TrimPrefix(p.Field, m[0]))
		}
	}
	p.Field = strings.Replace(p.Field, m[0], set, 1)
	return p
}

// locate gives each problem of out (f's applications followed by
// generated ones) its file and line, and names the set of a generated
// application's.
func (f *File) locate(out *File, probs []*fault.Error) []*fault.Error {
	static := len(f.Applications)
	for _, p := range probs {
		if f.meta != nil {
			p.File = f.meta.file
		}
		i := appIndex(p.Field)
		switch {
		case i < 0:
		case i < static:
			// A static application's problem was reported by Parse
			// already unless it concerns the generated ones (a dependency
			// on a name no set produced); its line is known.
			if f.meta != nil {
				p.Line = f.meta.lineOf(p.Field)
			}
		default:
			f.describe(out.Applications[i], p)
		}
	}
	return probs
}

// Where returns the file and line a field path of f (such as
// "applicationSets[1].generators[0]") was written at, or of its nearest
// written ancestor; zero values for a File not parsed from text.
func (f *File) Where(field string) (file string, line int) {
	if f.meta == nil {
		return "", 0
	}
	return f.meta.file, f.meta.lineOf(field)
}

// validateExpanded is validate over a File whose applications include
// generated ones; its sets are not checked again.
func validateExpanded(f *File) []*fault.Error {
	sets := f.ApplicationSets
	f.ApplicationSets = nil
	defer func() { f.ApplicationSets = sets }()
	return validate(f)
}
