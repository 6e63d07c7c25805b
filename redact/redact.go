// Package redact is the one place that decides which text must never reach
// a log line, a status, an API answer, an event, a notification or a
// release record, and what stands in its place. Every step of the pass that
// shows text it did not write (a git or registry error, a hook's output, a
// chart's failure, a service's logs, a drift value) passes it through here
// before it leaves the process.
//
// Two kinds of withheld text: values the caller knows (credentials a fetch
// used, values decrypted with SOPS or read from a secret store), blanked
// exactly by Values; and text whose shape gives it away (URL user info and
// query strings, key=value pairs whose key names a secret, authorization
// headers, well-known token formats), blanked by Text. Both read as Mark.
package redact

import (
	"regexp"
	"slices"
	"strings"
)

// Mark is what a withheld value reads as, everywhere.
const Mark = "***"

var (
	// scheme://user[:password]@ — the user info of any URL.
	userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@'"]+@`)
	// The query string and fragment of any URL, up to whitespace or a quote.
	queryRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'"]*)[?#][^\s'"]*`)
	// key=value and key: value pairs whose key names a secret. The key must
	// not be the last part of a path ("/etc/passwd": ...), which names a
	// file rather than holding a value.
	secretPairRE = regexp.MustCompile(`(?i)(^|[^/\w.-])((?:access_?|private_?|auth_?|api_?|refresh_?)?(?:token|password|passwd|secret|api_?key|apikey)["']?\s*[=:]\s*)["']?[^\s&,;"']+`)
	// Authorization headers.
	authHeaderRE = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{16,}`)
	// Well-known token formats (GitHub, GitLab, Slack, Bitbucket, AWS keys).
	tokenRE = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|ATBB[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16})\b`)
)

// Text removes from s what its shape says is a secret: URL user info, URL
// query strings and fragments, secret key=value pairs, authorization
// headers and well-known token formats. Commit SHAs and paths are left
// alone.
func Text(s string) string {
	s = userinfoRE.ReplaceAllString(s, "$1")
	s = queryRE.ReplaceAllString(s, "$1")
	s = secretPairRE.ReplaceAllString(s, "${1}${2}"+Mark)
	s = authHeaderRE.ReplaceAllString(s, "$1 "+Mark)
	s = tokenRE.ReplaceAllString(s, Mark)
	return s
}

// Values blanks every one of values in s, longest first so that a value
// holding another is blanked whole. Values shorter than minLen are left:
// blanking every "true" or "admin" in a text would say which words the
// secret is, and hide the text's meaning besides.
func Values(s string, values []string, minLen int) string {
	if s == "" || len(values) == 0 {
		return s
	}
	vs := make([]string, 0, len(values))
	for _, v := range values {
		if len(v) >= max(minLen, 1) {
			vs = append(vs, v)
		}
	}
	slices.SortStableFunc(vs, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vs {
		s = strings.ReplaceAll(s, v, Mark)
	}
	return s
}

// Error returns err with its message passed through Values (values of any
// length) and Text. The result still matches err's chain with errors.Is and
// errors.As, so a caller can test for its sentinels; its Error text is the
// only text meant to be shown. Error(nil) is nil.
func Error(err error, values ...string) error {
	if err == nil {
		return nil
	}
	msg := Text(Values(err.Error(), values, 1))
	if r, ok := err.(*redacted); ok && r.msg == msg {
		return r
	}
	return &redacted{msg: msg, err: err}
}

// redacted shows a cleaned message and keeps the original error for
// matching only.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
