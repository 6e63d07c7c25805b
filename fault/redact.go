package fault

import (
	"errors"

	"github.com/flotilla-gitops/flotilla/redact"
)

// Redact blanks every one of values out of err's message (redact.Values). The result still unwraps to
// err, so errors.Is finds the kind of problem. An *Error keeps its shape:
// file and line stay and the field is blanked too, so a redacted problem
// still says where it is. Renderers use it for errors that could quote a
// value decrypted with SOPS.
func Redact(err error, values []string) error {
	if err == nil || len(values) == 0 {
		return err
	}
	var fe *Error
	if errors.As(err, &fe) && fe == err {
		cp := *fe
		cp.Err = &redacted{cause: fe.Err, values: values}
		cp.Field = redact.Values(cp.Field, values, 1)
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
	return redact.Values(e.cause.Error(), e.values, 1)
}

func (e *redacted) Unwrap() error { return e.cause }
