package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/router"
)

func TestAPI_rolloutCommandsAreQueuedForTheNamedOrOnlyService(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.SetRollouts("shop", []application.RolloutStatus{{Service: "web", Colour: "web-canary", Strategy: "canary", Phase: "Progressing"}})
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/rollout/promote", adminToken, "")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("promote: status %d: %s", resp.StatusCode, b)
	}
	if r := decode[api.OperationResponse](t, b); r.Phase != api.Queued {
		t.Fatalf("phase %s", r.Phase)
	}
	if resp, b := e.do(t, "POST", "/api/v1/applications/shop/rollout/abort", adminToken, `{"service":"web"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("abort: status %d: %s", resp.StatusCode, b)
	}
	if got := strings.Join(e.ctl.Commands(), ", "); got != "shop/web promote, shop/web abort" {
		t.Fatalf("commands %q", got)
	}
	for _, tc := range []struct {
		path, token, body string
		status            int
	}{
		{"/api/v1/applications/shop/rollout/explode", adminToken, "", http.StatusBadRequest},
		{"/api/v1/applications/shop/rollout/pause", adminToken, `{"service":"worker"}`, http.StatusNotFound},
		{"/api/v1/applications/shop/rollout/pause", adminToken, `{"svc":"web"}`, http.StatusBadRequest},
		{"/api/v1/applications/billing/rollout/pause", adminToken, "", http.StatusNotFound},
		{"/api/v1/applications/nothing/rollout/pause", adminToken, "", http.StatusNotFound},
		{"/api/v1/applications/shop/rollout/pause", readToken, "", http.StatusForbidden},
	} {
		if resp, b := e.do(t, "POST", tc.path, tc.token, tc.body); resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.path, tc.body, resp.StatusCode, tc.status, b)
		}
	}
	if n := len(e.ctl.Commands()); n != 2 {
		t.Fatalf("%d commands taken, want the 2 valid ones", n)
	}
	if !strings.Contains(e.logs.String(), "rollout command requested") {
		t.Fatal("command not logged")
	}
}

func TestAPI_routerConfigIsServedOnceEveryRouteIsKnown(t *testing.T) {
	e := newEnv(t, nil)
	const path = "/api/v1/router/traefik"
	if resp, b := e.do(t, "GET", path, readToken, ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before the routes are known: status %d: %s", resp.StatusCode, b)
	}
	e.ctl.Routes = []router.Route{{Name: "shop-web", Rule: "Host(`shop.example`)", Backends: []router.Backend{
		{Name: "stable", Weight: 75, URLs: []string{"http://shop_web:8080"}},
		{Name: "canary", Weight: 25, URLs: []string{"http://shop_web-canary:8080"}},
	}}}
	e.ctl.RoutesComplete = true
	resp, b := e.do(t, "GET", path, readToken, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	want, err := router.DynamicConfig(e.ctl.Routes)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(want) {
		t.Fatalf("config\n%s\nwant\n%s", b, want)
	}
	if resp, _ := e.do(t, "GET", path, "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: status %d", resp.StatusCode)
	}
	// A route the router refuses is not served: Traefik keeps what it has.
	e.ctl.Routes[0].Rule = ""
	if resp, _ := e.do(t, "GET", path, readToken, ""); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("an unrenderable route: status %d", resp.StatusCode)
	}
}

func TestAPI_anApplicationsAnswerSaysWhetherTheCallerMayOperateIt(t *testing.T) {
	e := newEnv(t, nil)
	for token, want := range map[string]string{adminToken: "true", readToken: "false"} {
		resp, b := e.do(t, "GET", "/api/v1/applications/shop", token, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET shop: status %d: %s", resp.StatusCode, b)
		}
		if got := resp.Header.Get(api.OperateHeader); got != want {
			t.Errorf("%s for the %s token = %q, want %q", api.OperateHeader, map[string]string{adminToken: "admin", readToken: "read"}[token], got, want)
		}
	}
}

// Traefik polls the controllers of an HA pair through one address. Only
// the leader may answer with routes: a standby's or a deposed leader's are
// of a term another controller may have moved on since, and Traefik keeps
// its last configuration on any answer but 200.
func TestAPI_onlyTheLeaderServesTheRouterConfig(t *testing.T) {
	sw := &leadershipSwitch{l: api.Leadership{ID: "b", Leader: true, Holder: "b", Epoch: 4}}
	e := newEnv(t, func(o *api.Options) { o.Leadership = sw.get })
	e.ctl.Routes = []router.Route{{Name: "shop-web", Rule: "Host(`shop.example`)", Backends: []router.Backend{
		{Name: "stable", Weight: 100, URLs: []string{"http://shop_web:8080"}},
	}}}
	e.ctl.RoutesComplete = true
	const path = "/api/v1/router/traefik"
	if resp, b := e.do(t, "GET", path, readToken, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("on the leader: status %d: %s", resp.StatusCode, b)
	}
	for _, c := range []struct {
		name string
		l    api.Leadership
		want string
	}{
		{"a standby", api.Leadership{ID: "b", Holder: "a", Epoch: 5}, `controller "a" leads (epoch 5)`},
		{"a leader whose lease ran out", api.Leadership{ID: "b", Holder: "b", Epoch: 4}, "no controller holds the leader lease"},
	} {
		sw.set(c.l)
		resp, b := e.do(t, "GET", path, readToken, "")
		er := decode[api.Error](t, b)
		if resp.StatusCode != http.StatusServiceUnavailable || er.Code != api.CodeStandby ||
			!strings.Contains(er.Message, "serves no router configuration") || !strings.Contains(er.Message, c.want) {
			t.Errorf("on %s: status %d: %s", c.name, resp.StatusCode, b)
		}
	}
}
