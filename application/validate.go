package application

import (
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"

	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
)

// nameRE is the rule for Name and Stack: lowercase DNS-label characters,
// which is also what docker accepts as a stack namespace without surprises.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// scpLikeRE matches git's scp-like syntax, user@host:path.
var scpLikeRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:.+$`)

// transport is how a repository is reached; credentials must match it.
type transport int

const (
	transportNone  transport = iota // unparseable, already reported
	transportHTTPS                  // https://
	transportHTTP                   // http://, refused with credentials
	transportSSH                    // ssh:// and user@host:path
	transportLocal                  // file:// and absolute paths
	transportGit                    // git:// (git daemon): anonymous, refused with credentials
)

// Validate checks f, which Defaults should already have filled, and returns
// nil or errors.Join of one *fault.Error per problem. When f came from Parse
// the problems carry file and line; for a File built in code they carry the
// field path only.
func Validate(f *File) error {
	return joinFaults(validate(f))
}

type checker struct {
	m    *meta
	errs []*fault.Error
	// marks are the fields image policies write, across the file's
	// applications: each may be marked once (see mark).
	marks map[imageField]markedAt
}

func (c *checker) report(app, field string, kind error, format string, args ...any) {
	if c.m.suppressed(field) {
		return
	}
	fe := &fault.Error{App: app, Field: field, Line: c.m.lineOf(field), Err: newProblem(kind, format, args...)}
	if c.m != nil {
		fe.File = c.m.file
	}
	c.errs = append(c.errs, fe)
}

func validate(f *File) []*fault.Error {
	c := &checker{m: f.meta}
	switch {
	case f.APIVersion == "":
		c.report("", "apiVersion", ErrRequired, "required; set it to %q", APIVersion)
	case f.APIVersion != APIVersion:
		c.report("", "apiVersion", ErrInvalid, "unsupported version %q; this build reads %q", f.APIVersion, APIVersion)
	}
	destinations := c.swarms(f.Swarms)
	names := map[string]int{}
	stacks := map[[2]string]int{}
	for i := range f.Applications {
		a := &f.Applications[i]
		p := "applications[" + strconv.Itoa(i) + "]"
		c.application(a, p)
		c.destination(a, p, destinations)
		nameDup := false
		if a.Name != "" {
			if j, dup := names[a.Name]; dup {
				c.report(a.Name, p+".name", ErrDuplicate, "name %q is already used by applications[%d]", a.Name, j)
				nameDup = true
			} else {
				names[a.Name] = i
			}
		}
		// A duplicated name usually drags its defaulted stack along; one
		// report is enough.
		if a.Stack != "" && !(nameDup && a.Stack == a.Name) {
			// Two loops deploying one stack would undo each other and
			// each prune what the other declares; on two swarms they are
			// two stacks.
			key := [2]string{a.Destination, a.Stack}
			if j, dup := stacks[key]; dup {
				c.report(a.Name, p+".stack", ErrDuplicate, "stack %q is already claimed by application %q", a.Stack, f.Applications[j].Name)
			} else {
				stacks[key] = i
			}
		}
	}
	c.notifications(f.Notifications, names)
	c.projects(f)
	projects := map[string]bool{}
	for _, pr := range f.Projects {
		projects[pr.Name] = true
	}
	c.secretStores(f.SecretStores, projects)
	c.ordering(f)
	return c.errs
}

func (c *checker) application(a *Application, p string) {
	app := a.Name
	c.dnsName(app, p+".name", a.Name)
	if a.Stack != a.Name {
		c.dnsName(app, p+".stack", a.Stack)
	}

	s := &a.Source
	var tr transport
	switch {
	case s.FromRepository():
		c.chartRepository(app, p+".source", s)
	default:
		tr = c.repoURL(app, p+".source.repoURL", s.RepoURL)
	}
	switch {
	case s.FromRepository():
	case s.Revision == "":
		c.report(app, p+".source.revision", ErrRequired, "required: a branch, tag or commit SHA")
	case strings.HasPrefix(s.Revision, "-") || strings.IndexFunc(s.Revision, badRevisionRune) >= 0:
		c.report(app, p+".source.revision", ErrInvalid, "%q is not a branch, tag or commit SHA", s.Revision)
	}
	c.relPath(app, p+".source.path", s.Path, "")
	for j, name := range s.Compose.Files {
		c.relPath(app, fmt.Sprintf("%s.source.compose.files[%d]", p, j), name, s.Path)
	}
	for j, name := range s.Compose.EnvFiles {
		c.relPath(app, fmt.Sprintf("%s.source.compose.envFiles[%d]", p, j), name, s.Path)
	}
	if s.Chart != nil {
		c.chart(app, p+".source", s)
	}
	if s.Credentials != nil {
		c.credentials(app, p+".source.credentials", s.Credentials, tr)
	}
	if s.Values != nil {
		c.valuesSource(app, p+".source", s)
	}

	sp := &a.SyncPolicy
	if sp.Interval.Duration < MinInterval {
		c.report(app, p+".syncPolicy.interval", ErrInvalid, "%s is shorter than the minimum %s", sp.Interval, MinInterval)
	}
	if sp.RetainRotated != nil && *sp.RetainRotated < 0 {
		c.report(app, p+".syncPolicy.retainRotated", ErrInvalid, "must be 0 or more, not %d", *sp.RetainRotated)
	}
	if sp.Wait != nil {
		switch t := sp.Wait.Timeout.Duration; {
		case t == 0:
			c.report(app, p+".syncPolicy.wait.timeout", ErrRequired, "required when wait is set, such as \"5m\"")
		case t < 0:
			c.report(app, p+".syncPolicy.wait.timeout", ErrInvalid, "must be positive, not %s", sp.Wait.Timeout)
		}
	}
	if rb := sp.Rollback; rb != nil {
		switch t := rb.OnDegraded.Duration; {
		case t == 0:
			c.report(app, p+".syncPolicy.rollback.onDegraded", ErrRequired, "required when rollback is set, such as \"2m\"")
		case t < 0:
			c.report(app, p+".syncPolicy.rollback.onDegraded", ErrInvalid, "must be positive, not %s", rb.OnDegraded)
		}
	}
	if a.History < 1 {
		c.report(app, p+".history", ErrInvalid, "must be at least 1, not %d", a.History)
	}
	c.allow(app, p+".allow", &a.Allow)
	if ra := a.RegistryAuth; ra != nil {
		switch {
		case ra.File == "" && ra.Secret == "":
			c.report(app, p+".registryAuth", ErrRequired, "required: secret (a swarm secret mounted into the controller) or file (the absolute path of a Docker config.json)")
		case ra.File != "" && ra.Secret != "":
			c.report(app, p+".registryAuth", ErrInvalid, "set secret or file, not both")
		case ra.Secret != "" && (strings.ContainsAny(ra.Secret, "/\\") || ra.Secret == "." || ra.Secret == ".."):
			c.report(app, p+".registryAuth.secret", ErrInvalid, "%q is not a secret name", ra.Secret)
		case ra.File != "" && !path.IsAbs(ra.File):
			c.report(app, p+".registryAuth.file", ErrInvalid, "%q must be an absolute path on the controller's host", ra.File)
		}
	}
	c.sops(app, p, a.SOPS)
	c.feedback(app, p, a)
	c.imageUpdates(app, p, a)
}

// sops checks the sops settings at field p of an application (app) or a
// project (app empty).
func (c *checker) sops(app, p string, s *SOPS) {
	if s == nil {
		return
	}
	example := "/run/secrets/" + app + "-age-key"
	if app == "" {
		example = "/run/secrets/<project>-age-key"
	}
	switch {
	case s.AgeKeyFile == "":
		c.report(app, p+".sops.ageKeyFile", ErrRequired, "required: the absolute path of an age identity file, such as %s", example)
	case !path.IsAbs(s.AgeKeyFile):
		c.report(app, p+".sops.ageKeyFile", ErrInvalid, "%q must be an absolute path on the controller's host", s.AgeKeyFile)
	case path.Clean(s.AgeKeyFile) != s.AgeKeyFile:
		c.report(app, p+".sops.ageKeyFile", ErrInvalid, "%q is not a clean path; write %q", s.AgeKeyFile, path.Clean(s.AgeKeyFile))
	}
}

// chartRepository checks a chart from a chart repository: it excludes a
// git source, names a chart and a SemVer constraint, and its credentials
// are absolute files, one kind at a time, never sent over plain http.
func (c *checker) chartRepository(app, p string, s *Source) {
	ch := s.Chart
	for _, f := range []string{"repoURL", "revision", "path", "credentials"} {
		if c.m.written(p + "." + f) {
			c.report(app, p+"."+f, ErrInvalid, "a chart from a chart repository (chart.repoURL) takes no git %s; remove it", f)
		}
	}
	field := p + ".chart.repoURL"
	u, err := url.Parse(ch.RepoURL)
	switch {
	case strings.IndexFunc(ch.RepoURL, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		c.report(app, field, ErrInvalid, "contains whitespace or control characters")
	case err != nil:
		c.report(app, field, ErrInvalid, "not a valid URL")
	case u.User != nil:
		c.report(app, field, ErrInvalid, "the URL contains credentials; name files with chart.credentials instead")
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		c.report(app, field, ErrInvalid, "must be https://host/path (or http:// with insecure: true)")
	case u.RawQuery != "" || u.Fragment != "":
		c.report(app, field, ErrInvalid, "must not have a query or fragment")
	case u.Scheme == "http" && !ch.Insecure:
		c.report(app, field, ErrInvalid, "plain http needs insecure: true; prefer https")
	}
	switch {
	case ch.Name == "":
		c.report(app, p+".chart.name", ErrRequired, "required with chart.repoURL: the chart's name in the repository's index")
	case !chartNameRE.MatchString(ch.Name):
		c.report(app, p+".chart.name", ErrInvalid, "%q is not a chart name (lowercase letters, digits, '-', '_', '.')", ch.Name)
	}
	if ch.Version == "" {
		c.report(app, p+".chart.version", ErrRequired, "required with chart.repoURL: a SemVer constraint such as \"~1.2\" or an exact version")
	} else if _, err := semver.NewConstraint(ch.Version); err != nil {
		c.report(app, p+".chart.version", ErrInvalid, "%q is not a SemVer constraint: %v", ch.Version, err)
	}
	if cr := ch.Credentials; cr != nil {
		cp := p + ".chart.credentials"
		for _, f := range []struct{ name, v string }{
			{"usernameFile", cr.UsernameFile}, {"passwordFile", cr.PasswordFile}, {"tokenFile", cr.TokenFile},
		} {
			if f.v != "" && !path.IsAbs(f.v) {
				c.report(app, cp+"."+f.name, ErrInvalid, "%q must be an absolute path on the controller's host", f.v)
			}
		}
		switch {
		case cr.TokenFile != "" && (cr.UsernameFile != "" || cr.PasswordFile != ""):
			c.report(app, cp, ErrInvalid, "give usernameFile and passwordFile, or tokenFile, not both")
		case (cr.UsernameFile == "") != (cr.PasswordFile == ""):
			c.report(app, cp, ErrRequired, "usernameFile and passwordFile go together")
		case *cr == ChartCredentials{}:
			c.report(app, cp, ErrRequired, "name usernameFile and passwordFile, or tokenFile")
		case err == nil && u.Scheme == "http":
			c.report(app, cp, ErrInvalid, "refusing to send credentials over plain http; use https")
		}
	}
}

// valuesSource checks value files from a second git repository: a chart
// is what they are for, and the repository and its files follow the rules
// of a git source.
func (c *checker) valuesSource(app, p string, s *Source) {
	v := s.Values
	vp := p + ".values"
	if s.Chart == nil {
		c.report(app, vp, ErrInvalid, "values from a git repository need a chart (source.chart); a compose application takes none")
	}
	tr := c.repoURL(app, vp+".repoURL", v.RepoURL)
	switch {
	case v.Revision == "":
		c.report(app, vp+".revision", ErrRequired, "required: a branch, tag or commit SHA")
	case strings.HasPrefix(v.Revision, "-") || strings.IndexFunc(v.Revision, badRevisionRune) >= 0:
		c.report(app, vp+".revision", ErrInvalid, "%q is not a branch, tag or commit SHA", v.Revision)
	}
	if len(v.Files) == 0 {
		c.report(app, vp+".files", ErrRequired, "required: at least one value file, relative to the values repository's root")
	}
	for j, name := range v.Files {
		c.relPath(app, fmt.Sprintf("%s.files[%d]", vp, j), name, "")
	}
	if v.Credentials != nil {
		c.credentials(app, vp+".credentials", v.Credentials, tr)
	}
}

var chartNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// chart checks a chart source: it excludes compose, its value files stay
// in the repository, and set keys are dotted paths to single values.
func (c *checker) chart(app, p string, s *Source) {
	if c.m.written(p+".compose") || len(s.Compose.Files) > 0 || len(s.Compose.EnvFiles) > 0 {
		c.report(app, p+".chart", ErrInvalid, "chart and compose exclude each other: a chart's templates produce the compose document; remove compose")
	}
	for j, name := range s.Chart.ValueFiles {
		c.relPath(app, fmt.Sprintf("%s.chart.valueFiles[%d]", p, j), name, s.Path)
	}
	keys := make([]string, 0, len(s.Chart.Set))
	for k := range s.Chart.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := p + ".chart.set." + k
		switch v := s.Chart.Set[k]; {
		case !validSetKey(k):
			c.report(app, field, ErrInvalid, "%q is not a dotted key such as image.tag (no empty parts, no list indices)", k)
		case isCollection(v):
			c.report(app, field, ErrType, "must be a single value; put mappings and lists under values")
		}
	}
}

func validSetKey(k string) bool {
	if strings.ContainsAny(k, "[]") {
		return false
	}
	for _, part := range strings.Split(strings.ReplaceAll(k, `\.`, "_"), ".") {
		if part == "" {
			return false
		}
	}
	return true
}

func isCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any, map[any]any:
		return true
	}
	return false
}

func (c *checker) dnsName(app, field, v string) {
	switch {
	case v == "":
		c.report(app, field, ErrRequired, "required")
	case len(v) > MaxNameLength:
		c.report(app, field, ErrInvalid, "%q is longer than %d characters", v, MaxNameLength)
	case !nameRE.MatchString(v):
		c.report(app, field, ErrInvalid, "%q must be lowercase letters, digits and '-', starting with a letter or digit", v)
	}
}

// repoURL checks one of the accepted forms and returns its transport.
// Messages never quote the URL: it may carry a password, which is the
// point of one of the checks.
func (c *checker) repoURL(app, field, v string) transport {
	bad := func(format string, args ...any) transport {
		c.report(app, field, ErrInvalid, format, args...)
		return transportNone
	}
	switch {
	case v == "":
		c.report(app, field, ErrRequired, "required: "+acceptedForms)
		return transportNone
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return bad("contains whitespace or control characters")
	case strings.Contains(v, "://"):
		u, err := url.Parse(v)
		if err != nil {
			return bad("not a valid URL")
		}
		if _, hasPass := u.User.Password(); hasPass {
			return bad("the URL contains a password; name a file with source.credentials.passwordFile instead")
		}
		switch u.Scheme {
		case "https", "http", "ssh", "git":
			if u.Host == "" {
				return bad("%s URL has no host", u.Scheme)
			}
			if u.Path == "" || u.Path == "/" {
				return bad("%s URL has no repository path", u.Scheme)
			}
			switch u.Scheme {
			case "https":
				return transportHTTPS
			case "http":
				return transportHTTP
			case "git":
				return transportGit
			}
			return transportSSH
		case "file":
			if u.Host != "" && u.Host != "localhost" || !path.IsAbs(u.Path) {
				return bad("a file URL must be file:///absolute/path")
			}
			return transportLocal
		default:
			return bad("unsupported scheme %q; use https, http, ssh, git or file", u.Scheme)
		}
	case path.IsAbs(v):
		return transportLocal
	case scpLikeRE.MatchString(v):
		return transportSSH
	default:
		return bad("not one of " + acceptedForms)
	}
}

const acceptedForms = "https://host/repo, ssh://host/repo, user@host:repo, git://host/repo, file:///path or an absolute path"

func (c *checker) credentials(app, p string, cr *Credentials, tr transport) {
	for _, f := range []struct{ name, v string }{
		{"usernameFile", cr.UsernameFile}, {"passwordFile", cr.PasswordFile},
		{"sshKeyFile", cr.SSHKeyFile}, {"knownHostsFile", cr.KnownHostsFile},
	} {
		if f.v != "" && !path.IsAbs(f.v) {
			// Relative to what? The controller's working directory is
			// not something a user should have to reason about.
			c.report(app, p+"."+f.name, ErrInvalid, "%q must be an absolute path on the controller's host", f.v)
		}
	}
	if cr.UsernameFile != "" && cr.PasswordFile == "" {
		c.report(app, p+".usernameFile", ErrRequired, "usernameFile needs passwordFile")
	}
	if cr.SSHKeyFile != "" && cr.KnownHostsFile == "" {
		c.report(app, p+".knownHostsFile", ErrRequired, "required with sshKeyFile, so the host key is pinned rather than trusted on first use")
	}
	if cr.PasswordFile != "" && cr.SSHKeyFile != "" {
		c.report(app, p, ErrInvalid, "give passwordFile or sshKeyFile, not both")
	}
	switch tr {
	case transportHTTPS:
		if cr.SSHKeyFile != "" {
			c.report(app, p+".sshKeyFile", ErrInvalid, "an ssh key cannot authenticate an https URL")
		}
	case transportHTTP:
		if cr.PasswordFile != "" {
			c.report(app, p+".passwordFile", ErrInvalid, "refusing to send a password over plain http; use https")
		}
	case transportSSH:
		if cr.PasswordFile != "" {
			c.report(app, p+".passwordFile", ErrInvalid, "a password cannot authenticate an ssh URL; use sshKeyFile")
		}
	case transportLocal:
		if *cr != (Credentials{}) {
			c.report(app, p, ErrInvalid, "a local repository takes no credentials")
		}
	case transportGit:
		if *cr != (Credentials{}) {
			c.report(app, p, ErrInvalid, "git:// (git daemon) is anonymous and takes no credentials; use https or ssh")
		}
	}
}

// relPath checks that name, joined to base, stays inside the repository.
// base is "" for source.path itself.
func (c *checker) relPath(app, field, name, base string) {
	switch {
	case name == "":
		c.report(app, field, ErrRequired, "required")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		c.report(app, field, ErrInvalid, "%q contains control characters", name)
	case path.IsAbs(name):
		c.report(app, field, ErrInvalid, "%q must be relative to the repository", name)
	default:
		// base comes from the file too; when it escapes it has been
		// reported already and this check is about name alone.
		if escapes(base) {
			base = ""
		}
		if escapes(path.Join(base, name)) {
			c.report(app, field, ErrInvalid, "%q leaves the repository", name)
		}
	}
}

func escapes(p string) bool {
	p = path.Clean(p)
	return p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p)
}

func (c *checker) allow(app, p string, al *Allow) {
	for _, l := range []struct {
		name  string
		names []string
	}{
		{"networks", al.Networks}, {"configs", al.Configs},
		{"secrets", al.Secrets}, {"volumes", al.Volumes},
		{"volumeDrivers", al.VolumeDrivers}, {"networkDrivers", al.NetworkDrivers},
		{"templateDrivers", al.TemplateDrivers},
	} {
		for j, v := range l.names {
			if strings.TrimSpace(v) == "" {
				c.report(app, fmt.Sprintf("%s.%s[%d]", p, l.name, j), ErrRequired, "empty name")
			}
		}
	}
	for j, v := range al.HostPaths {
		if !path.IsAbs(v) {
			c.report(app, fmt.Sprintf("%s.hostPaths[%d]", p, j), ErrInvalid, "%q must be an absolute path", v)
		}
	}
	for j, v := range al.Capabilities {
		if !capabilityRE.MatchString(v) {
			c.report(app, fmt.Sprintf("%s.capabilities[%d]", p, j), ErrInvalid, "%q is not a capability name (SYS_ADMIN, CAP_NET_ADMIN, ALL)", v)
		}
	}
	for j, v := range al.Sysctls {
		if !sysctlRE.MatchString(v) {
			c.report(app, fmt.Sprintf("%s.sysctls[%d]", p, j), ErrInvalid, "%q is not a sysctl name (net.core.somaxconn); each is listed whole", v)
		}
	}
	for j, v := range al.AnalysisURLs {
		u, err := url.Parse(v)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			c.report(app, fmt.Sprintf("%s.analysisURLs[%d]", p, j), ErrInvalid, "want an http or https URL prefix with a host, e.g. http://traefik:8082/metrics")
		case u.User != nil:
			c.report(app, fmt.Sprintf("%s.analysisURLs[%d]", p, j), ErrInvalid, "a prefix carries no credentials; the repository's URL may")
		case u.RawQuery != "" || u.Fragment != "":
			c.report(app, fmt.Sprintf("%s.analysisURLs[%d]", p, j), ErrInvalid, "a prefix is scheme, host, port and path, without query or fragment")
		}
	}
	for j, v := range al.HostPorts {
		if v == 0 || v > 65535 {
			c.report(app, fmt.Sprintf("%s.hostPorts[%d]", p, j), ErrInvalid, "%d is not a port (1-65535)", v)
		}
	}
}

// badRevisionRune refuses what git refuses in ref names and what could be
// mistaken for something else on a command line.
func badRevisionRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("~^:?*[\\", r)
}

var (
	// envNameRE is what a shell accepts as a variable name.
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// headerNameRE is an HTTP token, the characters a header name may use.
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// capabilityRE is a Linux capability name, as Docker accepts it.
	capabilityRE = regexp.MustCompile(`^(?i:cap_)?[A-Za-z][A-Za-z0-9_]*$`)
	// sysctlRE is a whole sysctl name, dots or slashes between components.
	sysctlRE = regexp.MustCompile(`^[a-z0-9_-]+([./][A-Za-z0-9_.-]+)+$`)
)

// reservedHeaders are refused in Notification.Headers, each with the reason.
var reservedHeaders = map[string]string{
	"authorization":       "credentials are never written inline; put the whole URL in urlFile if the receiver takes a token in it",
	"proxy-authorization": "credentials are never written inline",
	"cookie":              "credentials are never written inline",
	"content-type":        "the sink sets it",
	"content-length":      "the sink sets it",
	"host":                "the sink sets it from the URL",
}

// notifications checks every sink; apps maps the file's application names
// to their index.
func (c *checker) notifications(ns []Notification, apps map[string]int) {
	names := map[string]int{}
	for i := range ns {
		n := &ns[i]
		p := "notifications[" + strconv.Itoa(i) + "]"
		c.dnsName("", p+".name", n.Name)
		if n.Name != "" {
			if j, dup := names[n.Name]; dup {
				c.report("", p+".name", ErrDuplicate, "name %q is already used by notifications[%d]", n.Name, j)
			} else {
				names[n.Name] = i
			}
		}
		c.notification(n, p, apps)
	}
}

func (c *checker) notification(n *Notification, p string, apps map[string]int) {
	switch n.Type {
	case NotifySlack, NotifyWebhook:
		if _, err := n.ParseTemplate(); err != nil {
			c.report("", p+".template", ErrInvalid, "%v", err)
		}
	case "":
		c.report("", p+".type", ErrRequired, "required: slack or webhook")
	default:
		c.report("", p+".type", ErrInvalid, "%q is not slack or webhook", n.Type)
	}

	// The URL is never quoted back: a user may have pasted it into the
	// wrong field.
	switch {
	case n.URLFile == "" && n.URLEnv == "":
		c.report("", p+".urlFile", ErrRequired, "required: urlFile or urlEnv says where the URL is read from; the URL is a credential and is never written in this file")
	case n.URLFile != "" && n.URLEnv != "":
		c.report("", p, ErrInvalid, "give urlFile or urlEnv, not both")
	case n.URLFile != "" && !path.IsAbs(n.URLFile):
		c.report("", p+".urlFile", ErrInvalid, "must be the absolute path of a file on the controller's host holding the URL, not the URL itself")
	case n.URLEnv != "" && !envNameRE.MatchString(n.URLEnv):
		c.report("", p+".urlEnv", ErrInvalid, "must be the name of an environment variable holding the URL (letters, digits and '_'), not the URL itself")
	}

	seen := map[events.Type]bool{}
	for j, t := range n.Events {
		fp := fmt.Sprintf("%s.events[%d]", p, j)
		switch {
		case !t.Valid() || t.Marker():
			c.report("", fp, ErrInvalid, "%q is not an event type; use one of %s", t, eventList())
		case seen[t]:
			c.report("", fp, ErrDuplicate, "%q is listed twice", t)
		}
		seen[t] = true
	}
	if n.Services && !seen[events.HealthChanged] {
		c.report("", p+".services", ErrInvalid, "per-service progress is a kind of %s; add it to events", events.HealthChanged)
	}
	for j, a := range n.Applications {
		if _, ok := apps[a]; !ok {
			c.report("", fmt.Sprintf("%s.applications[%d]", p, j), ErrInvalid, "%q is not an application of this file", a)
		}
	}

	if len(n.Headers) > 0 && n.Type == NotifySlack {
		c.report("", p+".headers", ErrInvalid, "only a webhook sink takes headers")
	}
	headers := map[string]bool{}
	for j, h := range n.Headers {
		hp := fmt.Sprintf("%s.headers[%d]", p, j)
		key := strings.ToLower(h.Name)
		switch {
		case h.Name == "":
			c.report("", hp+".name", ErrRequired, "required")
		case !headerNameRE.MatchString(h.Name):
			c.report("", hp+".name", ErrInvalid, "%q is not an HTTP header name", h.Name)
		case reservedHeaders[key] != "":
			c.report("", hp+".name", ErrInvalid, "%s is not allowed: %s", h.Name, reservedHeaders[key])
		case headers[key]:
			c.report("", hp+".name", ErrDuplicate, "header %s is set twice", h.Name)
		}
		headers[key] = true
		switch {
		case h.Value == "":
			c.report("", hp+".value", ErrRequired, "required")
		case strings.IndexFunc(h.Value, unicode.IsControl) >= 0 || !utf8.ValidString(h.Value):
			c.report("", hp+".value", ErrInvalid, "contains control characters or invalid UTF-8")
		}
	}
}

func eventList() string {
	ts := NotificationEvents()
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// templateFuncs are what a notification template may call besides
// text/template's builtins: text shaping only, nothing that reads files,
// the environment or the network.
var templateFuncs = template.FuncMap{
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	// trunc keeps the first n characters: {{trunc 12 .Revision}}.
	"trunc": func(n int, s string) string {
		if n < 0 || utf8.RuneCountInString(s) <= n {
			return s
		}
		return string([]rune(s)[:n])
	},
	// default gives d for an empty or missing value: {{.Service | default "-"}}.
	"default": func(d string, v any) string {
		if v == nil {
			return d
		}
		if s := fmt.Sprint(v); s != "" {
			return s
		}
		return d
	},
}

// templateSample is what ParseTemplate renders once to catch a field or
// function misuse at load rather than at the first delivery.
var templateSample = events.Event{
	ID: 1, Time: time.Unix(0, 0).UTC(), Type: events.HealthChanged,
	App: "app", Stack: "app", Service: "web", Revision: "0123456789abcdef0123456789abcdef01234567",
	Message: "message",
	Data:    map[string]any{events.DataRunning: 1, events.DataDesired: 2, events.DataUpdateState: "updating"},
}

// ParseTemplate compiles n.Template with the functions notification
// templates may use and renders it once with a sample event, so that
// Validate refuses what the notify package could not render. A template can
// still fail on real data (a function given a missing value); the notify
// package then falls back to the type's default.
func (n *Notification) ParseTemplate() (*template.Template, error) {
	t, err := template.New(n.Name).Funcs(templateFuncs).Option("missingkey=zero").Parse(n.Template)
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	if err := t.Execute(io.Discard, templateSample); err != nil {
		return nil, fmt.Errorf("render template: %w", err)
	}
	return t, nil
}
