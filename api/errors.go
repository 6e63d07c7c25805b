package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/flotilla-gitops/flotilla/redact"
)

// Error is the one error type handlers return to choose a status. Its
// Message is what the client sees; Err, when set, is the cause and is logged
// but never sent.
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Err     error  `json:"-"`
	// retryAfter, when set, is sent as Retry-After in seconds.
	retryAfter int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Error codes, stable for scripts.
const (
	CodeBadRequest     = "bad_request"
	CodeUnauthorized   = "unauthorized"
	CodeForbidden      = "forbidden"
	CodeNotFound       = "not_found"
	CodeConflict       = "conflict"
	CodeNotImplemented = "not_implemented"
	CodeUnavailable    = "unavailable"
	CodeStandby        = "standby" // 503: a write sent to a controller that stands by
	CodeInternal       = "internal"
)

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// classify turns any error into an *Error, choosing the status from the
// sentinels a Controller may wrap. The message is sanitised here, once, so
// nothing a handler returns can leak a credential.
func classify(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error(), Err: err}
		switch {
		case errors.Is(err, ErrNotFound):
			e.Status, e.Code = http.StatusNotFound, CodeNotFound
		case errors.Is(err, ErrConflict):
			e.Status, e.Code = http.StatusConflict, CodeConflict
		case errors.Is(err, errors.ErrUnsupported):
			e.Status, e.Code = http.StatusNotImplemented, CodeNotImplemented
		}
	}
	out := *e
	out.Message = redact.Text(out.Message)
	return &out
}

// writeError renders err as JSON and logs it, once: server faults at error
// level, client mistakes at info.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	level := slog.LevelInfo
	if e.Status >= 500 && e.Status != http.StatusNotImplemented {
		level = slog.LevelError
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", e.Status, "error", redact.Text(err.Error())}
	if name := r.PathValue("name"); name != "" {
		attrs = append(attrs, "app", name)
	}
	if p, ok := principalFrom(r.Context()); ok {
		attrs = append(attrs, "by", p.Name)
	}
	s.log.Log(r.Context(), level, "request refused", attrs...)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="flotilla"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.Status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client went away; nothing left to tell it
}
