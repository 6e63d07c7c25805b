// Package access decides what a caller may do with an application: the API
// asks it once per request, with the caller's identity and the kind of
// operation, and gets allow, forbidden or not found. Not found is the answer
// whenever the caller has no role at all on the application, so that a team
// holding a token for one project cannot learn which applications another
// project has.
//
// Roles come from two places: the controller's global tokens (the admin
// token is a global admin, the read token a global viewer) and the role
// bindings of the project an application belongs to, which name tokens of
// the tokens file. The stronger of the two wins.
package access

import (
	"slices"
	"sync/atomic"

	"github.com/flotilla-gitops/flotilla/application"
)

// Role is what a caller may do on an application.
type Role string

// Roles, weakest first. The zero Role is no role at all.
const (
	// Viewer may read status, history, diff and events.
	Viewer Role = "viewer"
	// Operator may also sync, refresh and roll back.
	Operator Role = "operator"
	// Admin may do everything.
	Admin Role = "admin"
)

// rank orders roles; an unknown role ranks with none.
func (r Role) rank() int {
	switch r {
	case Viewer:
		return 1
	case Operator:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Op is the kind of operation a route performs.
type Op string

// Operations, with the weakest role that may perform each.
const (
	// Read: list, get, diff, history, events. Viewer.
	Read Op = "read"
	// Operate: sync, refresh, rollback. Operator.
	Operate Op = "operate"
	// Administer: everything else (the audit log, say). Admin.
	Administer Op = "admin"
	// ReadLogs: the service logs. Operator, or Viewer where the
	// application's project sets viewerLogs.
	ReadLogs Op = "logs"
)

// needs is the weakest role that may perform op; an unknown op needs Admin
// so that a route added without thought is closed by default.
func (op Op) needs() Role {
	switch op {
	case Read:
		return Viewer
	case Operate, ReadLogs:
		return Operator
	}
	return Admin
}

// Allows reports whether r may perform op.
func (r Role) Allows(op Op) bool { return r.rank() > 0 && r.rank() >= op.needs().rank() }

// Identity is who a request comes from.
type Identity struct {
	// Name is the token's name; role bindings refer to it.
	Name string
	// Global is the role on every application, empty for a token that has
	// roles only through project bindings.
	Global Role
	// Groups are the single sign-on groups of a user who logged in through
	// the provider; bindings' groups refer to them. A user has no Name, so
	// that no token binding can match a user who happens to share its name.
	Groups []string
}

// Decision is the answer to one request.
type Decision int

// Decisions.
const (
	// Allow: go ahead.
	Allow Decision = iota
	// Forbidden: the caller may see the application but not do this (403).
	Forbidden
	// NotFound: the caller has no role on the application, and must not
	// learn whether it exists (404).
	NotFound
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Forbidden:
		return "forbidden"
	}
	return "not found"
}

// Policy holds the projects of the applications file. It is safe for
// concurrent use; SetProjects replaces them for every later decision, as an
// applications file reload does.
type Policy struct {
	projects atomic.Pointer[[]application.Project]
}

// NewPolicy returns a policy over projects.
func NewPolicy(projects []application.Project) *Policy {
	p := &Policy{}
	p.SetProjects(projects)
	return p
}

// SetProjects replaces the projects.
func (p *Policy) SetProjects(projects []application.Project) {
	cp := append([]application.Project(nil), projects...)
	p.projects.Store(&cp)
}

func (p *Policy) list() []application.Project {
	if p == nil {
		return nil
	}
	if ps := p.projects.Load(); ps != nil {
		return *ps
	}
	return nil
}

// Project names the project app belongs to, "" for none.
func (p *Policy) Project(app string) string {
	if pr := application.ProjectOf(p.list(), app); pr != nil {
		return pr.Name
	}
	return ""
}

// RoleOn is id's role on app: the stronger of its global role and the
// project binding naming it, "" for none.
func (p *Policy) RoleOn(id Identity, app string) Role {
	best := id.Global
	if best.rank() == 0 {
		best = ""
	}
	pr := application.ProjectOf(p.list(), app)
	if pr == nil || (id.Name == "" && len(id.Groups) == 0) {
		return best
	}
	for _, b := range pr.Roles {
		if Role(b.Role).rank() <= best.rank() {
			continue
		}
		if (id.Name != "" && slices.Contains(b.Tokens, id.Name)) || anyIn(id.Groups, b.Groups) {
			best = Role(b.Role)
		}
	}
	return best
}

// Decide answers whether id may perform op on the application named app.
func (p *Policy) Decide(id Identity, op Op, app string) Decision {
	if op == ReadLogs {
		if pr := application.ProjectOf(p.list(), app); pr != nil && pr.ViewerLogs {
			op = Read
		}
	}
	r := p.RoleOn(id, app)
	switch {
	case r == "":
		return NotFound
	case !r.Allows(op):
		return Forbidden
	}
	return Allow
}

// DecideGlobal answers for an operation on no one application (the audit
// log, metrics that cover every application): only a global role counts,
// since a project role says nothing about the others.
func DecideGlobal(id Identity, op Op) Decision {
	if id.Global.Allows(op) {
		return Allow
	}
	return Forbidden
}

// CanRead reports whether id may see app at all: the filter of the
// application list and the event stream.
func (p *Policy) CanRead(id Identity, app string) bool {
	return p.Decide(id, Read, app) == Allow
}

// anyIn reports whether some element of have is in want.
func anyIn(have, want []string) bool {
	for _, h := range have {
		if h != "" && slices.Contains(want, h) {
			return true
		}
	}
	return false
}
