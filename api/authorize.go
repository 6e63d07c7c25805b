package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/events"
)

// authz is what a route does, as authorize needs to know it.
type authz struct {
	op access.Op
	// scope says where the role comes from: the application the path
	// names, the controller as a whole, or nowhere (the handler filters).
	scope authzScope
}

type authzScope int

const (
	scopeApp authzScope = iota
	scopeGlobal
	scopeFiltered
	scopeOpen
)

// app: an operation on the application {name}.
func app(op access.Op) authz { return authz{op: op, scope: scopeApp} }

// global: an operation on the controller as a whole; only a global role
// counts.
func global(op access.Op) authz { return authz{op: op, scope: scopeGlobal} }

var (
	// filtered: any authenticated caller; the answer holds only what it
	// may read.
	filtered = authz{op: access.Read, scope: scopeFiltered}
	// open: no token needed (probes).
	open = authz{scope: scopeOpen}
)

// authorize asks the policy before h runs. A caller with no role on the
// application gets the same 404 as for an application that does not exist.
func (s *server) authorize(a authz, h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if a.scope == scopeOpen || s.open(r) {
			return h(w, r)
		}
		p, ok := principalFrom(r.Context())
		if !ok {
			return errorf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token")
		}
		id := p.identity()
		switch a.scope {
		case scopeApp:
			name := r.PathValue("name")
			switch s.opts.Policy.Decide(id, a.op, name) {
			case access.NotFound:
				return noApplication(name)
			case access.Forbidden:
				return errorf(http.StatusForbidden, CodeForbidden, "token %q has role %s on %q; this request needs %s",
					p.Name, s.opts.Policy.RoleOn(id, name), name, needs(a.op))
			}
		case scopeGlobal:
			if access.DecideGlobal(id, a.op) != access.Allow {
				return errorf(http.StatusForbidden, CodeForbidden, "token %q has no global role that allows this; it needs the %s token", p.Name, globalToken(a.op))
			}
		}
		return h(w, r)
	}
}

func needs(op access.Op) access.Role {
	for _, r := range []access.Role{access.Viewer, access.Operator, access.Admin} {
		if r.Allows(op) {
			return r
		}
	}
	return access.Admin
}

// globalToken names the controller token whose global role allows op.
func globalToken(op access.Op) string {
	if op == access.Read {
		return "read"
	}
	return "admin"
}

// noApplication is the one 404 for an application, whether it does not
// exist or the caller may not know that it does.
func noApplication(name string) error {
	return errorf(http.StatusNotFound, CodeNotFound, "no application %q; `flotilla app list` shows the known ones", name)
}

// canRead reports whether the request's caller may see app. An event or
// status with no application belongs to the controller as a whole and is
// for global roles only.
func (s *server) canRead(r *http.Request, app string) bool {
	return s.callerMay(r, access.Read, app)
}

// callerMay reports whether the request's caller may do op on app, or, for
// no application, on the controller as a whole (global roles only).
func (s *server) callerMay(r *http.Request, op access.Op, app string) bool {
	if s.opts.NoAuth {
		return true
	}
	p, ok := principalFrom(r.Context())
	if !ok {
		return false
	}
	id := p.identity()
	if app == "" {
		return access.DecideGlobal(id, op) == access.Allow
	}
	return s.opts.Policy.Decide(id, op, app) == access.Allow
}

// auditNote collects a write's options while its handler runs.
type auditNote struct {
	mu   sync.Mutex
	opts map[string]string
}

type auditKey struct{}

// noteAudit adds an option to the request's audit entry; a request that is
// not audited ignores it. Only options go here, never a secret.
func noteAudit(r *http.Request, key string, value any) {
	n, ok := r.Context().Value(auditKey{}).(*auditNote)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opts == nil {
		n.opts = map[string]string{}
	}
	switch v := value.(type) {
	case string:
		n.opts[key] = v
	case bool:
		n.opts[key] = strconv.FormatBool(v)
	case int:
		n.opts[key] = strconv.Itoa(v)
	}
}

// audited records every write served by pattern, refusals included, once
// its answer is written. A write with no principal (an open route such as
// logout, called with no session or token) is logged at debug level only:
// anyone can send it, and in the audit it would push out the entries of
// those who can change something, and the events of the replay ring.
func (s *server) audited(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWrite(r) {
			next.ServeHTTP(w, r)
			return
		}
		note := &auditNote{}
		if via := viaFrom(r.Context()); via != "" {
			note.opts = map[string]string{"via": via}
		}
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
		next.ServeHTTP(rec, r)
		p, ok := principalFrom(r.Context())
		if !ok {
			s.log.Debug("an anonymous write was not audited", "method", r.Method, "path", r.URL.Path, "status", rec.status)
			return
		}
		name := r.PathValue("name")
		e := access.Entry{Time: s.now(), Who: p.Name, Route: pattern, App: name, Status: rec.status}
		if e.Route == "/api/" {
			e.Route = r.Method + " " + r.URL.Path
		}
		if name != "" {
			e.Role = s.opts.Policy.RoleOn(p.identity(), name)
			e.Project = s.opts.Policy.Project(name)
		} else {
			e.Role = p.identity().Global
		}
		note.mu.Lock()
		e.Options = note.opts
		note.mu.Unlock()
		s.opts.Audit.Record(e)
		if s.opts.Events != nil {
			s.opts.Events.Publish(auditEvent(e))
		}
	})
}

// auditEvent is e as an event on the stream: the entry's fields in Data,
// the application (if any) in App, so ?app= narrows to it.
func auditEvent(e access.Entry) events.Event {
	data := map[string]any{"who": e.Who, "role": string(e.Role), "route": e.Route, "status": e.Status}
	if e.Project != "" {
		data["project"] = e.Project
	}
	if len(e.Options) > 0 {
		opts := make(map[string]any, len(e.Options))
		for k, v := range e.Options {
			opts[k] = v
		}
		data["options"] = opts
	}
	return events.Event{Time: e.Time, Type: events.AuditRecorded, App: e.App, Data: data,
		Message: fmt.Sprintf("%s by %s: %d", e.Route, e.Who, e.Status)}
}

// canReadAudit reports whether the caller may see the audit entry of a
// write on app: a global admin sees every entry, an admin of app's project
// the entries of its applications. An entry naming no application is for
// global admins only, like GET /api/v1/audit.
func (s *server) canReadAudit(r *http.Request, app string) bool {
	return s.callerMay(r, access.Administer, app)
}

// AuditList is the answer of GET /api/v1/audit, oldest first.
type AuditList struct {
	Items []access.Entry `json:"items"`
}

func (s *server) getAudit(w http.ResponseWriter, _ *http.Request) error {
	items := s.opts.Audit.Entries()
	if items == nil {
		items = []access.Entry{}
	}
	writeJSON(w, http.StatusOK, AuditList{Items: items})
	return nil
}
