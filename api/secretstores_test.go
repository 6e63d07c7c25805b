package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
)

func TestAPI_storeRotatedQueuesTheUsersTheCallerMayOperate(t *testing.T) {
	e, _ := newAccessEnv(t)
	e.ctl.SetStore("vault", []string{"billing", "shop"}, []string{"billing", "shop"})
	e.ctl.SetStore("bankvault", []string{"billing"}, []string{"billing"})
	const route = "/api/v1/secretstores/vault/rotated"
	for _, tc := range []struct {
		name, token, path, body string
		status                  int
		queued                  []string
		expired                 string
	}{
		{"global admin, one entry", adminToken, route, `{"path":"kv/data/shop/db"}`, 202, []string{"billing", "shop"}, "vault:kv/data/shop/db"},
		{"global admin, whole store", adminToken, route, "", 202, []string{"billing", "shop"}, "vault"},
		{"project operator queues its own", fileTokens["shop-operator"], route, "", 202, []string{"shop"}, "vault"},
		{"project viewer", fileTokens["shop-viewer"], route, "", 403, nil, ""},
		{"global read", readToken, route, "", 403, nil, ""},
		{"a store of another project", fileTokens["shop-operator"], "/api/v1/secretstores/bankvault/rotated", "", 404, nil, ""},
		{"an unknown store", adminToken, "/api/v1/secretstores/nope/rotated", "", 404, nil, ""},
		{"an unknown field", adminToken, route, `{"paht":"x"}`, 400, nil, ""},
		{"no token", "", route, "", 401, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.ctl.Expired())
			refreshed := len(e.ctl.Refreshed())
			resp, body := e.do(t, http.MethodPost, tc.path, tc.token, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			exp := e.ctl.Expired()[before:]
			if tc.status != 202 {
				if len(exp) != 0 || len(e.ctl.Refreshed()) != refreshed {
					t.Fatalf("a refused request expired %v and refreshed %v", exp, e.ctl.Refreshed()[refreshed:])
				}
				return
			}
			var out api.StoreRotatedResponse
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Queued, tc.queued) || !slices.Equal(e.ctl.Refreshed()[refreshed:], tc.queued) {
				t.Fatalf("queued %v, refreshed %v, want %v", out.Queued, e.ctl.Refreshed()[refreshed:], tc.queued)
			}
			if !slices.Equal(exp, []string{tc.expired}) {
				t.Fatalf("expired %v, want %s", exp, tc.expired)
			}
		})
	}

	// Like every write, it needs the request header the CLI and UI send.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+route, strings.NewReader(""))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		t.Fatal("a write without the request header was accepted")
	}
}
