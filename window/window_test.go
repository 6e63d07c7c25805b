package window

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustCompile(t *testing.T, ws ...Window) *Set {
	t.Helper()
	s, err := Compile(ws)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Friday 2026-12-04 18:00 UTC starts a weekend freeze.
var freeze = Window{Kind: Deny, Schedule: "0 18 * * 5", Duration: 60 * time.Hour, Applications: []string{"shop-*"}}

func TestSet_Check_denyWindowBlocksOnlyWhileActiveAndSaysUntilWhen(t *testing.T) {
	s := mustCompile(t, freeze)
	for _, tc := range []struct {
		now     string
		blocked bool
		until   string
	}{
		{"2026-12-04T17:59:59Z", false, ""},
		{"2026-12-04T18:00:00Z", true, "2026-12-07T06:00:00Z"},
		{"2026-12-06T12:00:00Z", true, "2026-12-07T06:00:00Z"},
		{"2026-12-07T05:59:59Z", true, "2026-12-07T06:00:00Z"},
		{"2026-12-07T06:00:00Z", false, ""},
	} {
		v := s.Check("shop-api", at(tc.now))
		if v.Blocked != tc.blocked {
			t.Errorf("at %s: blocked %v, want %v (%s)", tc.now, v.Blocked, tc.blocked, v.Reason)
			continue
		}
		if tc.blocked {
			if !v.Until.Equal(at(tc.until)) {
				t.Errorf("at %s: until %s, want %s", tc.now, v.Until, tc.until)
			}
			if !strings.Contains(v.Reason, tc.until) || !strings.Contains(v.Reason, "deny") {
				t.Errorf("at %s: reason %q names neither the kind nor the end", tc.now, v.Reason)
			}
			if v.ManualAllowed {
				t.Errorf("at %s: manual sync allowed without manualSync", tc.now)
			}
		}
	}
}

func TestSet_Check_windowAppliesOnlyToTheApplicationsItNames(t *testing.T) {
	s := mustCompile(t, freeze)
	if v := s.Check("billing", at("2026-12-05T12:00:00Z")); v.Blocked {
		t.Fatalf("an application the window does not name is blocked: %s", v.Reason)
	}
	if !s.Matches("shop-web") || s.Matches("billing") {
		t.Fatal("Matches disagrees with the glob shop-*")
	}
}

func TestSet_Check_manualSyncLetsAnExplicitSyncThroughADenyWindow(t *testing.T) {
	w := freeze
	w.ManualSync = true
	v := mustCompile(t, w).Check("shop-api", at("2026-12-05T12:00:00Z"))
	if !v.Blocked || !v.ManualAllowed {
		t.Fatalf("blocked %v manual %v, want blocked with manual allowed", v.Blocked, v.ManualAllowed)
	}
	// A second active deny window without manualSync still refuses.
	v = mustCompile(t, w, Window{Kind: Deny, Schedule: "@daily", Duration: 24 * time.Hour, Applications: []string{"*"}}).
		Check("shop-api", at("2026-12-05T12:00:00Z"))
	if v.ManualAllowed {
		t.Fatal("manual sync allowed although one blocking window does not allow it")
	}
}

func TestSet_Check_outsideEveryAllowWindowIsBlockedUntilTheNextOpens(t *testing.T) {
	// Weekdays 09:00-17:00 UTC.
	s := mustCompile(t, Window{Kind: Allow, Schedule: "0 9 * * 1-5", Duration: 8 * time.Hour, Applications: []string{"api"}})
	v := s.Check("api", at("2026-12-05T10:00:00Z")) // a Saturday
	if !v.Blocked || !v.Until.Equal(at("2026-12-07T09:00:00Z")) {
		t.Fatalf("blocked %v until %s, want blocked until Monday 09:00", v.Blocked, v.Until)
	}
	if !strings.Contains(v.Reason, "allow") {
		t.Fatalf("reason %q does not say it waits for an allow window", v.Reason)
	}
	if v := s.Check("api", at("2026-12-07T16:59:59Z")); v.Blocked {
		t.Fatalf("blocked inside the allow window: %s", v.Reason)
	}
	if v := s.Check("api", at("2026-12-07T17:00:00Z")); !v.Blocked {
		t.Fatal("not blocked when the allow window has closed")
	}
}

func TestSet_Check_denyWinsOverAnActiveAllowWindow(t *testing.T) {
	s := mustCompile(t,
		Window{Kind: Allow, Schedule: "@daily", Duration: 24 * time.Hour, Applications: []string{"*"}},
		freeze)
	if v := s.Check("shop-api", at("2026-12-05T12:00:00Z")); !v.Blocked {
		t.Fatal("an active allow window overrode an active deny window")
	}
}

func TestSet_Check_overlappingActivationsExtendTheWindow(t *testing.T) {
	// Every minute for two minutes: never closes.
	s := mustCompile(t, Window{Kind: Deny, Schedule: "* * * * *", Duration: 2 * time.Minute, Applications: []string{"a"}})
	v := s.Check("a", at("2026-12-05T12:00:30Z"))
	if !v.Blocked || v.Until.Sub(at("2026-12-05T12:00:30Z")) < 24*time.Hour {
		t.Fatalf("blocked %v until %s, want a far end", v.Blocked, v.Until)
	}
}

func TestSet_Check_scheduleWithoutZoneIsUTCAndCronTZIsHonoured(t *testing.T) {
	s := mustCompile(t, Window{Kind: Deny, Schedule: "CRON_TZ=Europe/Berlin 0 18 * * *", Duration: time.Hour, Applications: []string{"a"}})
	// 18:00 in Berlin in December is 17:00 UTC.
	if v := s.Check("a", at("2026-12-05T17:30:00Z")); !v.Blocked {
		t.Fatal("CRON_TZ was not honoured")
	}
	if v := s.Check("a", at("2026-12-05T18:30:00Z")); v.Blocked {
		t.Fatal("blocked at 18:30 UTC, which is after the Berlin window")
	}
}

func TestParseSchedule_refusesWhatCronRefuses(t *testing.T) {
	for _, s := range []string{"", "61 * * * *", "* * *", "0 0 0 * * *", "@sometimes", "CRON_TZ=", "TZ=UTC", "CRON_TZ=Mars/Base 0 * * * *"} {
		if _, err := ParseSchedule(s); !errors.Is(err, ErrSchedule) {
			t.Errorf("ParseSchedule(%q) = %v, want ErrSchedule", s, err)
		}
	}
}

func TestCompile_refusesAnUnknownKindAndANonPositiveDuration(t *testing.T) {
	if _, err := Compile([]Window{{Kind: "pause", Schedule: "@daily", Duration: time.Hour}}); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := Compile([]Window{{Kind: Deny, Schedule: "@daily"}}); err == nil {
		t.Error("zero duration accepted")
	}
}

func TestSet_Check_anAllowWindowThatNeverOpensBlocksAndSaysSo(t *testing.T) {
	s := mustCompile(t, Window{Kind: Allow, Schedule: "0 0 30 2 *", Duration: time.Hour, Applications: []string{"a"}})
	v := s.Check("a", at("2026-12-05T12:00:00Z"))
	if !v.Blocked || !v.Until.IsZero() || !strings.Contains(v.Reason, "none opens again") {
		t.Fatalf("verdict %+v", v)
	}
}

// FuzzCheck feeds arbitrary schedules and durations: parsing may refuse,
// but a window that compiles never panics and a block always has a reason.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"0 18 * * 5", "@daily", "* * * * *", "CRON_TZ=Europe/Berlin 0 9 * * 1-5", "0 0 30 2 *", "*/7 1-3 * 1,6 0"} {
		f.Add(s, int64(time.Hour), int64(0))
	}
	f.Fuzz(func(t *testing.T, schedule string, d int64, at int64) {
		if d <= 0 || d > int64(400*24*time.Hour) {
			return
		}
		for _, k := range []Kind{Allow, Deny} {
			s, err := Compile([]Window{{Kind: k, Schedule: schedule, Duration: time.Duration(d), Applications: []string{"*"}}})
			if err != nil {
				return
			}
			v := s.Check("app", time.Unix(at%(1<<33), 0).UTC())
			if v.Blocked && v.Reason == "" {
				t.Fatalf("blocked without a reason: %+v", v)
			}
		}
	})
}
