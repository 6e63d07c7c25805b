package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/internal/syncbuf"
	"github.com/flotilla-gitops/flotilla/metrics"
)

const (
	adminToken = "admin-secret-0123456789"
	readToken  = "read-secret-0123456789"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer = syncbuf.Buffer

type env struct {
	srv    *httptest.Server
	ctl    *apitest.Controller
	broker *events.Broker
	logs   *syncBuffer
}

func newEnv(t *testing.T, mod func(*api.Options)) *env {
	t.Helper()
	e := &env{
		ctl:    apitest.NewController(apitest.Sample()...),
		broker: events.NewBroker(events.BrokerOptions{}),
		logs:   &syncBuffer{},
	}
	e.ctl.Events = e.broker
	opts := api.Options{
		Controller: e.ctl,
		Events:     e.broker,
		Metrics:    metrics.New(),
		Logger:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tokens: api.Tokens{
			{Name: "admin", Role: access.Admin, Secret: adminToken},
			{Name: "read", Role: access.Viewer, Secret: readToken},
		},
		Heartbeat: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	e.srv = httptest.NewServer(api.New(opts))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) do(t *testing.T, method, path, token, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method != http.MethodGet && method != http.MethodHead {
		// What the CLI and the UI send with every write.
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, b)
	}
	return v
}

func TestAPI_listApplications(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.do(t, "GET", "/api/v1/applications", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	list := decode[api.ApplicationList](t, b)
	if len(list.Items) != 2 || list.Items[0].Name != "billing" || list.Items[1].Name != "shop" {
		t.Fatalf("items = %+v", list.Items)
	}
	shop := list.Items[1]
	if shop.ServiceCount != 2 || shop.ServicesHealthy != 1 || shop.Services != nil {
		t.Fatalf("shop summary = %+v, want 2 services, 1 healthy, no detail", shop)
	}
	if shop.Sync != application.OutOfSync || shop.SyncReason != application.ReasonGit {
		t.Fatalf("shop sync = %s/%s", shop.Sync, shop.SyncReason)
	}
}

func TestAPI_getApplication(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.do(t, "GET", "/api/v1/applications/shop", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	st := decode[application.Status](t, b)
	if st.Name != "shop" || len(st.Services) != 2 {
		t.Fatalf("status = %+v", st)
	}

	resp, b = e.do(t, "GET", "/api/v1/applications/nope", readToken, "")
	if resp.StatusCode != 404 {
		t.Fatalf("unknown app: status %d", resp.StatusCode)
	}
	if apiErr := decode[api.Error](t, b); apiErr.Code != api.CodeNotFound || !strings.Contains(apiErr.Message, "nope") {
		t.Fatalf("error = %+v", apiErr)
	}
}

func TestAPI_historyAndDiff(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.SetHistory("shop", []charts.Release{{Name: "shop", Revision: 7, Commit: "aaaa"}, {Name: "shop", Revision: 6, Commit: "9999"}})
	e.ctl.SetDiff("shop", api.Diff{Revision: "bbbb", Services: []api.ServiceDiff{{Name: "web", Change: api.ServiceUpdate}}})

	resp, b := e.do(t, "GET", "/api/v1/applications/shop/history", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("history status %d: %s", resp.StatusCode, b)
	}
	if h := decode[api.HistoryList](t, b); len(h.Items) != 2 || h.Items[0].Revision != 7 {
		t.Fatalf("history = %+v", h)
	}
	_, b = e.do(t, "GET", "/api/v1/applications/billing/history", readToken, "")
	if !strings.Contains(string(b), `"items":[]`) {
		t.Fatalf("empty history = %s, want an empty list", b)
	}

	resp, b = e.do(t, "GET", "/api/v1/applications/shop/diff", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("diff status %d: %s", resp.StatusCode, b)
	}
	if d := decode[api.Diff](t, b); d.App != "shop" || len(d.Services) != 1 || d.Services[0].Change != api.ServiceUpdate {
		t.Fatalf("diff = %+v", d)
	}
}

func TestAPI_syncQueuesAndLogsWho(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync", adminToken, `{"prune":true,"revision":"abc123"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if r := decode[api.OperationResponse](t, b); r.Phase != api.Queued || r.App != "shop" {
		t.Fatalf("response = %+v", r)
	}
	syncs := e.ctl.Syncs()
	if len(syncs) != 1 || !syncs[0].Prune || syncs[0].Revision != "abc123" || syncs[0].By != "admin" {
		t.Fatalf("sync requests = %+v", syncs)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "sync requested") || !strings.Contains(logs, "by=admin") || !strings.Contains(logs, "app=shop") {
		t.Fatalf("write not logged with who did it:\n%s", logs)
	}
	if strings.Contains(logs, adminToken) {
		t.Fatal("the token reached the log")
	}
}

func TestAPI_syncWait(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", adminToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	r := decode[api.OperationResponse](t, b)
	if r.Phase != api.Succeeded || r.Revision != 8 || r.Status == nil || r.Status.Sync != application.Synced {
		t.Fatalf("response = %+v", r)
	}
}

func TestAPI_syncWaitFailureIsSanitised(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.Result = func(string, api.SyncOptions) api.SyncResult {
		return api.SyncResult{Err: errors.New("fetch https://bob:hunter2@git.example.com/shop.git?private_token=xyz: authentication required")}
	}
	_, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", adminToken, "")
	r := decode[api.OperationResponse](t, b)
	if r.Phase != api.Failed || r.Error == "" {
		t.Fatalf("response = %+v", r)
	}
	for _, secret := range []string{"hunter2", "bob:", "xyz"} {
		if strings.Contains(string(b), secret) {
			t.Fatalf("response leaks %q: %s", secret, b)
		}
	}
}

func TestAPI_syncWaitTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.Hold = make(chan struct{})
	defer close(e.ctl.Hold)
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true&timeout=50ms", adminToken, "")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if r := decode[api.OperationResponse](t, b); r.Phase != api.Running {
		t.Fatalf("phase = %s, want Running", r.Phase)
	}
}

