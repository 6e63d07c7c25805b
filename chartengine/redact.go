package chartengine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/fault"
)

// minRedacted is the shortest decrypted value blanked out of messages:
// shorter ones ("1", "yes") would mangle messages and protect nothing.
const minRedacted = 4

// secretsOf collects the text of every value of a decrypted value file, so
// that no error message can carry one into status, events or logs.
func secretsOf(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			out = secretsOf(e, out)
		}
	case []any:
		for _, e := range v {
			out = secretsOf(e, out)
		}
	case nil:
	default:
		if s := fmt.Sprint(v); len(s) >= minRedacted {
			out = append(out, s)
		}
	}
	return out
}

// redactedError replaces every decrypted value in a message with a
// marker. It still unwraps, so errors.Is finds the kind of problem.
type redactedError struct {
	cause  error
	values []string
}

func (e *redactedError) Error() string {
	msg := e.cause.Error()
	for _, v := range e.values {
		msg = strings.ReplaceAll(msg, v, "[decrypted value withheld]")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.cause }

// redact withholds decrypted values from err's message, keeping its shape:
// a *fault.Error stays one, with its file, line and field.
func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	// Longest first, so a value containing another is replaced whole.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	var fe *fault.Error
	if errors.As(err, &fe) && fe == err {
		cp := *fe
		cp.Err = &redactedError{cause: fe.Err, values: secrets}
		for _, s := range secrets {
			cp.Field = strings.ReplaceAll(cp.Field, s, "[withheld]")
		}
		return &cp
	}
	return &redactedError{cause: err, values: secrets}
}
