package api_test

import (
	"net/http"
	"testing"

	"github.com/flotilla-gitops/flotilla/access"
)

// Logout is open to anyone. A flood of anonymous logouts, however spelt,
// neither pushes the entries of real writes out of the audit nor fills
// the event replay ring.
func TestAPI_anonymousWritesAreNotAudited(t *testing.T) {
	e := newSSOEnv(t)
	c := &http.Client{}
	if code, b := e.do(t, c, "POST", "/api/v1/applications/shop/refresh", map[string]string{"Authorization": "Bearer " + adminToken}); code != 202 {
		t.Fatalf("admin refresh: %d %s", code, b)
	}
	before := e.events.LastID()
	spellings := []map[string]string{
		nil,                                   // no credentials at all
		{"Cookie": "flotilla_session=forged"}, // a session that does not exist
		{"Authorization": "Bearer not-a-token"},
		{"Authorization": "Bearer eyJhbGciOiJub25lIn0.e30."}, // JWT-shaped, unsigned
	}
	for i := range access.DefaultAuditSize + 100 {
		if code, b := e.do(t, c, "POST", "/auth/logout", spellings[i%len(spellings)]); code != http.StatusNoContent {
			t.Fatalf("anonymous logout %d: %d %s", i, code, b)
		}
	}
	var admin bool
	for _, en := range e.audit.Entries() {
		if en.Who == "" {
			t.Fatalf("an anonymous write was audited: %+v", en)
		}
		admin = admin || (en.Who == "admin" && en.App == "shop")
	}
	if !admin {
		t.Errorf("the admin's refresh was pushed out of the audit: %+v", e.audit.Entries())
	}
	if after := e.events.LastID(); after != before {
		t.Errorf("anonymous logouts published %d events", after-before)
	}
}
