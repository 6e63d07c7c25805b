package source

import (
	"regexp"
	"strings"
)

// redacted replaces whatever a sanitiser removes.
const redacted = "***"

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

// SanitizeString removes from s what must never reach a log, a status or an
// API response: URL user info, URL query strings and fragments, secret
// key=value pairs, authorization headers and well-known token formats.
// Commit SHAs and paths are left alone.
func SanitizeString(s string) string {
	s = userinfoRE.ReplaceAllString(s, "$1")
	s = queryRE.ReplaceAllString(s, "$1")
	s = secretPairRE.ReplaceAllString(s, "${1}${2}"+redacted)
	s = authHeaderRE.ReplaceAllString(s, "$1 "+redacted)
	s = tokenRE.ReplaceAllString(s, redacted)
	return s
}

// Sanitize returns err with its message passed through SanitizeString. The
// result still matches the original chain with errors.Is and errors.As, so
// callers can test for ErrRevisionNotFound; its Error text is the only text
// meant to be shown. Sanitize(nil) is nil.
func Sanitize(err error) error {
	return sanitize(err, nil)
}

// sanitize is Sanitize that also blanks the exact values in secrets, the
// credentials a fetch used, in case a transport echoed one back.
func sanitize(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	msg = SanitizeString(msg)
	if se, ok := err.(*sanitizedError); ok && se.msg == msg {
		return se
	}
	return &sanitizedError{msg: msg, err: err}
}

// sanitizedError shows a scrubbed message and keeps the original error for
// matching only.
type sanitizedError struct {
	msg string
	err error
}

func (e *sanitizedError) Error() string { return e.msg }
func (e *sanitizedError) Unwrap() error { return e.err }
