package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
)

func TestAPI_aViewerReadsTheDiffAgainstARecordedRevisionOnEitherSide(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.SetRevisionDiff("shop", 6, api.AgainstDeclared, api.Diff{Revision: "bbbb", Deployed: "9999", Manifest: "--- revision 6\n+++ declared\n"})
	e.ctl.SetRevisionDiff("shop", 6, api.AgainstDeployed, api.Diff{Revision: "9999", Deployed: "aaaa", Manifest: "--- deployed (revision 7)\n+++ revision 6\n"})

	for query, want := range map[string]string{
		"?revision=6":                  "--- revision 6\n+++ declared\n",
		"?revision=6&against=declared": "--- revision 6\n+++ declared\n",
		"?revision=6&against=deployed": "--- deployed (revision 7)\n+++ revision 6\n",
	} {
		resp, b := e.do(t, "GET", "/api/v1/applications/shop/diff"+query, readToken, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d: %s", query, resp.StatusCode, b)
			continue
		}
		if d := decode[api.Diff](t, b); d.App != "shop" || d.Manifest != want {
			t.Errorf("%s: diff %+v, want app shop and manifest %q", query, d, want)
		}
	}
	resp, b := e.do(t, "GET", "/api/v1/applications/shop/diff?revision=5", readToken, "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no revision 5") {
		t.Errorf("a revision not kept: status %d: %s", resp.StatusCode, b)
	}
}

func TestAPI_aDiffAgainstARevisionRefusesABadNumberOrSide(t *testing.T) {
	e := newEnv(t, nil)
	for query, want := range map[string]string{
		"?revision=0":                "revision=\"0\" is not a revision number of 1 or more",
		"?revision=x":                "revision=\"x\" is not a revision number",
		"?revision=2&against=future": "against=\"future\" is not \"declared\" or \"deployed\"",
		"?against=deployed":          "against=\"deployed\" needs revision=N",
	} {
		resp, b := e.do(t, "GET", "/api/v1/applications/shop/diff"+query, readToken, "")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", query, resp.StatusCode, b)
			continue
		}
		if apiErr := decode[api.Error](t, b); !strings.Contains(apiErr.Message, want) {
			t.Errorf("%s: message %q lacks %q", query, apiErr.Message, want)
		}
	}
}

func TestAPI_aControllerWithoutRevisionDiffsAnswers501ForThem(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Controller = apitest.NewMinimalController(apitest.Sample()...) })
	resp, b := e.do(t, "GET", "/api/v1/applications/shop/diff?revision=1", readToken, "")
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(b), "RevisionDiffer") {
		t.Errorf("status %d: %s, want 501 naming RevisionDiffer", resp.StatusCode, b)
	}
}

func TestAPI_aDryRunSyncAnswersWithItsPlan(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.Result = func(app string, o api.SyncOptions) api.SyncResult {
		if !o.DryRun || !o.Prune {
			return api.SyncResult{Action: "upgrade"}
		}
		return api.SyncResult{Action: "upgrade", Plan: &api.Diff{
			Services:        []api.ServiceDiff{{Name: "web", Change: api.ServiceUpdate}},
			PendingRemovals: []string{"service shop_worker"},
		}}
	}
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", adminToken, `{"dryRun":true,"prune":true}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	r := decode[api.OperationResponse](t, b)
	if r.Plan == nil || r.Plan.App != "shop" || len(r.Plan.Services) != 1 || r.Plan.Services[0].Name != "web" ||
		len(r.Plan.PendingRemovals) != 1 || r.Plan.PendingRemovals[0] != "service shop_worker" {
		t.Fatalf("answer %s, want the plan of shop with web's update and worker's removal", b)
	}
	_, b = e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", adminToken, `{}`)
	if strings.Contains(string(b), `"plan"`) {
		t.Errorf("a real sync's answer carries a plan: %s", b)
	}
}
