package reconcile

import (
	"errors"
	"fmt"

	"github.com/flotilla-gitops/flotilla/source"
)

// Kind says what happens after a pass fails, which is the only thing the
// controller needs to know about an error to decide how to retry and report.
type Kind string

// The error kinds.
const (
	// Stalled: the input is wrong (YAML, compose, a missing revision). The
	// same input fails the same way, so the application waits for a new
	// revision or configuration; it is retried only on its normal interval.
	Stalled Kind = "stalled"
	// Transient: something outside the input failed (an unreachable
	// repository or daemon). Retried with backoff.
	Transient Kind = "transient"
)

// passError attaches a Kind and the failing step to an error.
type passError struct {
	step string
	kind Kind
	err  error
}

func (e *passError) Error() string { return fmt.Sprintf("%s: %v", e.step, e.err) }
func (e *passError) Unwrap() error { return e.err }

// KindOf returns the kind of a pass error; unclassified errors are transient,
// because retrying a mistake costs less than stalling on a blip.
func KindOf(err error) Kind {
	var pe *passError
	if errors.As(err, &pe) {
		return pe.kind
	}
	return Transient
}

func stalled(step string, err error) error {
	return &passError{step: step, kind: Stalled, err: err}
}

func transient(step string, err error) error {
	return &passError{step: step, kind: Transient, err: err}
}

// fetchFailed types a failed git fetch: a revision that does not exist,
// or a tree over the fetcher's budget (a git bomb, say), waits for a new
// revision, since fetching the same commit again would be refused the
// same way; anything else (the network, the remote) is retried.
func fetchFailed(step string, err error) error {
	if errors.Is(err, source.ErrRevisionNotFound) || errors.Is(err, source.ErrTreeTooLarge) {
		return stalled(step, err)
	}
	return transient(step, err)
}
