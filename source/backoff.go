package source

import "time"

// FailureWindow remembers consecutive failures of one remote so that a
// broken or unreachable one is not hammered by every application that uses
// it: git repositories here, chart repositories in package chartrepo.
// Build it with NewFailureWindow; it is not safe for concurrent use.
type FailureWindow struct {
	min, max time.Duration
	failures int
	until    time.Time
	err      error
}

// NewFailureWindow returns a window that opens for min after the first
// failure and doubles with each further one, up to max.
func NewFailureWindow(min, max time.Duration) *FailureWindow {
	return &FailureWindow{min: min, max: max}
}

// Blocked reports whether now is inside the window opened by the last
// failure, and that failure's error.
func (b *FailureWindow) Blocked(now time.Time) (time.Time, error, bool) {
	if b.failures == 0 || !now.Before(b.until) {
		return time.Time{}, nil, false
	}
	return b.until, b.err, true
}

// Fail records a failure and opens a window twice as long as the previous
// one, from min up to max.
func (b *FailureWindow) Fail(now time.Time, err error) time.Time {
	b.failures++
	d := b.min
	for i := 1; i < b.failures && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	b.until = now.Add(d)
	b.err = err
	return b.until
}

// Reset forgets all failures after a successful contact.
func (b *FailureWindow) Reset() {
	b.failures = 0
	b.until = time.Time{}
	b.err = nil
}
