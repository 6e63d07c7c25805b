package application

import (
	"path"
	"slices"
	"strconv"
)

// Project groups applications for access control: who may read or act on
// them, and which repositories and stacks they may use. An application
// belongs to the project whose Applications globs match its name; one that
// matches no project is reachable by the global tokens only.
type Project struct {
	// Name identifies the project in bindings, logs and the audit; same
	// rule as an application's name, unique in a file. Required.
	Name string `yaml:"name"`
	// Applications are names or path.Match globs ("shop-*") of the
	// applications that belong. Required, at least one.
	Applications []string `yaml:"applications"`
	// SourceRepos are globs a member's source.repoURL must match. Default:
	// none listed, any repository. Note that "*" does not match "/".
	SourceRepos []string `yaml:"sourceRepos,omitempty"`
	// Stacks are globs a member's stack must match. Default: none listed,
	// any stack.
	Stacks []string `yaml:"stacks,omitempty"`
	// Destinations limit the swarms, and the stacks on each, a member may
	// deploy to: an application must match one entry. Default: none
	// listed, any swarm (within Stacks).
	Destinations []ProjectDestination `yaml:"destinations,omitempty"`
	// Roles bind token names (from the controller's tokens file) to a role
	// on this project's applications. Default: none.
	Roles []RoleBinding `yaml:"roles,omitempty"`
	// ViewerLogs lets the project's viewers read its applications' service
	// logs. Default false: what a task prints can be more than its status
	// says, so logs take an operator.
	ViewerLogs bool `yaml:"viewerLogs,omitempty"`
	// SOPS is the age key that decrypts the SOPS files of the project's
	// applications that have no key of their own. Given, those
	// applications no longer use the controller-wide key: another team's
	// ciphertext, copied into a member's repository, does not open.
	// Default: none, and members without a key of their own use the
	// controller's --sops-age-key-file.
	SOPS *SOPS `yaml:"sops,omitempty"`
}

// ProjectDestination is one swarm (a name or glob of the file's swarms, or
// "local") and the stacks a project's members may use on it.
type ProjectDestination struct {
	// Swarm is a destination name or glob. Required.
	Swarm string `yaml:"swarm"`
	// Stacks are globs the stack must match on that swarm. Default: none
	// listed, any stack.
	Stacks []string `yaml:"stacks,omitempty"`
}

// allows reports whether d admits stack on the destination dest.
func (d *ProjectDestination) allows(dest, stack string) bool {
	return matchAny([]string{d.Swarm}, dest) && (len(d.Stacks) == 0 || matchAny(d.Stacks, stack))
}

// RoleBinding gives Tokens one Role on a project.
type RoleBinding struct {
	// Role is viewer, operator or admin. Required.
	Role string `yaml:"role"`
	// Tokens are token names from the tokens file.
	Tokens []string `yaml:"tokens,omitempty"`
	// Groups are group names of the single sign-on provider's groups
	// claim. A binding needs at least one token or one group.
	Groups []string `yaml:"groups,omitempty"`
}

// ProjectRoles is the closed set of roles a binding may name; the access
// package gives them their meaning.
var ProjectRoles = []string{"viewer", "operator", "admin"}

// Member reports whether the application named app belongs to p.
func (p *Project) Member(app string) bool { return matchAny(p.Applications, app) }

// ProjectOf returns the project app belongs to, or nil. Validate refuses a
// file where an application matches two projects, so the first is the only.
func ProjectOf(projects []Project, app string) *Project {
	for i := range projects {
		if projects[i].Member(app) {
			return &projects[i]
		}
	}
	return nil
}

// matchAny reports whether s matches one of globs. A malformed glob matches
// nothing; Validate reports it.
func matchAny(globs []string, s string) bool {
	for _, g := range globs {
		if ok, err := path.Match(g, s); err == nil && ok {
			return true
		}
	}
	return false
}

