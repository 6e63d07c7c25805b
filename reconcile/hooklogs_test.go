package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// loggingOrderBackend is an orderBackend whose jobs printed lines.
type loggingOrderBackend struct {
	*orderBackend
	lines []string
}

func (b *loggingOrderBackend) ServiceLogTail(context.Context, string, int) ([]string, error) {
	return slices.Clone(b.lines), nil
}

// The API hides a failed hook's log lines from callers who may not read
// logs by cutting the pass's error at application.HookLogsMarker, so the
// lines must come after it and nowhere before it.
func TestAFailedHooksLogLinesFollowTheMarkerInThePassError(t *testing.T) {
	_, f, c := orderedApp(t, composeHookWaves)
	b := &loggingOrderBackend{orderBackend: newOrderBackend(), lines: []string{"applying 0001", "DB_PASSWORD=hunter2 rejected"}}
	b.fail("migrate", true)
	c = newTestController(t, b, f, c.Applications()[0])
	res := mustReconcile(t, c, "shop")
	if res.Err == nil {
		t.Fatal("the pass did not fail")
	}
	for what, msg := range map[string]string{"the pass error": res.Err.Error(), "the status": res.Status.LastError} {
		before, after, found := strings.Cut(msg, application.HookLogsMarker)
		if !found {
			t.Fatalf("%s has no log marker: %q", what, msg)
		}
		if strings.Contains(before, "hunter2") || strings.Contains(before, "applying") {
			t.Errorf("%s quotes log lines before the marker: %q", what, before)
		}
		if !strings.Contains(after, "hunter2") || !strings.Contains(before, "PreSync hook migrate failed") {
			t.Errorf("%s: %q", what, msg)
		}
	}
	if len(res.Status.Hooks) == 0 || !slices.Equal(res.Status.Hooks[0].LogTail, b.lines) {
		t.Errorf("hooks %+v, want the failed hook's log tail", res.Status.Hooks)
	}
}
