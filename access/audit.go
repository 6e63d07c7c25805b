package access

import (
	"log/slog"
	"sync"
	"time"
)

// Entry is one audited write. It holds names and options, never a token or
// a secret: Who is the token's name, Options are the request's knobs.
type Entry struct {
	Time    time.Time `json:"time"`
	Who     string    `json:"who"`
	Role    Role      `json:"role,omitempty"`
	Project string    `json:"project,omitempty"`
	// Route is the method and pattern served ("POST …/sync").
	Route   string            `json:"route"`
	App     string            `json:"app,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	// Status is the HTTP status answered, refusals included.
	Status int `json:"status"`
}

// DefaultAuditSize is how many entries an Audit keeps by default.
const DefaultAuditSize = 1000

// Audit logs every write once and keeps the latest ones in memory for the
// API. Older entries drop off; the log lines are the durable record.
type Audit struct {
	log *slog.Logger

	mu   sync.Mutex
	ring []Entry
	next int
	full bool
}

// NewAudit returns an audit keeping size entries (DefaultAuditSize when size
// is not positive) and logging to log (slog.Default when nil).
func NewAudit(size int, log *slog.Logger) *Audit {
	if size <= 0 {
		size = DefaultAuditSize
	}
	if log == nil {
		log = slog.Default()
	}
	return &Audit{log: log.With("component", "audit"), ring: make([]Entry, size)}
}

// Record logs e and keeps it.
func (a *Audit) Record(e Entry) {
	attrs := []any{"who", e.Who, "role", string(e.Role), "route", e.Route, "status", e.Status}
	if e.Project != "" {
		attrs = append(attrs, "project", e.Project)
	}
	if e.App != "" {
		attrs = append(attrs, "app", e.App)
	}
	for k, v := range e.Options {
		attrs = append(attrs, k, v)
	}
	a.log.Info("write audited", attrs...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ring[a.next] = e
	a.next = (a.next + 1) % len(a.ring)
	if a.next == 0 {
		a.full = true
	}
}

// Entries returns what is kept, oldest first.
func (a *Audit) Entries() []Entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.full {
		return append([]Entry(nil), a.ring[:a.next]...)
	}
	out := make([]Entry, 0, len(a.ring))
	out = append(out, a.ring[a.next:]...)
	return append(out, a.ring[:a.next]...)
}