func TestAPI_badRequests(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/applications/shop/sync", `{"prune":"yes"}`},
		{"/api/v1/applications/shop/sync", `{"unknown":1}`},
		{"/api/v1/applications/shop/sync?wait=maybe", ``},
		{"/api/v1/applications/shop/sync?wait=true&timeout=soon", ``},
		{"/api/v1/applications/shop/rollback", `{}`},
	} {
		resp, b := e.do(t, "POST", tc.path, adminToken, tc.body)
		if resp.StatusCode != 400 {
			t.Errorf("%s %s: status %d, want 400: %s", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	resp, _ := e.do(t, "GET", "/api/v1/nothing", adminToken, "")
	if resp.StatusCode != 404 {
		t.Errorf("unknown route: status %d", resp.StatusCode)
	}
}

func TestAPI_rollbackAndRefresh(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.SetHistory("shop", []charts.Release{{Name: "shop", Revision: 7}, {Name: "shop", Revision: 6}})
	resp, b := e.do(t, "POST", "/api/v1/applications/shop/rollback?wait=true", adminToken, `{"revision":6}`)
	if resp.StatusCode != 200 {
		t.Fatalf("rollback status %d: %s", resp.StatusCode, b)
	}
	if got := e.ctl.Rollbacks(); len(got) != 1 || got[0] != 6 {
		t.Fatalf("rollbacks = %v", got)
	}
	resp, _ = e.do(t, "POST", "/api/v1/applications/shop/rollback", adminToken, `{"revision":99}`)
	if resp.StatusCode != 404 {
		t.Fatalf("rollback to unknown revision: status %d", resp.StatusCode)
	}

	resp, b = e.do(t, "POST", "/api/v1/applications/billing/refresh", adminToken, "")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("refresh status %d: %s", resp.StatusCode, b)
	}
	if got := e.ctl.Refreshed(); len(got) != 1 || got[0] != "billing" {
		t.Fatalf("refreshed = %v", got)
	}
	if !strings.Contains(e.logs.String(), "rollback requested") || !strings.Contains(e.logs.String(), "refresh requested") {
		t.Fatal("rollback or refresh not logged")
	}
}

func TestAPI_controllerWithoutExtrasAnswers501(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Controller = apitest.NewMinimalController(apitest.Sample()...) })
	for _, tc := range []struct{ method, path, body, missing string }{
		{"GET", "/api/v1/applications/shop/history", "", "HistoryReader"},
		{"GET", "/api/v1/applications/shop/diff", "", "Differ"},
		{"POST", "/api/v1/applications/shop/rollback", `{"revision":1}`, "Rollbacker"},
		{"POST", "/api/v1/applications/shop/sync", `{"dryRun":true}`, "dry run"},
	} {
		resp, b := e.do(t, tc.method, tc.path, adminToken, tc.body)
		if resp.StatusCode != http.StatusNotImplemented {
			t.Errorf("%s %s: status %d, want 501", tc.method, tc.path, resp.StatusCode)
			continue
		}
		if apiErr := decode[api.Error](t, b); apiErr.Code != api.CodeNotImplemented || !strings.Contains(apiErr.Message, tc.missing) {
			t.Errorf("%s: error %+v does not name %q", tc.path, apiErr, tc.missing)
		}
	}
	// What the minimal controller does offer still works.
	if resp, _ := e.do(t, "POST", "/api/v1/applications/shop/sync", adminToken, ""); resp.StatusCode != http.StatusAccepted {
		t.Errorf("plain sync: status %d", resp.StatusCode)
	}
}

