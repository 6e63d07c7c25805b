package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
)

// StoreRotations lets a secret store's rotation reach the controller
// before the store's pollInterval would: POST
// /api/v1/secretstores/{name}/rotated. A controller without it answers
// that route with 501, and rotations are still found by polling.
type StoreRotations interface {
	// StoreUsers lists the applications whose last renders used a value of
	// store (only the entry at path, when path is not ""), and every
	// application granted that store; granted is empty for a store the
	// applications file does not declare.
	StoreUsers(store, path string) (users, granted []string)
	// ExpireStore makes those values due for a read at once.
	ExpireStore(store, path string)
}

// StoreRotatedRequest is the optional body of POST …/rotated.
type StoreRotatedRequest struct {
	// Path limits the rotation to one entry, as compose names it
	// (kv/data/shop/db); empty: every entry of the store.
	Path string `json:"path,omitempty"`
}

// StoreRotatedResponse says which passes a rotation made due.
type StoreRotatedResponse struct {
	Store string `json:"store"`
	Path  string `json:"path,omitempty"`
	// Queued are the applications that use the store's values (at Path)
	// and that the caller may operate: their pass is due now.
	Queued  []string  `json:"queued"`
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
}

// postStoreRotated re-reads a store's values at the next pass and queues
// the applications that use them. The caller needs the admin token or an
// operator's role on an application granted the store; only the
// applications it may operate are queued, while the values are re-read
// for all (a re-read is harmless, and the store watch then starts the pass
// of any other application whose value moved).
func (s *server) postStoreRotated(w http.ResponseWriter, r *http.Request) error {
	sr, ok := s.ctl.(StoreRotations)
	if !ok {
		return unsupported("the secret store rotation webhook", "StoreRotations")
	}
	store := r.PathValue("name")
	var body StoreRotatedRequest
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if body.Path != "" && (strings.ContainsAny(body.Path, "\x00\r\n") || len(body.Path) > 1024) {
		return errorf(http.StatusBadRequest, CodeBadRequest, "path must be a store path such as kv/data/shop/db")
	}
	noteAudit(r, "store", store)
	if body.Path != "" {
		noteAudit(r, "path", body.Path)
	}
	users, granted := sr.StoreUsers(store, body.Path)
	may := func(app string) bool { return s.callerMay(r, access.Operate, app) }
	if !slices.ContainsFunc(granted, func(a string) bool { return s.callerMay(r, access.Read, a) }) && !s.callerMay(r, access.Operate, "") {
		return errorf(http.StatusNotFound, CodeNotFound, "no secret store %q is granted to an application you may see", store)
	}
	if !s.callerMay(r, access.Operate, "") && !slices.ContainsFunc(granted, may) {
		p, _ := principalFrom(r.Context())
		return errorf(http.StatusForbidden, CodeForbidden, "token %q may operate no application granted secret store %q; this request needs %s on one, or the %s token", p.Name, store, access.Operator, "admin")
	}
	if len(granted) == 0 {
		return errorf(http.StatusNotFound, CodeNotFound, "no secret store %q is granted to any application", store)
	}
	sr.ExpireStore(store, body.Path)
	queued := []string{}
	for _, app := range users {
		if !may(app) {
			continue
		}
		if err := s.ctl.Refresh(app); err != nil {
			return fmt.Errorf("store %q rotated: refresh %q: %w", store, app, err)
		}
		queued = append(queued, app)
	}
	p, _ := principalFrom(r.Context())
	s.log.Info("secret store rotation reported", "store", store, "path", body.Path, "by", p.Name, "role", p.Role, "queued", len(queued))
	writeJSON(w, http.StatusAccepted, StoreRotatedResponse{Store: store, Path: body.Path, Queued: queued, Time: s.now(),
		Message: "the store's values are read again by the next pass; the applications that use them are due now"})
	return nil
}
