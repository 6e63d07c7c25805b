package api_test

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
)

func TestAnApplicationsHooksAreInItsStatusAndNotInTheList(t *testing.T) {
	exit := 3
	shop := application.Status{Name: "shop", Stack: "shop", Sync: application.OutOfSync, Health: application.Healthy,
		Hooks: []application.HookStatus{{Name: "migrate", Phase: "PreSync", Revision: 2, State: application.HookFailed, ExitCode: &exit, LogTail: []string{"boom"}}}}
	e := newEnv(t, func(o *api.Options) { o.Controller = apitest.NewController(shop) })
	resp, b := e.do(t, "GET", "/api/v1/applications/shop", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	st := decode[application.Status](t, b)
	if len(st.Hooks) != 1 || st.Hooks[0].State != application.HookFailed || st.Hooks[0].ExitCode == nil || *st.Hooks[0].ExitCode != 3 || st.Hooks[0].LogTail != nil {
		t.Fatalf("hooks = %+v; want the failed hook without its log lines, which a viewer may not read", st.Hooks)
	}
	_, b = e.do(t, "GET", "/api/v1/applications/shop", adminToken, "")
	if st := decode[application.Status](t, b); len(st.Hooks) != 1 || len(st.Hooks[0].LogTail) != 1 || st.Hooks[0].LogTail[0] != "boom" {
		t.Fatalf("the admin's hooks = %+v; want the log lines", st.Hooks)
	}
	resp, b = e.do(t, "GET", "/api/v1/applications", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	for _, it := range decode[api.ApplicationList](t, b).Items {
		if it.Hooks != nil {
			t.Errorf("the list carries %s's hooks: %+v", it.Name, it.Hooks)
		}
	}
}
