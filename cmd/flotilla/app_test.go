package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/client"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/events"
)

const (
	cliAdminToken = "cli-admin-0123456789"
	cliReadToken  = "cli-read-0123456789"
)

// cliEnv is a controller API on httptest backed by the in-memory fake.
type cliEnv struct {
	srv    *httptest.Server
	ctl    *apitest.Controller
	broker *events.Broker
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	e := &cliEnv{ctl: apitest.NewController(apitest.Sample()...), broker: events.NewBroker(events.BrokerOptions{})}
	e.ctl.Events = e.broker
	e.ctl.SetHistory("shop", []charts.Release{
		{Name: "shop", Revision: 7, Commit: "aaaaaaaaaaaa", Trigger: "automated", Author: "Ann", Message: "bump web", Time: time.Now()},
		{Name: "shop", Revision: 6, Commit: "999999999999", Trigger: "sync by admin"},
	})
	e.ctl.SetDiff("shop", api.Diff{
		Revision: "bbbbbbbbbbbb", Deployed: "aaaaaaaaaaaa",
		Services: []api.ServiceDiff{{Name: "web", Change: api.ServiceUpdate,
			Fields: []drift.Change{{Field: "image", Desired: "shop/web:2", Live: "shop/web:1"}}}},
		PendingRemovals: []string{"service shop_old"},
		Manifest:        "--- deployed\n+++ declared\n-image: shop/web:1\n+image: shop/web:2\n",
	})
	e.srv = httptest.NewServer(api.New(api.Options{
		Controller: e.ctl,
		Events:     e.broker,
		Logger:     slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{
			{Name: "admin", Role: access.Admin, Secret: cliAdminToken},
			{Name: "read", Role: access.Viewer, Secret: cliReadToken},
		},
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *cliEnv) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.srv.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func opts(format string) *apiOptions { return &apiOptions{Output: format} }

func TestAppList_tableJSONAndYAML(t *testing.T) {
	e := newCLIEnv(t)
	c := e.client(t, cliReadToken)
	var out bytes.Buffer
	if err := runAppList(t.Context(), c, appListOptions{opts(outputTable)}, &out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	if !regexp.MustCompile(`(?m)^NAME +SWARM +SYNC`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^billing +eu +Synced`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^shop +local +OutOfSync`).MatchString(table) {
		t.Errorf("the SWARM column does not name each application's swarm:\n%s", table)
	}
	for _, want := range []string{"NAME", "billing", "shop", "OutOfSync (git)", "Progressing", "aaaaaaaa → bbbbbbbb", "1/2", "web: 1 of 3 tasks running"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	out.Reset()
	if err := runAppList(t.Context(), c, appListOptions{opts(outputJSON)}, &out); err != nil {
		t.Fatal(err)
	}
	var list api.ApplicationList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("json output: %v\n%s", err, out.String())
	}

	out.Reset()
	if err := runAppList(t.Context(), c, appListOptions{opts(outputYAML)}, &out); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &generic); err != nil {
		t.Fatalf("yaml output: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "name: shop") || !strings.Contains(out.String(), "seenRevision:") {
		t.Fatalf("yaml does not use the API's field names:\n%s", out.String())
	}
}

func TestAppGet(t *testing.T) {
	e := newCLIEnv(t)
	c := e.client(t, cliReadToken)
	var out bytes.Buffer
	if err := runAppGet(t.Context(), c, appGetOptions{apiOptions: opts(outputTable), Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:", "shop", "Seen revision:", "SERVICE", "web", "1/3", "worker"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	err := runAppGet(t.Context(), c, appGetOptions{apiOptions: opts(outputTable), Name: "nope"}, &out)
	if err == nil || !strings.Contains(err.Error(), "app list") {
		t.Fatalf("unknown app: %v", err)
	}
}

func TestAppHistoryAndDiff(t *testing.T) {
	e := newCLIEnv(t)
	c := e.client(t, cliReadToken)
	var out bytes.Buffer
	if err := runAppHistory(t.Context(), c, appHistoryOptions{apiOptions: opts(outputTable), Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REVISION", "7", "aaaaaaaa", "bump web", "sync by admin"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("history lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runAppHistory(t.Context(), c, appHistoryOptions{apiOptions: opts(outputTable), Name: "billing"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no recorded revisions") {
		t.Errorf("empty history: %s", out.String())
	}

	out.Reset()
	if err := runAppDiff(t.Context(), c, appDiffOptions{apiOptions: opts(outputTable), Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"~ web (update)", "image:", "live shop/web:1", "declared shop/web:2", "- service shop_old", "+image: shop/web:2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAppSync_withoutWaitQueues(t *testing.T) {
	e := newCLIEnv(t)
	var out bytes.Buffer
	o := appSyncOptions{apiOptions: opts(outputTable), Name: "shop", Prune: true, Revision: "abc"}
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "queued") {
		t.Fatalf("output: %s", out.String())
	}
	if s := e.ctl.Syncs(); len(s) != 1 || !s[0].Prune || s[0].Revision != "abc" {
		t.Fatalf("syncs = %+v", s)
	}
}

func TestAppSync_waitShowsProgressAndSucceeds(t *testing.T) {
	e := newCLIEnv(t)
	var out bytes.Buffer
	o := appSyncOptions{apiOptions: opts(outputTable), Name: "shop", waitOptions: waitOptions{Wait: true, Timeout: time.Minute}}
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false); err != nil {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"shop: sync started", "shop/web: 3/3 tasks  completed", "shop/worker: 1/1 tasks", "shop: sync succeeded (upgrade), release 8; sync Synced, health Healthy"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b[") {
		t.Error("plain output contains terminal escapes")
	}
}

func TestAppSync_waitOnATerminalRedrawsServices(t *testing.T) {
	e := newCLIEnv(t)
	var out bytes.Buffer
	o := appSyncOptions{apiOptions: opts(outputTable), Name: "shop", waitOptions: waitOptions{Wait: true, Timeout: time.Minute}}
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, true); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"\x1b[2K", "✓ web", "3/3", "✓ worker", "sync succeeded"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, s)
		}
	}
}

func TestAppSync_waitExitsNonZeroWhenTheSyncFails(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.Result = func(string, api.SyncOptions) api.SyncResult {
		return api.SyncResult{Err: errors.New("render: compose.yaml: services.web.image: required")}
	}
	var out bytes.Buffer
	o := appSyncOptions{apiOptions: opts(outputTable), Name: "shop", waitOptions: waitOptions{Wait: true, Timeout: time.Minute}}
	err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false)
	if exitCodeOf(err) != exitFailed {
		t.Fatalf("err = %v, want exit %d", err, exitFailed)
	}
	if !strings.Contains(out.String(), "FAILED: render: compose.yaml") {
		t.Fatalf("output: %s", out.String())
	}

	// -o json still prints the API's object, and still fails.
	out.Reset()
	o.Output = outputJSON
	err = runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false)
	var r api.OperationResponse
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil || r.Phase != api.Failed || exitCodeOf(err) != exitFailed {
		t.Fatalf("json: %v %+v %v\n%s", jerr, r, err, out.String())
	}
}

func TestAppSync_waitExitsNonZeroOnTimeout(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.Hold = make(chan struct{})
	defer close(e.ctl.Hold)
	var out bytes.Buffer
	o := appSyncOptions{apiOptions: opts(outputTable), Name: "shop", waitOptions: waitOptions{Wait: true, Timeout: 100 * time.Millisecond}}
	err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false)
	if exitCodeOf(err) != exitFailed {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(out.String(), "did not finish in time") {
		t.Fatalf("output: %s", out.String())
	}
}

func TestAppSync_readTokenIsToldWhichRoleItNeeds(t *testing.T) {
	e := newCLIEnv(t)
	err := runAppSync(t.Context(), e.client(t, cliReadToken), appSyncOptions{apiOptions: opts(outputTable), Name: "shop"}, &bytes.Buffer{}, false)
	if err == nil || !strings.Contains(err.Error(), "needs operator") {
		t.Fatalf("err = %v", err)
	}
	err = runAppSync(t.Context(), e.client(t, ""), appSyncOptions{apiOptions: opts(outputTable), Name: "shop"}, &bytes.Buffer{}, false)
	if err == nil || !strings.Contains(err.Error(), "FLOTILLA_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
}

func TestAppRollbackAndRefresh(t *testing.T) {
	e := newCLIEnv(t)
	c := e.client(t, cliAdminToken)
	var out bytes.Buffer
	o := appRollbackOptions{apiOptions: opts(outputTable), Name: "shop", Revision: 6, waitOptions: waitOptions{Wait: true, Timeout: time.Minute}}
	if err := runAppRollback(t.Context(), c, o, &out, false); err != nil {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "rollback to release 6 succeeded") {
		t.Fatalf("output: %s", out.String())
	}
	if r := e.ctl.Rollbacks(); len(r) != 1 || r[0] != 6 {
		t.Fatalf("rollbacks = %v", r)
	}

	out.Reset()
	if err := runAppRefresh(t.Context(), c, appRefreshOptions{apiOptions: opts(outputTable), Name: "billing"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "billing: refresh queued") {
		t.Fatalf("output: %s", out.String())
	}
}

// execute runs the real command tree, as main does, capturing stdout.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCLI_wiringThroughTheRootCommand(t *testing.T) {
	e := newCLIEnv(t)
	t.Setenv(envToken, cliReadToken)
	t.Setenv(envTokenFile, "")
	out, err := execute(t, "app", "list", "--server", e.srv.URL)
	if err != nil || !strings.Contains(out, "shop") {
		t.Fatalf("app list: %v\n%s", err, out)
	}
	out, err = execute(t, "app", "get", "shop", "--server", e.srv.URL, "-o", "json")
	if err != nil || !strings.Contains(out, `"name": "shop"`) {
		t.Fatalf("app get -o json: %v\n%s", err, out)
	}
	_, err = execute(t, "app", "list", "--server", e.srv.URL, "-o", "xml")
	if exitCodeOf(err) != exitMisuse {
		t.Fatalf("bad -o: %v", err)
	}
	_, err = execute(t, "app", "rollback", "shop", "latest", "--server", e.srv.URL)
	if exitCodeOf(err) != exitMisuse {
		t.Fatalf("bad revision: %v", err)
	}

	// FLOTILLA_SERVER is the default for --server.
	t.Setenv(envServer, e.srv.URL)
	if out, err := execute(t, "app", "list"); err != nil || !strings.Contains(out, "billing") {
		t.Fatalf("FLOTILLA_SERVER: %v\n%s", err, out)
	}
}

func TestCLI_completionIsReachable(t *testing.T) {
	out, err := execute(t, "completion", "bash")
	if err != nil || !strings.Contains(out, "bash completion") {
		t.Fatalf("completion bash: %v\n%.200s", err, out)
	}
	e := newCLIEnv(t)
	t.Setenv(envToken, cliReadToken)
	out, err = execute(t, "__complete", "app", "get", "--server", e.srv.URL, "")
	if err != nil || !strings.Contains(out, "shop") || !strings.Contains(out, "billing") {
		t.Fatalf("app name completion: %v\n%s", err, out)
	}
}
