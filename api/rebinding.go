package api

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Codes of the refusals loopbackOnly makes.
const (
	// CodeMisdirected (421): a request to the unauthenticated API under a
	// name other than localhost or a loopback address.
	CodeMisdirected = "misdirected_request"
	// CodeCrossOrigin (403): a request to the unauthenticated API from a
	// page of another origin.
	CodeCrossOrigin = "cross_origin"
)

// loopbackOnly guards the API that runs without authentication. Listening
// on loopback keeps other machines out, but not a web page the operator
// opens: DNS rebinding points the page's own name at 127.0.0.1, and the
// browser then treats the API as the page's origin, custom headers and
// JSON bodies included. Such a request still names the page's host, so
// only requests for localhost or a loopback literal (any port) are served
// (421 otherwise), and a request that carries an Origin must come from
// the API's own origin (403 otherwise).
func (s *server) loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			s.writeError(w, r, errorf(http.StatusMisdirectedRequest, CodeMisdirected,
				"the API runs without authentication and answers only to localhost or a loopback address, not to Host %q", r.Host))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			s.writeError(w, r, errorf(http.StatusForbidden, CodeCrossOrigin,
				"the API runs without authentication and refuses requests from pages of another origin (%q)", o))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names localhost or a loopback
// IP literal, with or without a port. No name that DNS resolves is
// accepted, since DNS is what the attacker controls.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if host == "" || strings.Contains(host, "%") {
		return false
	}
	return isLoopback(host)
}

// sameOrigin reports whether origin is http(s):// followed by host, the
// request's own Host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}
