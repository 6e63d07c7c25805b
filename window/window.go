// Package window decides whether a sync may run now, given the sync
// windows of an applications file: recurring periods, each a cron schedule
// and a duration, that either allow syncs (and nothing outside them) or
// deny them. It is a pure function of the windows, an application's name
// and a clock reading, so a freeze can be tested without waiting for it.
//
// The rules, in the order they are applied to one application:
//
//   - Only windows whose applications list matches the name (exactly, or as
//     a path.Match glob such as "shop-*") count.
//   - An active deny window blocks.
//   - Otherwise, if any allow window matches and none is active, the
//     application is blocked until the next one opens.
//   - An explicit sync is still allowed when every window blocking it says
//     manualSync: true; automated syncs and self-heal never are.
package window

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Kind says what a window does while it is active.
type Kind string

// The closed set of window kinds.
const (
	// Allow: syncs run only while some allow window is active.
	Allow Kind = "allow"
	// Deny: no automated sync or self-heal runs while it is active.
	Deny Kind = "deny"
)

// Window is one recurring period.
type Window struct {
	Kind Kind
	// Schedule is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), or a descriptor such as "@daily", optionally
	// prefixed with "CRON_TZ=Europe/Berlin ". Without a zone it is read in
	// UTC, so a window means the same on every controller host.
	Schedule string
	// Duration is how long the window stays active after each activation.
	Duration time.Duration
	// Applications are names or globs the window applies to.
	Applications []string
	// ManualSync lets an explicit sync through while the window blocks.
	ManualSync bool
}

// String names the window in messages: its kind, schedule and duration.
func (w Window) String() string {
	return fmt.Sprintf("%s window %q for %s", w.Kind, w.Schedule, w.Duration)
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ErrSchedule is wrapped by every schedule ParseSchedule refuses.
var ErrSchedule = errors.New("invalid cron schedule")

// ParseSchedule parses a window's cron expression. Schedules without a
// CRON_TZ prefix are in UTC.
func ParseSchedule(s string) (_ cron.Schedule, err error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty", ErrSchedule)
	}
	spec := s
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		spec = "CRON_TZ=UTC " + spec
	} else if !strings.Contains(strings.TrimSpace(spec), " ") {
		// The parser slices past the zone without looking for the
		// space that ends it, and panics on a zone with no schedule.
		return nil, fmt.Errorf("%w %q: a time zone needs a schedule after it, such as \"CRON_TZ=Europe/Berlin 0 18 * * 5\"", ErrSchedule, s)
	}
	// The same parser has panicked on other input a fuzzer found; a bad
	// schedule in an applications file must be an error, never a crash.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w %q: %v", ErrSchedule, s, r)
		}
	}()
	sch, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrSchedule, s, err)
	}
	return sch, nil
}

// Set is a compiled list of windows, safe for concurrent use.
type Set struct {
	windows []compiled
}

type compiled struct {
	Window
	schedule cron.Schedule
}

// Compile parses every window's schedule. An empty list gives a Set that
// never blocks.
func Compile(ws []Window) (*Set, error) {
	s := &Set{}
	for i, w := range ws {
		if w.Kind != Allow && w.Kind != Deny {
			return nil, fmt.Errorf("window %d: kind %q is not allow or deny", i, w.Kind)
		}
		if w.Duration <= 0 {
			return nil, fmt.Errorf("window %d: duration must be positive, not %s", i, w.Duration)
		}
		sch, err := ParseSchedule(w.Schedule)
		if err != nil {
			return nil, fmt.Errorf("window %d: %w", i, err)
		}
		s.windows = append(s.windows, compiled{Window: w, schedule: sch})
	}
	return s, nil
}

// Verdict is the answer for one application at one instant.
type Verdict struct {
	// Blocked is true when an automated sync must wait.
	Blocked bool
	// ManualAllowed is true when an explicit sync may run anyway (always
	// true when not Blocked).
	ManualAllowed bool
	// Until is when the block ends as far as the windows can tell; zero
	// when not blocked.
	Until time.Time
	// Reason says which window blocks and until when, for the status.
	Reason string
}

// Matches reports whether any window applies to app.
func (s *Set) Matches(app string) bool {
	if s == nil {
		return false
	}
	for _, w := range s.windows {
		if w.matches(app) {
			return true
		}
	}
	return false
}

// Check applies the rules of the package doc to app at now.
func (s *Set) Check(app string, now time.Time) Verdict {
	if s == nil {
		return Verdict{ManualAllowed: true}
	}
	now = now.Truncate(time.Second)
	var (
		denyUntil   time.Time
		denyBy      *compiled
		denyManual  = true
		allowSeen   bool
		allowActive bool
		allowNext   time.Time
		allowManual = true
	)
	for i := range s.windows {
		w := &s.windows[i]
		if !w.matches(app) {
			continue
		}
		end, active := w.activeAt(now)
		switch w.Kind {
		case Deny:
			if active {
				denyManual = denyManual && w.ManualSync
				if end.After(denyUntil) {
					denyUntil, denyBy = end, w
				}
			}
		case Allow:
			allowSeen = true
			if active {
				allowActive = true
				continue
			}
			allowManual = allowManual && w.ManualSync
			if next := w.schedule.Next(now); allowNext.IsZero() || next.Before(allowNext) {
				allowNext = next
			}
		}
	}
	switch {
	case denyBy != nil:
		v := Verdict{Blocked: true, ManualAllowed: denyManual, Until: denyUntil,
			Reason: fmt.Sprintf("%s is active until %s", denyBy.Window, denyUntil.UTC().Format(time.RFC3339))}
		if allowSeen && !allowActive {
			v.ManualAllowed = v.ManualAllowed && allowManual
		}
		return v
	case allowSeen && !allowActive:
		v := Verdict{Blocked: true, ManualAllowed: allowManual, Until: allowNext}
		if allowNext.IsZero() {
			// A schedule that never fires again (30 February).
			v.Reason = "outside every allow window, and none opens again"
		} else {
			v.Reason = fmt.Sprintf("outside every allow window until %s", allowNext.UTC().Format(time.RFC3339))
		}
		return v
	}
	return Verdict{ManualAllowed: true}
}

func (w *compiled) matches(app string) bool {
	for _, pat := range w.Applications {
		if pat == app {
			return true
		}
		if ok, err := path.Match(pat, app); err == nil && ok {
			return true
		}
	}
	return false
}

// maxChain bounds how many back-to-back activations activeAt follows when
// activations overlap (a window every minute lasting two), so a window that
// never closes costs a bounded amount of work and reports a far end.
const maxChain = 10000

// activeAt reports whether w is active at now and, if so, when it closes:
// an activation at s covers [s, s+Duration), and activations that begin
// before the previous one ends extend it.
func (w *compiled) activeAt(now time.Time) (time.Time, bool) {
	start := w.schedule.Next(now.Add(-w.Duration - time.Second))
	if start.IsZero() || start.After(now) {
		return time.Time{}, false
	}
	end := start.Add(w.Duration)
	if !end.After(now) {
		// The first activation after now-Duration-1s can sit exactly at
		// now-Duration, which has just closed; try the next one.
		start = w.schedule.Next(start)
		if start.IsZero() || start.After(now) {
			return time.Time{}, false
		}
		end = start.Add(w.Duration)
	}
	for range maxChain {
		next := w.schedule.Next(start)
		if next.IsZero() || next.After(end) {
			break
		}
		start = next
		if e := next.Add(w.Duration); e.After(end) {
			end = e
		}
	}
	return end, true
}
