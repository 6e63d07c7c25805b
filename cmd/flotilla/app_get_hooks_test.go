package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

func TestAppGetShowsEachHookWithItsStateExitCodeAndLogTail(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	three := 3
	st := application.Status{Name: "shop", Stack: "shop", Sync: application.OutOfSync, Health: application.Healthy,
		Hooks: []application.HookStatus{
			{Name: "migrate", Phase: "PreSync", Wave: 0, Revision: 4, State: application.HookFailed, ExitCode: &three,
				FinishedAt: now.Add(-90 * time.Second), Message: "task failed: task: non-zero exit (3)", LogTail: []string{"column exists"}},
			{Name: "seed", Phase: "PreSync", Wave: 1, State: application.HookSkipped, Message: "not created: PreSync hook migrate failed"},
		}}
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HOOK", "migrate", "Failed", "1m ago", "non-zero exit (3)", "seed", "Skipped",
		"PreSync hook migrate, last log lines:", "  column exists"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	row := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "migrate") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 6 || f[1] != "PreSync" || f[2] != "0" || f[4] != "4" || f[5] != "3" {
		t.Errorf("migrate row %q, want phase, wave 0, revision 4, exit 3", row)
	}
}
