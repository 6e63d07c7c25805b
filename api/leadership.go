package api

import (
	"fmt"
	"net/http"
)

// Leadership is what a controller running with a leader lease knows of
// it. A standby answers every read and refuses every write, since writes
// are the leader's alone.
type Leadership struct {
	// ID is this controller's id in the lease.
	ID string `json:"id"`
	// Leader is true while this controller holds the lease and writes.
	Leader bool `json:"leader"`
	// Holder is the controller holding the lease as last observed ("" when
	// nobody does), and Epoch its epoch.
	Holder string `json:"holder,omitempty"`
	Epoch  uint64 `json:"epoch"`
}

// Role is "leader" or "standby".
func (l Leadership) Role() string {
	if l.Leader {
		return "leader"
	}
	return "standby"
}

// Readiness is the body of a 200 from /readyz. Role, Leader and Epoch are
// set only for a controller with a leader lease.
type Readiness struct {
	Status string `json:"status"`
	Role   string `json:"role,omitempty"`
	ID     string `json:"id,omitempty"`
	Leader string `json:"leader,omitempty"`
	Epoch  uint64 `json:"epoch,omitempty"`
}

func (s *server) readiness() Readiness {
	r := Readiness{Status: "ready"}
	if s.opts.Leadership != nil {
		l := s.opts.Leadership()
		r.Role, r.ID, r.Leader, r.Epoch = l.Role(), l.ID, l.Holder, l.Epoch
	}
	return r
}

// standbyRefusesWrites answers every write with 503 while this controller
// stands by, naming the leader, so a client learns where to send it. A sync
// accepted here could only wait for a leadership that may never come.
func (s *server) standbyRefusesWrites(next http.Handler) http.Handler {
	if s.opts.Leadership == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWrite(r) {
			if l := s.opts.Leadership(); !l.Leader {
				e := errorf(http.StatusServiceUnavailable, CodeStandby, "%s", standbyMessage(l))
				e.retryAfter = 1
				s.writeError(w, r, e)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func standbyMessage(l Leadership) string {
	if l.Holder == "" || l.Holder == l.ID {
		return fmt.Sprintf("controller %q stands by and writes nothing: no controller holds the leader lease right now (last epoch %d); retry shortly", l.ID, l.Epoch)
	}
	return fmt.Sprintf("controller %q stands by and writes nothing: controller %q leads (epoch %d); send writes to it", l.ID, l.Holder, l.Epoch)
}
