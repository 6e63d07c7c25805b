package api_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
)

// leadershipSwitch is a controller's view of the lease that a test flips.
type leadershipSwitch struct {
	mu sync.Mutex
	l  api.Leadership
}

func (s *leadershipSwitch) set(l api.Leadership) { s.mu.Lock(); s.l = l; s.mu.Unlock() }
func (s *leadershipSwitch) get() api.Leadership  { s.mu.Lock(); defer s.mu.Unlock(); return s.l }

func TestAPI_aStandbyAnswersReadsAndRefusesWritesNamingTheLeader(t *testing.T) {
	sw := &leadershipSwitch{l: api.Leadership{ID: "b", Holder: "a", Epoch: 4}}
	e := newEnv(t, func(o *api.Options) { o.Leadership = sw.get })

	resp, b := e.do(t, "GET", "/api/v1/applications", adminToken, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read on a standby: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/api/v1/applications/shop/sync", "/api/v1/applications/shop/refresh", "/api/v1/webhooks/github"} {
		resp, b = e.do(t, "POST", path, adminToken, `{}`)
		er := decode[api.Error](t, b)
		if resp.StatusCode != http.StatusServiceUnavailable || er.Code != api.CodeStandby || !strings.Contains(er.Message, `"a" leads (epoch 4)`) {
			t.Fatalf("POST %s on a standby: %d %s", path, resp.StatusCode, b)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("POST %s on a standby: no Retry-After", path)
		}
	}
	if n := len(e.ctl.Syncs()); n != 0 {
		t.Fatalf("a standby passed %d syncs to the controller", n)
	}
	resp, b = e.do(t, "GET", "/readyz", "", "")
	if rd := decode[api.Readiness](t, b); resp.StatusCode != 200 || rd.Role != "standby" || rd.Leader != "a" || rd.Epoch != 4 || rd.ID != "b" {
		t.Fatalf("readyz on a standby: %d %s", resp.StatusCode, b)
	}

	sw.set(api.Leadership{ID: "b", Leader: true, Holder: "b", Epoch: 5})
	resp, b = e.do(t, "POST", "/api/v1/applications/shop/sync", adminToken, `{}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("sync on the new leader: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do(t, "GET", "/readyz", "", "")
	if rd := decode[api.Readiness](t, b); rd.Role != "leader" || rd.Epoch != 5 {
		t.Fatalf("readyz on the leader: %d %s", resp.StatusCode, b)
	}
}

func TestAPI_readyzWithoutALeaseSaysNoRole(t *testing.T) {
	e := newEnv(t, nil)
	_, b := e.do(t, "GET", "/readyz", "", "")
	if rd := decode[api.Readiness](t, b); rd.Status != "ready" || rd.Role != "" {
		t.Fatalf("readyz: %s", b)
	}
}