func TestAPI_auth(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"no token", "GET", "/api/v1/applications", "", 401},
		{"wrong token", "GET", "/api/v1/applications", "nope", 401},
		{"prefix of a token", "GET", "/api/v1/applications", adminToken[:10], 401},
		{"read token reads", "GET", "/api/v1/applications", readToken, 200},
		{"read token may not sync", "POST", "/api/v1/applications/shop/sync", readToken, 403},
		{"read token may not refresh", "POST", "/api/v1/applications/shop/refresh", readToken, 403},
		{"admin syncs", "POST", "/api/v1/applications/shop/sync", adminToken, 202},
		{"admin reads", "GET", "/api/v1/applications/shop", adminToken, 200},
		{"healthz is open", "GET", "/healthz", "", 200},
		{"readyz is open", "GET", "/readyz", "", 200},
		{"metrics needs a token", "GET", "/metrics", "", 401},
		{"metrics with read token", "GET", "/metrics", readToken, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := e.do(t, tc.method, tc.path, tc.token, "")
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, b)
			}
			if tc.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
}

func TestAPI_publicMetricsAndNoAuth(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.PublicMetrics = true })
	if resp, _ := e.do(t, "GET", "/metrics", "", ""); resp.StatusCode != 200 {
		t.Fatalf("public metrics: status %d", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/api/v1/applications", "", ""); resp.StatusCode != 401 {
		t.Fatalf("public metrics opened the API: status %d", resp.StatusCode)
	}

	open := newEnv(t, func(o *api.Options) { o.Tokens = nil; o.NoAuth = true })
	if resp, _ := open.do(t, "POST", "/api/v1/applications/shop/sync", "", ""); resp.StatusCode != 202 {
		t.Fatalf("no-auth sync: status %d", resp.StatusCode)
	}
	if !strings.Contains(open.logs.String(), "by=anonymous") {
		t.Fatal("no-auth write not logged as anonymous")
	}
}

