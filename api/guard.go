package api

import (
	"mime"
	"net/http"
	"time"
)

// RequestHeader is the header every write must carry, with any non-empty
// value (the CLI and the UI send "1"). A browser sends a custom header
// cross-origin only after a CORS preflight, which this API never grants, and
// an HTML form cannot send one at all; so a page the operator happens to
// open cannot make the browser sync, prune or roll back, even when the API
// runs with --insecure-no-auth on loopback.
const RequestHeader = "X-Flotilla-Request"

// Codes of the refusals guardWrites makes.
const (
	// CodeUnsupportedMediaType (415): a write whose body is not declared
	// as JSON.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeRequestHeaderMissing (403): a write without RequestHeader.
	CodeRequestHeaderMissing = "request_header_missing"
)

// isWrite reports whether r may change something. Anything but a read is a
// write, so a method added later is guarded by default.
func isWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// guardWrites refuses a write unless it declares a JSON body (415) and
// carries RequestHeader (403). The Content-Type check alone would already
// stop a plain form (forms cannot send application/json), but not a
// cross-origin fetch with a "simple" text/plain body; the custom header
// stops both. Webhooks are routed around this: forges sign their bodies.
func (s *server) guardWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWrite(r) {
			if err := checkWrite(r); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func checkWrite(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"%s %s needs Content-Type: application/json (an empty body is fine)", r.Method, r.URL.Path)
	}
	if r.Header.Get(RequestHeader) == "" {
		return errorf(http.StatusForbidden, CodeRequestHeaderMissing,
			"%s %s needs the header %s: 1, which the flotilla CLI and web UI send; it keeps browser pages from triggering writes", r.Method, r.URL.Path, RequestHeader)
	}
	return nil
}

// liftWriteDeadline moves the server's write deadline to until (zero: none)
// for one answer that is meant to last: an event stream, a waited sync.
// The read deadline needs no lifting: net/http clears it once the request
// has been read.
func liftWriteDeadline(w http.ResponseWriter, until time.Time) {
	_ = http.NewResponseController(w).SetWriteDeadline(until)
}