// projects checks the projects and that every member application stays
// within its project's repositories and stacks.
func (c *checker) projects(f *File) {
	names := map[string]int{}
	for i := range f.Projects {
		pr := &f.Projects[i]
		p := "projects[" + strconv.Itoa(i) + "]"
		c.dnsName("", p+".name", pr.Name)
		if j, dup := names[pr.Name]; dup && pr.Name != "" {
			c.report("", p+".name", ErrDuplicate, "project %q is already defined by projects[%d]", pr.Name, j)
		} else {
			names[pr.Name] = i
		}
		if len(pr.Applications) == 0 {
			c.report("", p+".applications", ErrRequired, "required: at least one application name or glob")
		}
		c.globs(p+".applications", pr.Applications)
		c.globs(p+".sourceRepos", pr.SourceRepos)
		c.globs(p+".stacks", pr.Stacks)
		c.sops("", p, pr.SOPS)
		// The key is bound to the project's repositories: without them, any
		// application that comes to carry a member's name (an application
		// set's directory, say) from any repository would have it.
		if pr.SOPS != nil && len(pr.SourceRepos) == 0 {
			c.report("", p+".sops", ErrInvalid, "a project key needs sourceRepos, so that it decrypts only files from the project's repositories")
		}
		for j := range pr.Destinations {
			d := &pr.Destinations[j]
			dp := p + ".destinations[" + strconv.Itoa(j) + "]"
			if d.Swarm == "" {
				c.report("", dp+".swarm", ErrRequired, "required: a swarm name or glob (%q for the controller's own)", LocalDestination)
			} else {
				c.globs(dp+".swarm", []string{d.Swarm})
			}
			c.globs(dp+".stacks", d.Stacks)
		}
		for j := range pr.Roles {
			b := &pr.Roles[j]
			bp := p + ".roles[" + strconv.Itoa(j) + "]"
			if !slices.Contains(ProjectRoles, b.Role) {
				c.report("", bp+".role", ErrInvalid, "%q is not a role; use viewer, operator or admin", b.Role)
			}
			if len(b.Tokens) == 0 && len(b.Groups) == 0 {
				c.report("", bp+".tokens", ErrRequired, "required: at least one token name from the tokens file, or a group of the single sign-on provider (groups)")
			}
			for k, g := range b.Groups {
				if g == "" {
					c.report("", bp+".groups["+strconv.Itoa(k)+"]", ErrRequired, "a group name must not be empty")
				}
			}
			for k, t := range b.Tokens {
				if t == "" {
					c.report("", bp+".tokens["+strconv.Itoa(k)+"]", ErrRequired, "a token name must not be empty")
				}
			}
		}
	}
	for i := range f.Applications {
		a := &f.Applications[i]
		p := "applications[" + strconv.Itoa(i) + "]"
		var in []int
		for j := range f.Projects {
			if f.Projects[j].Member(a.Name) {
				in = append(in, j)
			}
		}
		if len(in) > 1 {
			c.report(a.Name, p+".name", ErrInvalid, "belongs to projects %q and %q; an application may belong to one project only",
				f.Projects[in[0]].Name, f.Projects[in[1]].Name)
		}
		if len(in) == 0 {
			continue
		}
		pr := &f.Projects[in[0]]
		if len(pr.SourceRepos) > 0 && !matchAny(pr.SourceRepos, a.Source.RepoURL) {
			c.report(a.Name, p+".source.repoURL", ErrInvalid, "the repository is outside project %q (sourceRepos %q); the application is not deployed",
				pr.Name, pr.SourceRepos)
		}
		// Values decide what runs as much as the chart does.
		if v := a.Source.Values; v != nil && len(pr.SourceRepos) > 0 && !matchAny(pr.SourceRepos, v.RepoURL) {
			c.report(a.Name, p+".source.values.repoURL", ErrInvalid, "the values repository is outside project %q (sourceRepos %q); the application is not deployed",
				pr.Name, pr.SourceRepos)
		}
		if len(pr.Stacks) > 0 && !matchAny(pr.Stacks, a.Stack) {
			field := p + ".stack"
			if !c.m.written(field) {
				field = p + ".name" // the stack defaulted to the name
			}
			c.report(a.Name, field, ErrInvalid, "stack %q is outside project %q (stacks %q); the application is not deployed",
				a.Stack, pr.Name, pr.Stacks)
		}
		if len(pr.Destinations) > 0 {
			dest := a.Destination
			if dest == "" {
				dest = LocalDestination
			}
			if !slices.ContainsFunc(pr.Destinations, func(d ProjectDestination) bool { return d.allows(dest, a.Stack) }) {
				field := p + ".destination"
				if !c.m.written(field) {
					field = p + ".name"
				}
				c.report(a.Name, field, ErrInvalid, "stack %q on swarm %q is outside project %q's destinations; the application is not deployed",
					a.Stack, dest, pr.Name)
			}
		}
	}
}

func (c *checker) globs(field string, globs []string) {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			c.report("", field+"["+strconv.Itoa(i)+"]", ErrInvalid, "%q is not a valid glob (path.Match syntax: *, ?, [a-z])", g)
		}
	}
}