func TestAPI_readyz(t *testing.T) {
	e := newEnv(t, func(o *api.Options) {
		o.Ready = func(context.Context) error { return errors.New("swarm unreachable at tcp://admin:pw@10.0.0.1:2376") }
	})
	resp, b := e.do(t, "GET", "/readyz", "", "")
	if resp.StatusCode != 503 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if strings.Contains(string(b), "pw@") {
		t.Fatalf("readyz leaks credentials: %s", b)
	}
}

func TestAPI_metricsScrapeParses(t *testing.T) {
	m := metrics.New()
	m.SetStatus(application.Status{Name: "shop", Sync: application.Synced, Health: application.Healthy})
	e := newEnv(t, func(o *api.Options) { o.Metrics = m })
	resp, b := e.do(t, "GET", "/metrics", readToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if _, ok := fams["flotilla_app_sync_status"]; !ok {
		t.Fatal("no flotilla_app_sync_status in the scrape")
	}
}

// sseReader reads frames from an event stream.
type sseReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

type frame struct {
	id, event, data, comment string
}

func openStream(t *testing.T, ctx context.Context, e *env, lastID string, query string) *sseReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := &sseReader{resp: resp, sc: bufio.NewScanner(resp.Body)}
	// The retry frame is written once the subscription exists.
	if f := r.next(t); !strings.HasPrefix(f.comment, "retry") {
		t.Fatalf("first frame %+v, want the retry line", f)
	}
	return r
}

func (r *sseReader) next(t *testing.T) frame {
	t.Helper()
	var f frame
	got := false
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if got {
				return f
			}
			continue
		}
		got = true
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "id":
			f.id = v
		case "event":
			f.event = v
		case "data":
			f.data = v
		case "retry":
			f.comment = "retry " + v
		case "":
			f.comment = v
		}
	}
	t.Fatalf("stream ended: %v", r.sc.Err())
	return f
}

// nextEvent skips heartbeats.
func (r *sseReader) nextEvent(t *testing.T) frame {
	t.Helper()
	for {
		if f := r.next(t); f.event != "" {
			return f
		}
	}
}

func TestAPI_eventStreamThroughEveryMiddleware(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	first := openStream(t, ctx, e, "", "")
	e.broker.Publish(events.Event{Type: events.SyncStarted, App: "shop"})
	f := first.nextEvent(t)
	if f.event != string(events.SyncStarted) || f.id != "1" {
		t.Fatalf("frame = %+v", f)
	}
	ev := decode[events.Event](t, []byte(f.data))
	if ev.App != "shop" || ev.ID != 1 {
		t.Fatalf("event = %+v", ev)
	}
	// A heartbeat arrives on an idle stream.
	if hb := first.next(t); !strings.Contains(hb.comment, "heartbeat") {
		t.Fatalf("frame %+v, want a heartbeat", hb)
	}
	first.resp.Body.Close() // disconnect

	// Missed while away.
	e.broker.Publish(events.Event{Type: events.SyncSucceeded, App: "shop"})
	e.broker.Publish(events.Event{Type: events.HealthChanged, App: "billing"})

	again := openStream(t, ctx, e, f.id, "")
	for _, want := range []string{"2", "3"} {
		if g := again.nextEvent(t); g.id != want {
			t.Fatalf("replayed id %s, want %s", g.id, want)
		}
	}
	e.broker.Publish(events.Event{Type: events.Pruned, App: "shop"})
	if g := again.nextEvent(t); g.id != "4" || g.event != string(events.Pruned) {
		t.Fatalf("live after replay = %+v", g)
	}

	// ?lastEventId= and ?app= work for clients that cannot set headers.
	filtered := openStream(t, ctx, e, "", "?lastEventId=1&app=shop")
	for _, want := range []string{"2", "4"} {
		if g := filtered.nextEvent(t); g.id != want {
			t.Fatalf("filtered replay id %s, want %s", g.id, want)
		}
	}
}

