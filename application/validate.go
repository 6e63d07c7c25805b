package application

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"

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
	names := map[string]int{}
	stacks := map[string]int{}
	for i := range f.Applications {
		a := &f.Applications[i]
		p := "applications[" + strconv.Itoa(i) + "]"
		c.application(a, p)
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
			if j, dup := stacks[a.Stack]; dup {
				// Two loops deploying one stack would undo each other and
				// each prune what the other declares.
				c.report(a.Name, p+".stack", ErrDuplicate, "stack %q is already claimed by application %q", a.Stack, f.Applications[j].Name)
			} else {
				stacks[a.Stack] = i
			}
		}
	}
	return c.errs
}

func (c *checker) application(a *Application, p string) {
	app := a.Name
	c.dnsName(app, p+".name", a.Name)
	if a.Stack != a.Name {
		c.dnsName(app, p+".stack", a.Stack)
	}

	s := &a.Source
	tr := c.repoURL(app, p+".source.repoURL", s.RepoURL)
	switch {
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
	if s.Credentials != nil {
		c.credentials(app, p+".source.credentials", s.Credentials, tr)
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
	if a.History < 1 {
		c.report(app, p+".history", ErrInvalid, "must be at least 1, not %d", a.History)
	}
	c.allow(app, p+".allow", &a.Allow)
	if ra := a.RegistryAuth; ra != nil {
		switch {
		case ra.File == "":
			c.report(app, p+".registryAuth.file", ErrRequired, "required: the absolute path of a Docker config.json, such as /run/secrets/%s-regcreds", app)
		case !path.IsAbs(ra.File):
			c.report(app, p+".registryAuth.file", ErrInvalid, "%q must be an absolute path on the controller's host", ra.File)
		}
	}
	if s := a.SOPS; s != nil {
		switch {
		case s.AgeKeyFile == "":
			c.report(app, p+".sops.ageKeyFile", ErrRequired, "required: the absolute path of an age identity file, such as /run/secrets/%s-age-key", app)
		case !path.IsAbs(s.AgeKeyFile):
			c.report(app, p+".sops.ageKeyFile", ErrInvalid, "%q must be an absolute path on the controller's host", s.AgeKeyFile)
		}
	}
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
		case "https", "http", "ssh":
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
			}
			return transportSSH
		case "file":
			if u.Host != "" && u.Host != "localhost" || !path.IsAbs(u.Path) {
				return bad("a file URL must be file:///absolute/path")
			}
			return transportLocal
		default:
			return bad("unsupported scheme %q; use https, http, ssh or file", u.Scheme)
		}
	case path.IsAbs(v):
		return transportLocal
	case scpLikeRE.MatchString(v):
		return transportSSH
	default:
		return bad("not one of " + acceptedForms)
	}
}

const acceptedForms = "https://host/repo, ssh://host/repo, user@host:repo, file:///path or an absolute path"

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
}

// badRevisionRune refuses what git refuses in ref names and what could be
// mistaken for something else on a command line.
func badRevisionRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("~^:?*[\\", r)
}
