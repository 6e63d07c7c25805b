package fault

import (
	"errors"
	"slices"
	"strings"
)

// redactedMark stands in a message where a withheld value was.
const redactedMark = "[redacted]"

// Redact blanks every one of values out of err's message, longest first so
// that a value holding another is blanked whole. The result still unwraps to
// err, so errors.Is finds the kind of problem. An *Error keeps its shape:
// file and line stay and the field is blanked too, so a redacted problem
// still says where it is. Renderers use it for errors that could quote a
// value decrypted with SOPS.
func Redact(err error, values []string) error {
	if err == nil || len(values) == 0 {
		return err
	}
	values = slices.Clone(values)
	slices.SortStableFunc(values, func(a, b string) int { return len(b) - len(a) })
	var fe *Error
	if errors.As(err, &fe) && fe == err {
		cp := *fe
		cp.Err = &redacted{cause: fe.Err, values: values}
		for _, v := range values {
			cp.Field = strings.ReplaceAll(cp.Field, v, redactedMark)
		}
		return &cp
	}
	return &redacted{cause: err, values: values}
}

// redacted is a message with every withheld value blanked out.
type redacted struct {
	cause  error
	values []string
}

func (e *redacted) Error() string {
	msg := e.cause.Error()
	for _, v := range e.values {
		msg = strings.ReplaceAll(msg, v, redactedMark)
	}
	return msg
}

func (e *redacted) Unwrap() error { return e.cause }
