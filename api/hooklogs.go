package api

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// A failed hook's last log lines are the job's own output, which may hold
// more than its status should tell: they reach the caller only where it
// may read the application's logs (access.ReadLogs), as GET …/logs does.
// They travel in the hooks' LogTail, in the text of the pass's error
// (Status.LastError, a waited sync's Error, event messages) after
// application.HookLogsMarker, and in a hook.ran event's "logs". Each is
// cut from a copy: statuses and events are shared with every other caller.

// hookLogsHidden replaces the log lines cut from a message.
const hookLogsHidden = "; its last log lines are shown to those who may read the application's logs"

// mayReadHookLogs reports whether the caller may read app's hook logs.
func (s *server) mayReadHookLogs(r *http.Request, app string) bool {
	return s.callerMay(r, access.ReadLogs, app)
}

// cutHookLogs drops what follows application.HookLogsMarker in msg.
func cutHookLogs(msg string) string {
	before, _, found := strings.Cut(msg, application.HookLogsMarker)
	if !found {
		return msg
	}
	return before + hookLogsHidden
}

// statusWithoutHookLogs is st without any hook log line.
func statusWithoutHookLogs(st application.Status) application.Status {
	st.LastError = cutHookLogs(st.LastError)
	if len(st.Hooks) > 0 {
		st.Hooks = slices.Clone(st.Hooks)
		for i := range st.Hooks {
			st.Hooks[i].LogTail = nil
		}
	}
	return st
}

// hasHookLogs reports whether e carries hook log lines, so that events
// without any are passed on as they are.
func hasHookLogs(e events.Event) bool {
	_, logs := e.Data["logs"]
	return logs || strings.Contains(e.Message, application.HookLogsMarker)
}

// eventWithoutHookLogs is e without any hook log line.
func eventWithoutHookLogs(e events.Event) events.Event {
	e.Message = cutHookLogs(e.Message)
	if _, ok := e.Data["logs"]; ok {
		e.Data = maps.Clone(e.Data)
		delete(e.Data, "logs")
	}
	return e
}