func TestAPI_eventStreamLaggedSubscriberIsToldWhereToResume(t *testing.T) {
	broker := events.NewBroker(events.BrokerOptions{QueueSize: 2})
	e := newEnv(t, func(o *api.Options) { o.Events = broker })
	e.broker = broker
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := openStream(t, ctx, e, "", "")
	// Flood faster than one client reads: nothing blocks, and the stream
	// ends with a lagged frame.
	for i := range 5000 {
		broker.Publish(events.Event{Type: events.HealthChanged, Message: fmt.Sprint(i)})
	}
	var last frame
	for {
		last = s.nextEvent(t)
		if last.event == string(events.Lagged) {
			break
		}
	}
	if last.id == "" {
		t.Fatal("lagged frame without an id to resume from")
	}
}

func TestAPI_badLastEventID(t *testing.T) {
	e := newEnv(t, nil)
	resp, _ := e.do(t, "GET", "/api/v1/events?lastEventId=abc", readToken, "")
	if resp.StatusCode != 400 {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
}

func TestAPI_listManyApplicationsIsFast(t *testing.T) {
	var many []application.Status
	for i := range 5000 {
		many = append(many, application.Status{Name: fmt.Sprintf("app-%05d", i), Sync: application.Synced, Health: application.Healthy,
			Services: []application.ServiceStatus{{Name: "web", Health: application.Healthy, Running: 1, Desired: 1}}})
	}
	h := api.New(api.Options{Controller: apitest.NewController(many...), NoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	// Without authentication the API answers only to a loopback Host.
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/applications", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if n := len(decode[api.ApplicationList](t, rec.Body.Bytes()).Items); n != 5000 {
		t.Fatalf("%d items", n)
	}
}

func BenchmarkAPI_list5000(b *testing.B) {
	var many []application.Status
	for i := range 5000 {
		many = append(many, application.Status{Name: fmt.Sprintf("app-%05d", i), Sync: application.Synced, Health: application.Healthy})
	}
	h := api.New(api.Options{Controller: apitest.NewController(many...), NoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/applications", nil))
	}
}

// The list carries what a row shows; the field-by-field drift, what was
// corrected and the sweep's report stay on the application's own page.
func TestAPI_theListLeavesDriftAndTheSweepReportToTheApplicationsPage(t *testing.T) {
	shop := apitest.Sample()[1]
	shop.Drift = []application.Drift{{Service: "web", Field: "Image", Desired: "shop/web:2", Live: "shop/web:1"}}
	shop.Corrected = []application.Drift{{Service: "worker", Field: "Env", Desired: "A=1", Live: "A=2"}}
	shop.Sweep = &application.SweepStatus{DryRun: true, Pending: []string{"config shop_old"}, Messages: []string{"kept: in use by service web"}}
	shop.Warnings = []string{"a field written was not kept by the daemon"}
	e := newEnv(t, func(o *api.Options) { o.Controller = apitest.NewController(shop) })

	_, b := e.do(t, "GET", "/api/v1/applications", readToken, "")
	list := decode[api.ApplicationList](t, b)
	if len(list.Items) != 1 {
		t.Fatalf("items = %+v", list.Items)
	}
	got := list.Items[0]
	if got.Drift != nil || got.Corrected != nil || got.Sweep != nil || got.Services != nil {
		t.Errorf("the list carries the detail: drift %v, corrected %v, sweep %+v, services %v", got.Drift, got.Corrected, got.Sweep, got.Services)
	}
	if got.Sync != application.OutOfSync || len(got.Warnings) != 1 || got.ServiceCount != 2 {
		t.Errorf("the list lost what a row shows: %+v", got)
	}

	_, b = e.do(t, "GET", "/api/v1/applications/shop", readToken, "")
	st := decode[application.Status](t, b)
	if len(st.Drift) != 1 || len(st.Corrected) != 1 || st.Sweep == nil || len(st.Sweep.Pending) != 1 {
		t.Errorf("the application's page lost its detail: drift %v, corrected %v, sweep %+v", st.Drift, st.Corrected, st.Sweep)
	}
}
