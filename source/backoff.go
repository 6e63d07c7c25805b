package source

import "time"

// backoff remembers consecutive failures of one repository URL so that a
// broken or unreachable remote is not hammered by every application that
// uses it. The zero value has never failed.
type backoff struct {
	min, max time.Duration
	failures int
	until    time.Time
	err      error
}

// blocked reports whether now is inside the window opened by the last
// failure, and that failure's error.
func (b *backoff) blocked(now time.Time) (time.Time, error, bool) {
	if b.failures == 0 || !now.Before(b.until) {
		return time.Time{}, nil, false
	}
	return b.until, b.err, true
}

// fail records a failure and opens a window twice as long as the previous
// one, from min up to max.
func (b *backoff) fail(now time.Time, err error) time.Time {
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

// reset forgets all failures after a successful contact.
func (b *backoff) reset() {
	b.failures = 0
	b.until = time.Time{}
	b.err = nil
}
