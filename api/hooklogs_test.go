package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// What a failed hook printed, as the reconciler reports it: the second line
// repeats the marker, as a job could, to try to end the cut early.
var hookLogLines = []string{"DB_PASSWORD=hunter2 rejected", "x" + application.HookLogsMarker + "token=swordfish"}

// failShopWithHookLogs makes every sync of shop fail as a failed PreSync
// hook does: its lines in the hook's LogTail and after the marker in the
// pass's error.
func failShopWithHookLogs(e *env) {
	msg := "application shop: PreSync hook migrate failed: task: non-zero exit (1); nothing after it was written" +
		application.HookLogsMarker + strings.Join(hookLogLines, "\n")
	e.ctl.Result = func(app string, _ api.SyncOptions) api.SyncResult {
		st := failedShop()
		st.LastError = msg
		st.Hooks = []application.HookStatus{{Name: "migrate", Phase: "PreSync", State: application.HookFailed, LogTail: hookLogLines}}
		return api.SyncResult{Status: st, Err: errors.New(msg)}
	}
}

func failedShop() application.Status {
	return application.Status{Name: "shop", Stack: "shop", Sync: application.OutOfSync, Health: application.Degraded}
}

func leaksHookLogs(s string) bool {
	return strings.Contains(s, "hunter2") || strings.Contains(s, "swordfish")
}

// A failed hook's log lines reach only those who may read the application's
// logs: not a viewer, through the status, the list or the event stream;
// an operator still reads them everywhere, and the viewer's copy never
// changes what the others get.
func TestAPI_hookLogLinesReachOnlyCallersWhoMayReadLogs(t *testing.T) {
	e, _ := newAccessEnv(t)
	failShopWithHookLogs(e)
	viewer := openStreamAs(t, e, fileTokens["shop-viewer"])
	operator := openStreamAs(t, e, fileTokens["shop-operator"])
	// The reconciler's own event of the failed hook.
	e.broker.Publish(events.Event{Type: events.HookRan, App: "shop", Stack: "shop",
		Message: "PreSync hook migrate failed" + application.HookLogsMarker + strings.Join(hookLogLines, "\n"),
		Data:    map[string]any{"hook": "PreSync", "outcome": "failed", "logs": hookLogLines}})

	// An operator's waited sync: its answer carries the lines.
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", fileTokens["shop-operator"], "")
	if resp.StatusCode != 200 || !leaksHookLogs(string(b)) {
		t.Fatalf("the operator's waited sync: %d %s; want the hook's log lines", resp.StatusCode, b)
	}

	for _, path := range []string{"/api/v1/applications/shop", "/api/v1/applications"} {
		resp, b := e.do(t, "GET", path, fileTokens["shop-viewer"], "")
		if resp.StatusCode != 200 {
			t.Fatalf("viewer GET %s: %d %s", path, resp.StatusCode, b)
		}
		if leaksHookLogs(string(b)) || strings.Contains(string(b), "logTail") {
			t.Errorf("viewer GET %s shows the hook's log lines: %s", path, b)
		}
		if !strings.Contains(string(b), "PreSync hook migrate failed") || !strings.Contains(string(b), "may read the application's logs") {
			t.Errorf("viewer GET %s lost the error itself or does not say where the lines went: %s", path, b)
		}
		for _, tok := range []string{fileTokens["shop-operator"], adminToken} {
			if _, b := e.do(t, "GET", path, tok, ""); !leaksHookLogs(string(b)) {
				t.Errorf("operator or admin GET %s lost the hook's log lines: %s", path, b)
			}
		}
	}
	if st := decode[application.Status](t, mustGet(t, e, "/api/v1/applications/shop", fileTokens["shop-operator"])); len(st.Hooks) != 1 || len(st.Hooks[0].LogTail) != 2 {
		t.Errorf("the operator's status lost the log tail: %+v", st.Hooks)
	}

	for name, r := range map[string]*sseReader{"viewer": viewer, "operator": operator} {
		var hook, failed bool
		for !(hook && failed) {
			f := r.nextEvent(t)
			switch f.event {
			case string(events.HookRan):
				hook = true
			case string(events.SyncFailed):
				failed = true
			default:
				continue
			}
			if leaks := leaksHookLogs(f.data); leaks != (name == "operator") {
				t.Errorf("the %s's %s event: %s", name, f.event, f.data)
			}
			if name == "viewer" && strings.Contains(f.data, `"logs"`) {
				t.Errorf("the viewer's %s event keeps its logs: %s", f.event, f.data)
			}
		}
	}
}

func mustGet(t *testing.T, e *env, path, token string) []byte {
	t.Helper()
	resp, b := e.do(t, "GET", path, token, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}
