// Package fault carries the one user-facing error shape every stage of a
// reconcile pass reports bad input with: which application, which file, which
// field, and what is wrong. It is a leaf package so that loading, rendering
// and validation can all speak it without depending on each other.
package fault

import (
	"errors"
	"strconv"
	"strings"
)

// Error is a problem with input a user wrote: the applications file, a
// compose file, an env file, a repository path. Empty parts are left out of
// the message. Line is 1-based and 0 when unknown.
type Error struct {
	App   string
	File  string
	Line  int
	Field string
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
	}
	if e.App != "" {
		b.WriteString("application " + strconv.Quote(e.App))
	}
	if e.File != "" {
		sep()
		b.WriteString("file " + e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
	}
	if e.Field != "" {
		sep()
		b.WriteString("field " + e.Field)
	}
	if e.Err != nil {
		sep()
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// WithApp returns err with the application name filled in: an *Error found
// in err's chain gets App set (on a copy), anything else is wrapped in a new
// *Error naming only the application.
func WithApp(app string, err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		if fe.App == "" {
			cp := *fe
			cp.App = app
			if fe == err {
				return &cp
			}
			return &wrapped{outer: err, inner: &cp}
		}
		return err
	}
	return &Error{App: app, Err: err}
}

// wrapped keeps an outer error's chain while reporting the copy of the inner
// *Error that now names the application.
type wrapped struct {
	outer error
	inner *Error
}

func (w *wrapped) Error() string {
	// The outer message already contains the inner one; prefix the app once.
	return "application " + strconv.Quote(w.inner.App) + ": " + w.outer.Error()
}

func (w *wrapped) Unwrap() []error { return []error{w.inner, w.outer} }
