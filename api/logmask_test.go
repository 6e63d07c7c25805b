package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
)

// masking is a controller with LogMasker: it blanks "hunter2-value" or,
// with err set, cannot reproduce the values.
type masking struct {
	*apitest.Controller
	err error
}

func (m masking) LogMask(context.Context, string) (func(string) string, string, error) {
	if m.err != nil {
		return nil, "", m.err
	}
	return func(s string) string { return strings.ReplaceAll(s, "hunter2-value", "***") }, "revision 7 (commit abc1234)", nil
}

func TestLogs_blankWhatTheControllersMaskNamesAndSayWhichRevision(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Controller = masking{Controller: o.Controller.(*apitest.Controller)} })
	e.ctl.LogLines = []api.LogLine{{Service: "web", Task: "t1", Text: "password is hunter2-value"}}
	resp, b := e.do(t, "GET", "/api/v1/applications/shop/logs", adminToken, "")
	if resp.StatusCode != 200 || strings.Contains(string(b), "hunter2-value") || !strings.Contains(string(b), "password is ***") {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	if h := resp.Header.Get(api.LogMaskingHeader); !strings.Contains(h, "revision 7") || !strings.Contains(h, "external secrets are not") {
		t.Errorf("%s: %q", api.LogMaskingHeader, h)
	}
}

func TestLogs_areWithheldWhenTheSecretValuesCannotBeReproduced(t *testing.T) {
	e := newEnv(t, func(o *api.Options) {
		o.Controller = masking{Controller: o.Controller.(*apitest.Controller), err: errors.New("fetch: repository unreachable")}
	})
	e.ctl.LogLines = []api.LogLine{{Service: "web", Task: "t1", Text: "password is hunter2-value"}}
	resp, b := e.do(t, "GET", "/api/v1/applications/shop/logs", adminToken, "")
	if resp.StatusCode != 503 || strings.Contains(string(b), "hunter2-value") || !strings.Contains(string(b), "withheld") ||
		!strings.Contains(string(b), "repository unreachable") {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
}

func TestLogs_sayMaskingIsOffWhenTheControllerCannotMask(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.LogLines = logLines(1, "web")
	resp, b := e.do(t, "GET", "/api/v1/applications/shop/logs", adminToken, "")
	if h := resp.Header.Get(api.LogMaskingHeader); resp.StatusCode != 200 || !strings.HasPrefix(h, "off: ") {
		t.Fatalf("%d %s %q: %s", resp.StatusCode, api.LogMaskingHeader, h, b)
	}
}
