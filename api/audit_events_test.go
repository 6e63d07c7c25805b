package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// openStreamAs opens the event stream with token and skips the retry frame.
func openStreamAs(t *testing.T, e *env, token string) *sseReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	r := &sseReader{resp: resp, sc: bufio.NewScanner(resp.Body)}
	if f := r.next(t); !strings.HasPrefix(f.comment, "retry") {
		t.Fatalf("first frame %+v", f)
	}
	return r
}

type auditFrame struct {
	App  string
	Data struct {
		Who, Role, Project, Route string
		Status                    int
	}
}

// readUntil reads events until one of type last for app shop, returning
// the audit events met on the way.
func readUntil(t *testing.T, r *sseReader, stop func(event string, a auditFrame) bool) []auditFrame {
	t.Helper()
	var seen []auditFrame
	for {
		f := r.nextEvent(t)
		var a auditFrame
		if err := json.Unmarshal([]byte(f.data), &a); err != nil {
			t.Fatal(err)
		}
		if f.event == "audit.recorded" {
			seen = append(seen, a)
		}
		if stop(f.event, a) {
			return seen
		}
	}
}

func TestAPI_auditEntriesGoToAdminsOnTheEventStreamAndNotToViewers(t *testing.T) {
	e, _ := newAccessEnv(t)
	admin := openStreamAs(t, e, adminToken)
	projectAdmin := openStreamAs(t, e, fileTokens["shop-admin"])
	viewer := openStreamAs(t, e, fileTokens["shop-viewer"])
	operator := openStreamAs(t, e, fileTokens["shop-operator"])

	// An operator's write on its own application, a refused one on
	// another project's, then an admin sync of shop whose events every
	// stream sees, and whose own audit entry closes the sequence.
	if resp, b := e.do(t, "POST", "/api/v1/applications/shop/refresh", fileTokens["shop-operator"], ""); resp.StatusCode != 202 {
		t.Fatalf("refresh: %d %s", resp.StatusCode, b)
	}
	e.do(t, "POST", "/api/v1/applications/billing/refresh", fileTokens["shop-operator"], "")
	if resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", adminToken, ""); resp.StatusCode != 200 {
		t.Fatalf("sync: %d %s", resp.StatusCode, b)
	}
	lastAudit := func(_ string, a auditFrame) bool { return a.Data.Who == "admin" }
	got := readUntil(t, admin, lastAudit)
	if len(got) != 3 {
		t.Fatalf("the admin's stream has %d audit events, want 3: %+v", len(got), got)
	}
	if a := got[0]; a.App != "shop" || a.Data.Who != "shop-operator" || a.Data.Role != "operator" || a.Data.Project != "shop" ||
		a.Data.Route != "POST /api/v1/applications/{name}/refresh" || a.Data.Status != 202 {
		t.Errorf("the operator's write as an event: %+v", a)
	}
	if a := got[1]; a.App != "billing" || a.Data.Status != 404 || a.Data.Project != "bank" {
		t.Errorf("the refused write as an event: %+v", a)
	}
	// A project admin sees its own project's entries only.
	got = readUntil(t, projectAdmin, lastAudit)
	if len(got) != 2 || got[0].Data.Who != "shop-operator" || got[1].Data.Who != "admin" {
		t.Errorf("the project admin's audit events: %+v; want shop's two", got)
	}
	// Viewers and operators see the sync but no audit entry.
	for name, r := range map[string]*sseReader{"viewer": viewer, "operator": operator} {
		if got := readUntil(t, r, func(ev string, _ auditFrame) bool { return ev == "sync.succeeded" }); len(got) != 0 {
			t.Errorf("the project %s's stream has audit events: %+v", name, got)
		}
	}
}
